#!/usr/bin/env python3
"""Gradient fixtures from PyTorch autograd for kiln's training entries.

A small GPT-2 (the parameter names and layouts of examples/gpt2, Hugging Face's) written in
plain PyTorch, its cross-entropy loss over shifted targets with two ignored positions (-1), and
loss.backward(): this writes tests/fixtures/gpt2_grad/ with the weights (as Hugging Face saves
them), the tokens and targets, the loss, and every parameter's gradient (grads.safetensors,
under kiln's parameter names). And tests/fixtures/gpt2_adamw/: 20 training steps of a smaller
one by torch.optim.AdamW with kiln's schedule and clipping on the windows kiln's --train draws:
the initial and final weights, the data, each step's loss and learning rate.

    build/peers-venv/bin/python tests/reference/make_grad_fixtures.py   # any python with torch

The fixtures are committed, so the test suite needs no torch.
"""
import math
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


M64 = (1 << 64) - 1


def mix(x):
    """splitmix64, as kiln's --train draws its windows."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def window_start(seed, step, n, T):
    """The first token of step `step`'s window (./model --train --seed S), as runtime/src/train.cpp."""
    return mix((mix(seed ^ 0x7261696E) + step) & M64) % (n - T)


def gpt2_adamw(g, steps=20, layers=2, d=32, heads=2, vocab=64, ctx=32, T=19, n=150, seed=5,
               lr=3e-3, warmup=5, decay=15, min_ratio=0.1):
    """examples/gpt2's train_step for `steps` steps (gpt2-compile --train --train-lr 3e-3
    --train-warmup 5 --train-decay-steps 15): torch.optim.AdamW (betas 0.9, 0.95, eps 1e-8, weight
    decay 0.1 on matrices, none on vectors), clip_grad_norm_ 1.0, linear warmup then cosine decay
    to 0.1 lr, on the windows `./gpt2 --train --seq T --seed 5` draws from the data."""
    w = gpt2_weights(g, layers, d, vocab, ctx)
    init = {k[len("transformer."):]: v.clone() for k, v in w.items()}
    for t in w.values():
        t.requires_grad_(True)
    data = torch.randint(0, vocab, (n,), generator=g)
    decayed = [t for t in w.values() if t.dim() >= 2]
    plain = [t for t in w.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95), eps=1e-8)
    losses, rates = [], []
    for step in range(1, steps + 1):
        if step <= warmup:
            rate = lr * step / warmup
        else:
            p = min(1.0, (step - warmup) / (decay - warmup))
            rate = lr * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * p)))
        for group in opt.param_groups:
            group["lr"] = rate
        s = window_start(seed, step, n, T)
        tokens, targets = data[s:s + T], data[s + 1:s + T + 1]
        opt.zero_grad()
        loss = F.cross_entropy(gpt2_logits(w, tokens, layers, d, heads), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        losses.append(loss.item())
        rates.append(rate)

    out = os.path.join(ROOT, "gpt2_adamw")
    os.makedirs(out, exist_ok=True)
    save_safetensors(os.path.join(out, "init.safetensors"), init)
    save_safetensors(os.path.join(out, "final.safetensors"),
                     {k[len("transformer."):]: v.detach() for k, v in w.items()})
    np.save(os.path.join(out, "data.npy"), data.numpy().astype(np.int64))
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float32))
    np.save(os.path.join(out, "lrs.npy"), np.array(rates, dtype=np.float32))


if __name__ == "__main__":
    gpt2_grad(torch.Generator().manual_seed(2027))
    gpt2_adamw(torch.Generator().manual_seed(2028))
    print(f"gradient fixtures written to {os.path.normpath(os.path.join(ROOT, 'gpt2_grad'))} and gpt2_adamw")
