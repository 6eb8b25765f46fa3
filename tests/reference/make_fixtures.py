#!/usr/bin/python3
"""Fixtures from PyTorch for kiln's example models (GPT-2, BERT, encoder-decoder Transformer).

Each model is written in plain PyTorch (Debian's python3-torch; Debian packages neither
transformers nor safetensors, so the models and the safetensors writer are here), with small
random weights and the parameter names and layouts of the real checkpoints, including the
tensors real files carry that are not weights. For each model this writes, under
tests/fixtures/<model>/: weights.safetensors, the inputs as .npy, and the expected output.

    /usr/bin/python3 tests/reference/make_fixtures.py      # rewrites tests/fixtures/

The fixtures are committed, so the test suite needs no torch.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
DTYPES = {torch.float32: "F32", torch.int64: "I64", torch.bool: "BOOL", torch.int32: "I32"}


def save_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        data = t.numpy().tobytes() if t.dtype != torch.bool else t.to(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = {"format": "pt", "producer": "kiln make_fixtures.py"}
    h = json.dumps(header).encode()
    h += b" " * ((8 - (len(h) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def save(model, name, array):
    d = os.path.join(ROOT, model)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, name + ".npy"), array)


def mha(x, mem, wq, bq, wk, bk, wv, bv, heads, causal):
    """q from x, k and v from mem; weights as x @ w (shape [in, out])."""
    q, k, v = x @ wq + bq, mem @ wk + bk, mem @ wv + bv
    T, S, d = q.shape[0], k.shape[0], q.shape[1]
    hd = d // heads
    q = q.view(T, heads, hd).transpose(0, 1)
    k = k.view(S, heads, hd).transpose(0, 1)
    v = v.view(S, heads, hd).transpose(0, 1)
    s = q @ k.transpose(1, 2) / math.sqrt(hd)
    if causal:
        s = s.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1 + S - T), float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, d)


def gpt2_weights(g, layers, d, vocab, ctx):
    """GPT-2's parameters under Hugging Face's names ("transformer." prefix), small and random."""
    r = lambda *s: torch.randn(*s, generator=g) * 0.1
    w = {"transformer.wte.weight": r(vocab, d) * 2, "transformer.wpe.weight": r(ctx, d) * 3}
    for i in range(layers):
        p = f"transformer.h.{i}."
        for n in ("ln_1", "ln_2"):
            w[p + n + ".weight"], w[p + n + ".bias"] = 1 + r(d), r(d)
        w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = r(d, 3 * d), r(3 * d)
        w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = r(d, d), r(d)
        w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = r(d, 4 * d), r(4 * d)
        w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = r(4 * d, d), r(d)
    w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = 1 + r(d), r(d)
    return w


def gpt2_logits(w, tokens, layers, d, heads, hidden=None):
    """GPT-2's forward pass: the logits of every position (the head tied to wte). A list given as
    `hidden` receives each block's output."""
    x = w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][: len(tokens)]
    for i in range(layers):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (d,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        W, B = w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]
        a = mha(h, h, W[:, :d], B[:d], W[:, d:2 * d], B[d:2 * d], W[:, 2 * d:], B[2 * d:], heads, True)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (d,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        if hidden is not None:
            hidden.append(x)
    x = F.layer_norm(x, (d,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    return x @ w["transformer.wte.weight"].T


def gpt2(g, layers=2, d=64, heads=4, vocab=256, ctx=64):
    w = gpt2_weights(g, layers, d, vocab, ctx)
    tokens = torch.randint(0, vocab, (23,), generator=g)
    forward = lambda tokens: gpt2_logits(w, tokens, layers, d, heads)

    logits = forward(tokens)
    # Greedy generation from a short prompt, every step's top-1 clearly ahead of the second, so
    # kiln's tokens can be compared exactly.
    prompt = torch.tensor([17, 4, 99, 3, 250])
    seq, margins = prompt.clone(), []
    for _ in range(12):
        last = forward(seq)[-1]
        top = torch.topk(last, 2).values
        margins.append(float(top[0] - top[1]))
        seq = torch.cat([seq, last.argmax().view(1)])
    assert min(margins) > 1e-3, f"greedy margins too small for an exact comparison: {min(margins)}"
    save("gpt2", "prompt", prompt.numpy().astype(np.int64))
    save("gpt2", "generated", seq[len(prompt):].numpy().astype(np.int32))
    # As Hugging Face saves it: without the "transformer." prefix, with the mask buffers.
    out = {k[len("transformer."):]: v for k, v in w.items()}
    for i in range(layers):
        out[f"h.{i}.attn.bias"] = torch.ones(1, 1, ctx, ctx, dtype=torch.bool).tril()
        out[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    os.makedirs(os.path.join(ROOT, "gpt2"), exist_ok=True)
    save_safetensors(os.path.join(ROOT, "gpt2", "weights.safetensors"), out)
    save("gpt2", "tokens", tokens.numpy().astype(np.int64))
    save("gpt2", "logits", logits.numpy().astype(np.float32))


def bert_weights(g, layers, d, vocab, ctx):
    """BERT's encoder parameters under Hugging Face's names ("bert." prefix), small and random."""
    r = lambda *s: torch.randn(*s, generator=g) * 0.1
    e = "bert.embeddings."
    w = {e + "word_embeddings.weight": r(vocab, d) * 5, e + "position_embeddings.weight": r(ctx, d),
         e + "token_type_embeddings.weight": r(2, d), e + "LayerNorm.weight": 1 + r(d), e + "LayerNorm.bias": r(d)}
    lin = lambda n, i, o: w.update({n + ".weight": r(o, i), n + ".bias": r(o)})  # nn.Linear [out, in]
    for i in range(layers):
        p = f"bert.encoder.layer.{i}."
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, d, d)
        lin(p + "attention.output.dense", d, d)
        lin(p + "intermediate.dense", d, 4 * d)
        lin(p + "output.dense", 4 * d, d)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + n + ".weight"], w[p + n + ".bias"] = 1 + r(d), r(d)
    return w


def bert_hidden(w, tokens, types, layers, d, heads):
    """BERT's encoder: the last hidden state [L, d] (erf GELU, LayerNorm eps 1e-12)."""
    e = "bert.embeddings."
    L = lambda x, n: F.layer_norm(x, (d,), w[n + ".weight"], w[n + ".bias"], 1e-12)
    D = lambda x, n: x @ w[n + ".weight"].T + w[n + ".bias"]
    x = w[e + "word_embeddings.weight"][tokens] + w[e + "position_embeddings.weight"][: len(tokens)] + \
        w[e + "token_type_embeddings.weight"][types]
    x = L(x, e + "LayerNorm")
    for i in range(layers):
        p = f"bert.encoder.layer.{i}."
        s = p + "attention.self."
        a = mha(x, x, w[s + "query.weight"].T, w[s + "query.bias"], w[s + "key.weight"].T, w[s + "key.bias"],
                w[s + "value.weight"].T, w[s + "value.bias"], heads, False)
        x = L(x + D(a, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        x = L(x + D(F.gelu(D(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
    return x


def bert(g, layers=2, d=64, heads=4, vocab=256, ctx=64):
    r = lambda *s: torch.randn(*s, generator=g) * 0.1
    e = "bert.embeddings."
    w = bert_weights(g, layers, d, vocab, ctx)
    lin = lambda n, i, o: w.update({n + ".weight": r(o, i), n + ".bias": r(o)})  # nn.Linear [out, in]
    tokens = torch.randint(0, vocab, (21,), generator=g)
    types = torch.tensor([0] * 11 + [1] * 10)
    x = bert_hidden(w, tokens, types, layers, d, heads)
    # As Hugging Face saves a BertForPreTraining: position ids, pooler and the cls heads.
    w[e + "position_ids"] = torch.arange(ctx).unsqueeze(0)
    lin("bert.pooler.dense", d, d)
    w["cls.predictions.bias"] = r(vocab)
    os.makedirs(os.path.join(ROOT, "bert"), exist_ok=True)
    save_safetensors(os.path.join(ROOT, "bert", "weights.safetensors"), w)
    save("bert", "tokens", tokens.numpy().astype(np.int64))
    save("bert", "token_type_ids", types.numpy().astype(np.int64))
    save("bert", "hidden", x.numpy().astype(np.float32))


def sinusoid(n, d):
    pe = torch.zeros(n, d)
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
    return pe


def transformer(g, layers=2, d=64, heads=4, d_ff=128, src_vocab=200, tgt_vocab=210):
    torch.manual_seed(int(torch.randint(0, 1 << 30, (1,), generator=g)))
    model = torch.nn.Transformer(d_model=d, nhead=heads, num_encoder_layers=layers, num_decoder_layers=layers,
                                 dim_feedforward=d_ff, dropout=0.0, batch_first=True).eval()
    src_embed, tgt_embed = torch.randn(src_vocab, d, generator=g) * 0.2, torch.randn(tgt_vocab, d, generator=g) * 0.2
    gen_w, gen_b = torch.randn(tgt_vocab, d, generator=g) * 0.2, torch.randn(tgt_vocab, generator=g) * 0.1
    with torch.no_grad():  # nn.Transformer starts biases at zero and norms at one: make them matter
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    src = torch.randint(0, src_vocab, (17,), generator=g)
    tgt = torch.randint(0, tgt_vocab, (9,), generator=g)
    emb = lambda table, ids: table[ids] * math.sqrt(d) + sinusoid(len(ids), d)
    with torch.no_grad():
        mask = model.generate_square_subsequent_mask(len(tgt))
        y = model(emb(src_embed, src).unsqueeze(0), emb(tgt_embed, tgt).unsqueeze(0), tgt_mask=mask)[0]
        logits = y @ gen_w.T + gen_b
    w = {k: v.detach().clone() for k, v in model.state_dict().items()}
    w.update({"src_embed.weight": src_embed, "tgt_embed.weight": tgt_embed, "generator.weight": gen_w,
              "generator.bias": gen_b})
    os.makedirs(os.path.join(ROOT, "transformer"), exist_ok=True)
    save_safetensors(os.path.join(ROOT, "transformer", "weights.safetensors"), w)
    save("transformer", "src_tokens", src.numpy().astype(np.int64))
    save("transformer", "tgt_tokens", tgt.numpy().astype(np.int64))
    save("transformer", "logits", logits.numpy().astype(np.float32))
    # Greedy generation for the source above from start token 0 (margins checked, as for GPT-2).
    seq, margins = torch.tensor([0]), []
    with torch.no_grad():
        for _ in range(12):
            mask = model.generate_square_subsequent_mask(len(seq))
            y = model(emb(src_embed, src).unsqueeze(0), emb(tgt_embed, seq).unsqueeze(0), tgt_mask=mask)[0]
            last = y[-1] @ gen_w.T + gen_b
            top = torch.topk(last, 2).values
            margins.append(float(top[0] - top[1]))
            seq = torch.cat([seq, last.argmax().view(1)])
    assert min(margins) > 1e-3, f"greedy margins too small for an exact comparison: {min(margins)}"
    save("transformer", "generated", seq[1:].numpy().astype(np.int32))


if __name__ == "__main__":
    g = torch.Generator().manual_seed(2026)
    gpt2(g)
    bert(g)
    transformer(g)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(ROOT) for f in fs)
    print(f"fixtures written to {os.path.normpath(ROOT)}: {total / 1e6:.2f} MB")
