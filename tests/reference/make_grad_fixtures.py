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

from make_fixtures import ROOT, gpt2_logits, gpt2_weights, save_safetensors


def gpt2_grad(g, layers=2, d=64, heads=4, vocab=256, ctx=64, n=23):
    w = gpt2_weights(g, layers, d, vocab, ctx)
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + 1,), generator=g)
    tokens, targets = seq[:n], seq[1:].clone()
    targets[[4, 17]] = -1
    loss = F.cross_entropy(gpt2_logits(w, tokens, layers, d, heads), targets, ignore_index=-1)
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
