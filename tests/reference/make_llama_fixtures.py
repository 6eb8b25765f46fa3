#!/usr/bin/env python3
"""Llama-family fixtures written by `transformers`' own LlamaForCausalLM, for examples/llama.

Every parameter is perturbed (matrices N(0, 0.1), norm gains 1 + N(0, 0.1)), so a mis-mapped
weight, a swapped norm or a wrong rotary pairing shows; grouped-query attention (4 query heads,
2 key and value heads), a non-default rope_theta and RMS epsilon, an untied head.

tests/fixtures/hf_llama/: the checkpoint as save_pretrained writes it (config.json,
model.safetensors), one prompt's tokens.npy and logits.npy (eager attention, f32), and
generated.npy: the prompt's 12 greedy tokens (model.generate, do_sample False).

tests/fixtures/hf_llama_bias/: the same with attention_bias and mlp_bias (biases perturbed too):
the checkpoint, tokens.npy, logits.npy.

tests/fixtures/hf_qwen2/ and hf_qwen3/: Qwen2ForCausalLM (biases on q, k and v, none on o) and
Qwen3ForCausalLM (RMSNorm of each head of q and k, a head dim of its own: 4 heads of 24 over a
width of 64), the same sizes otherwise, every parameter perturbed (the q/k norm gains as norms):
the checkpoint, tokens.npy, logits.npy and generated.npy (10 greedy tokens).

tests/fixtures/hf_mistral/: MistralForCausalLM with a sliding window of 5 positions (GQA), a
17-token prompt: the checkpoint, tokens.npy, logits.npy and generated.npy (10 greedy tokens).

tests/fixtures/hf_llama31/ and hf_llama_linear/: the small Llama with scaled rotary positions,
Llama 3.1's (rope_type llama3: factor 4, low_freq_factor 1, high_freq_factor 8, an original
context of 64, so that of the head dim's 8 pairs 2 keep their frequency, 2 are blended and 4 are
divided by 4) and linear (factor 2.5): the checkpoint, tokens.npy, logits.npy and generated.npy
(10 greedy tokens).

tests/fixtures/hf_qwen2/model.gguf, hf_qwen3/model.gguf, hf_llama_bias/model.gguf (`gguf_relatives`):
the same checkpoints written as GGUF files as llama.cpp's converter writes them (to_gguf).

tests/fixtures/llama_grad_b3/: the same config and weights (weights.safetensors under the
checkpoint's names), a batch of B = 3 sequences of 37 positions (no multiple of any block),
targets with a few -1, the mean cross-entropy (loss.npy) and every parameter's gradient from
autograd (grads.safetensors).

    build/peers-venv/bin/python tests/reference/make_llama_fixtures.py [hf_llama,hf_llama_bias,hf_qwen2,hf_qwen3,hf_mistral,hf_llama31,hf_llama_linear,gguf_relatives,llama_grad_b3]

The fixtures are committed, so the test suite needs no torch.
"""
import json
import os
import shutil

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")


