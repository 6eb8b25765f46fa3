#!/usr/bin/env python3
"""Checkpoints as Hugging Face publishes them, for kiln's loader: a small GPT-2 written by
`transformers`' save_pretrained, sharded (max_shard_size) in f32 and whole in bf16, each folder
with the config.json save_pretrained writes, and the logits transformers computes. Every
parameter is perturbed from its initialisation (nonzero biases, LayerNorm gains other than 1),
so that a mis-mapped bias or norm shows.

    build/fixture-venv/bin/pip install torch transformers safetensors numpy
    build/fixture-venv/bin/python tests/reference/make_checkpoint_fixtures.py

Writes tests/fixtures/hf_gpt2/{sharded,bf16}/ and tokens.npy, logits.npy (the f32 model),
logits_bf16.npy (the same model with its weights rounded to bf16, computed in f32: what kiln
computes from the bf16 file, which it widens to f32 at load); and tests/fixtures/hf_bert/: a
small `BertModel` (every parameter perturbed the same way) saved by save_pretrained
(config.json, model.safetensors), tokens.npy, token_type_ids.npy (both types) and
last_hidden_state.npy. `--parts gpt2,bert` (default both) writes only those named.
"""
import argparse
import os

import numpy as np
import torch
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "hf_gpt2")


def gpt2():
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=400, n_positions=64)
    model = GPT2LMHeadModel(cfg).eval()
    # Every parameter perturbed: at its default initialisation every bias is 0 and every
    # LayerNorm gain 1, so a dropped bias or swapped norms would still give these logits.
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.05 * torch.randn_like(p))
    tokens = torch.tensor([[5, 17, 300, 42, 8, 99, 230, 1]])
    with torch.inference_mode():
        logits = model(tokens).logits[0].float().numpy()
    os.makedirs(ROOT, exist_ok=True)
    model.save_pretrained(os.path.join(ROOT, "sharded"), max_shard_size="200KB")
    rounded = GPT2LMHeadModel(cfg).eval()
    rounded.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
    with torch.inference_mode():
        logits_bf16 = rounded(tokens).logits[0].float().numpy()
    model.to(torch.bfloat16).save_pretrained(os.path.join(ROOT, "bf16"))
    np.save(os.path.join(ROOT, "tokens.npy"), tokens[0].numpy().astype(np.int32))
    np.save(os.path.join(ROOT, "logits.npy"), logits)
    np.save(os.path.join(ROOT, "logits_bf16.npy"), logits_bf16)
    for d in ("sharded", "bf16"):
        print(d, sorted(os.listdir(os.path.join(ROOT, d))))
    print("max |logits - logits_bf16|", float(np.abs(logits - logits_bf16).max()), "max |logits|", float(np.abs(logits).max()))


def bert():
    """A BertModel as transformers saves it (its config.json is also what bert-compile --config
    reads), every parameter perturbed, and its last_hidden_state for tokens of both types."""
    torch.manual_seed(1)
    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256, vocab_size=512,
                     max_position_embeddings=128)
    model = BertModel(cfg, add_pooling_layer=False).eval()
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.add_(0.05 * torch.randn_like(p))
    tokens = torch.tensor([[101, 7, 300, 42, 511, 8, 102, 99, 230, 1, 102]])
    types = torch.tensor([[0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1]])
    with torch.inference_mode():
        hidden = model(input_ids=tokens, token_type_ids=types).last_hidden_state[0].float().numpy()
    out = os.path.join(ROOT, "..", "hf_bert")
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    np.save(os.path.join(out, "tokens.npy"), tokens[0].numpy().astype(np.int32))
    np.save(os.path.join(out, "token_type_ids.npy"), types[0].numpy().astype(np.int32))
    np.save(os.path.join(out, "last_hidden_state.npy"), hidden)
    print("hf_bert", sorted(os.listdir(out)), "max |hidden|", float(np.abs(hidden).max()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="gpt2,bert")
    parts = ap.parse_args().parts.split(",")
    if "gpt2" in parts:
        gpt2()
    if "bert" in parts:
        bert()


if __name__ == "__main__":
    main()
