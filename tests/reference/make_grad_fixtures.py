#!/usr/bin/env python3
"""Gradient fixtures from PyTorch autograd for kiln's training entries.

A small GPT-2 (the parameter names and layouts of examples/gpt2, Hugging Face's) written in
plain PyTorch, its cross-entropy loss over shifted targets with two ignored positions (-1), and
loss.backward(): this writes tests/fixtures/gpt2_grad/ with the weights (as Hugging Face saves
them), the tokens and targets, the loss, and every parameter's gradient (grads.safetensors,
under kiln's parameter names).

    build/peers-venv/bin/python tests/reference/make_grad_fixtures.py   # any python with torch

The fixtures are committed, so the test suite needs no torch.
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

from make_fixtures import ROOT, mha, save_safetensors


def gpt2_grad(g, layers=2, d=64, heads=4, vocab=256, ctx=64, n=23):
    r = lambda *s: torch.randn(*s, generator=g) * 0.1
    w = {"transformer.wte.weight": r(vocab, d) * 2, "transformer.wpe.weight": r(ctx, d) * 3}
    for i in range(layers):
        p = f"transformer.h.{i}."
        for nm in ("ln_1", "ln_2"):
            w[p + nm + ".weight"], w[p + nm + ".bias"] = 1 + r(d), r(d)
        w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"] = r(d, 3 * d), r(3 * d)
        w[p + "attn.c_proj.weight"], w[p + "attn.c_proj.bias"] = r(d, d), r(d)
        w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"] = r(d, 4 * d), r(4 * d)
        w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"] = r(4 * d, d), r(d)
    w["transformer.ln_f.weight"], w["transformer.ln_f.bias"] = 1 + r(d), r(d)
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + 1,), generator=g)
    tokens, targets = seq[:n], seq[1:].clone()
    targets[[4, 17]] = -1

    x = w["transformer.wte.weight"][tokens] + w["transformer.wpe.weight"][:n]
    for i in range(layers):
        p = f"transformer.h.{i}."
        h = F.layer_norm(x, (d,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        W, B = w[p + "attn.c_attn.weight"], w[p + "attn.c_attn.bias"]
        a = mha(h, h, W[:, :d], B[:d], W[:, d:2 * d], B[d:2 * d], W[:, 2 * d:], B[2 * d:], heads, True)
        x = x + a @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (d,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (d,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    loss = F.cross_entropy(x @ w["transformer.wte.weight"].T, targets, ignore_index=-1)
    loss.backward()

    out = os.path.join(ROOT, "gpt2_grad")
    os.makedirs(out, exist_ok=True)
    save_safetensors(os.path.join(out, "weights.safetensors"),
                     {k[len("transformer."):]: v.detach() for k, v in w.items()})
    save_safetensors(os.path.join(out, "grads.safetensors"), {k: v.grad for k, v in w.items()})
    np.save(os.path.join(out, "tokens.npy"), tokens.numpy().astype(np.int64))
    np.save(os.path.join(out, "targets.npy"), targets.numpy().astype(np.int64))
    np.save(os.path.join(out, "loss.npy"), np.array([loss.item()], dtype=np.float32))


if __name__ == "__main__":
    gpt2_grad(torch.Generator().manual_seed(2027))
    print(f"gradient fixtures written to {os.path.normpath(os.path.join(ROOT, 'gpt2_grad'))}")
