"""examples/sparse --train's decoder in PyTorch, as a PyTorch user would write a Sparse
Transformer: scaled_dot_product_attention with the pattern as a boolean mask. Used by run.py's
sparse_gradients case (same weights, the gradients of the same loss compared).
"""
import math

import numpy as np
import torch
import torch.nn.functional as F


def strided_mask(n, stride):
    """The strided pattern's union: i - s < j <= i, or (i - j) % s == 0 with j <= i."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    return (j <= i) & (((i - j) < stride) | ((i - j) % stride == 0))


def random_weights(rng, layers, d, vocab, ctx):
    """The decoder's parameters under examples/sparse's names (float32 numpy)."""
    r = lambda *s: rng.standard_normal(s).astype(np.float32)
    w = {"tok_embed.weight": r(vocab, d) * 0.5, "pos_embed.weight": r(ctx, d) * 0.1}
    for i in range(layers):
        p = f"layers.{i}"
        for t in ("ln1", "ln2"):
            w[f"{p}.{t}.weight"], w[f"{p}.{t}.bias"] = 1 + 0.1 * r(d), 0.1 * r(d)
        w[f"{p}.attn.qkv.weight"], w[f"{p}.attn.qkv.bias"] = r(3 * d, d) / math.sqrt(d), 0.1 * r(3 * d)
        w[f"{p}.attn.proj.weight"], w[f"{p}.attn.proj.bias"] = r(d, d) / math.sqrt(d), 0.1 * r(d)
        w[f"{p}.mlp.fc1.weight"], w[f"{p}.mlp.fc1.bias"] = r(4 * d, d) / math.sqrt(d), 0.1 * r(4 * d)
        w[f"{p}.mlp.fc2.weight"], w[f"{p}.mlp.fc2.bias"] = r(d, 4 * d) / math.sqrt(4 * d), 0.1 * r(d)
    w["ln_f.weight"], w["ln_f.bias"] = 1 + 0.1 * r(d), 0.1 * r(d)
    w["head.weight"] = r(vocab, d) / math.sqrt(d)
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


def loss(w, tokens, targets, layers, d, heads, mask):
    """The mean next-token cross-entropy (targets -1 ignored)."""
    n, hd = tokens.shape[0], d // heads
    lin = lambda x, p: x @ w[p + ".weight"].T + w[p + ".bias"]
    ln = lambda x, p: F.layer_norm(x, (d,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    heads_of = lambda x: x.view(n, heads, hd).transpose(0, 1)
    x = w["tok_embed.weight"][tokens] + w["pos_embed.weight"][:n]
    for i in range(layers):
        p = f"layers.{i}"
        q, k, v = (heads_of(t) for t in lin(ln(x, p + ".ln1"), p + ".attn.qkv").split(d, dim=1))
        a = F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=mask)[0]
        x = x + lin(a.transpose(0, 1).reshape(n, d), p + ".attn.proj")
        x = x + lin(F.gelu(lin(ln(x, p + ".ln2"), p + ".mlp.fc1"), approximate="tanh"), p + ".mlp.fc2")
    return F.cross_entropy(ln(x, "ln_f") @ w["head.weight"].T, targets, ignore_index=-1)