def perturbed(model, seed):
    """Every parameter perturbed: matrices and biases N(0, 0.1), norm gains 1 + N(0, 0.1)."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model


def small_llama(seed=0, tied=False, bias=False, rope=None):
    torch.manual_seed(seed)
    rotary = dict(rope_parameters=dict(rope_theta=500.0, **rope)) if rope else dict(rope_theta=500.0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rms_norm_eps=1e-5, tie_word_embeddings=tied, hidden_act="silu",
                      attention_bias=bias, mlp_bias=bias, bos_token_id=1, eos_token_id=2,
                      attn_implementation="eager", **rotary)
    return perturbed(LlamaForCausalLM(cfg).float().eval(), seed)


def save_with_logits(model, name, tokens, generate=10):
    """tests/fixtures/<name>: the checkpoint as save_pretrained writes it, tokens.npy, the
    forward's logits.npy (eager, f32) and, when `generate`, generated.npy: that many greedy tokens
    (every position attended: a prompt holding id 0 is not padding)."""
    out = os.path.join(ROOT, name)
    shutil.rmtree(out, ignore_errors=True)
    model.save_pretrained(out, safe_serialization=True)
    if os.path.exists(os.path.join(out, "generation_config.json")):
        os.remove(os.path.join(out, "generation_config.json"))
    tokens = torch.tensor([tokens])
    with torch.inference_mode():
        logits = model(tokens).logits[0].float().numpy()
        if generate:
            gen = model.generate(tokens, attention_mask=torch.ones_like(tokens), max_new_tokens=generate,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
    np.save(os.path.join(out, "tokens.npy"), tokens[0].numpy().astype(np.int32))
    np.save(os.path.join(out, "logits.npy"), logits)
    if generate:
        np.save(os.path.join(out, "generated.npy"), gen[0, tokens.shape[1]:].numpy().astype(np.int32))


def hf_llama():
    save_with_logits(small_llama(), "hf_llama", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3, 77, 200, 11, 299, 0, 150],
                     generate=12)


def hf_llama_bias():
    """The same small Llama with attention_bias and mlp_bias (every bias perturbed too)."""
    save_with_logits(small_llama(seed=5, bias=True), "hf_llama_bias", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3],
                     generate=0)


def hf_qwen2():
    torch.manual_seed(11)
    cfg = Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rms_norm_eps=1e-5, rope_theta=700.0, tie_word_embeddings=False, hidden_act="silu",
                      use_sliding_window=False, bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    model = perturbed(Qwen2ForCausalLM(cfg).float().eval(), 11)
    save_with_logits(model, "hf_qwen2", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3, 31, 7])


def hf_qwen3():
    torch.manual_seed(13)
    cfg = Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=24, max_position_embeddings=128,
                      rms_norm_eps=1e-5, rope_theta=700.0, tie_word_embeddings=True, hidden_act="silu",
                      attention_bias=False, use_sliding_window=False, bos_token_id=1, eos_token_id=2,
                      attn_implementation="eager")
    model = perturbed(Qwen3ForCausalLM(cfg).float().eval(), 13)
    save_with_logits(model, "hf_qwen3", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3, 31, 7])


def hf_mistral():
    """MistralForCausalLM with a sliding window of 5 (each query sees itself and the 4 keys
    before it), grouped-query attention: a 17-token prompt and 10 greedy tokens run far past it."""
    torch.manual_seed(17)
    cfg = MistralConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                        rms_norm_eps=1e-5, rope_theta=900.0, tie_word_embeddings=False, hidden_act="silu",
                        sliding_window=5, bos_token_id=1, eos_token_id=2, attn_implementation="eager")
    model = perturbed(MistralForCausalLM(cfg).float().eval(), 17)
    save_with_logits(model, "hf_mistral", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3, 31, 7, 200, 11, 299, 150])


def hf_llama31():
    """Llama 3.1's rotary scaling by wavelength (head dim 16, rope_theta 500: wavelengths 6.3,
    13.6, 29.7, 64.6, ... against 64/8 and 64/1)."""
    model = small_llama(seed=19, rope=dict(rope_type="llama3", factor=4.0, low_freq_factor=1.0, high_freq_factor=8.0,
                                           original_max_position_embeddings=64))
    save_with_logits(model, "hf_llama31", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3, 31, 7, 200, 11, 299, 150])


def hf_llama_linear():
    model = small_llama(seed=23, rope=dict(rope_type="linear", factor=2.5))
    save_with_logits(model, "hf_llama_linear", [1, 17, 250, 42, 8, 99, 230, 5, 64, 128, 3, 31, 7])


def to_gguf(name, arch, permute_qk):
    """tests/fixtures/<name>/model.gguf: the checkpoint of tests/fixtures/<name> as llama.cpp's
    converter stores it (F32): tensor names from gguf-py's own TensorNameMap for `arch`, the
    rows of q_proj and k_proj (weights and biases) permuted as its LlamaModel does for a llama
    file (`permute_qk`; its Qwen2 and Qwen3 classes leave them), the sizes as metadata."""
    import gguf
    from safetensors.numpy import load_file
    out = os.path.join(ROOT, name)
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    H, Hkv, L = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // H
    theta = cfg.get("rope_parameters", {}).get("rope_theta", cfg.get("rope_theta"))

    def permute(w, n_head):  # as convert_hf_to_gguf.py's LlamaModel.permute
        return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    names = gguf.TensorNameMap(getattr(gguf.MODEL_ARCH, arch.upper()), L)
    w = gguf.GGUFWriter(os.path.join(out, "model.gguf"), arch)
    w.add_block_count(L)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    for hf, t in sorted(load_file(os.path.join(out, "model.safetensors")).items()):
        base, kind = hf.rsplit(".", 1)
        if permute_qk and base.endswith("q_proj"):
            t = permute(t, H)
        if permute_qk and base.endswith("k_proj"):
            t = permute(t, Hkv)
        w.add_tensor(names.get_name(base) + "." + kind, np.ascontiguousarray(t, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_relatives():
    to_gguf("hf_qwen2", "qwen2", False)
    to_gguf("hf_qwen3", "qwen3", False)
    to_gguf("hf_llama_bias", "llama", True)


def llama_grad_b3(B=3, n=37):
    out = os.path.join(ROOT, "llama_grad_b3")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    model = small_llama(seed=3)
    g = torch.Generator().manual_seed(7)
    seq = torch.randint(0, model.config.vocab_size, (B, n + 1), generator=g)
    tokens, targets = seq[:, :n], seq[:, 1:].clone()
    targets[0, 4], targets[1, 17], targets[2, 0], targets[2, 36] = -1, -1, -1, -1
    model.train()
    logits = model(tokens).logits
    loss = F.cross_entropy(logits.reshape(B * n, -1), targets.reshape(B * n), ignore_index=-1)
    loss.backward()
    params = dict(model.named_parameters())
    save_file({k: v.detach().contiguous() for k, v in params.items()}, os.path.join(out, "weights.safetensors"))
    save_file({k: v.grad.contiguous() for k, v in params.items()}, os.path.join(out, "grads.safetensors"))
    np.save(os.path.join(out, "tokens.npy"), tokens.numpy().astype(np.int64))
    np.save(os.path.join(out, "targets.npy"), targets.numpy().astype(np.int64))
    np.save(os.path.join(out, "loss.npy"), np.array([loss.item()], dtype=np.float32))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(model.config.to_diff_dict() | {"model_type": "llama"}, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    import sys
    parts = sys.argv[1].split(",") if len(sys.argv) > 1 else ["hf_llama", "hf_llama_bias", "hf_qwen2", "hf_qwen3", "hf_mistral",
                                                              "gguf_relatives", "llama_grad_b3"]
    for part in parts:
        globals()[part]()
