#!/usr/bin/env python3
"""Gradient fixtures from PyTorch autograd for kiln's training entries.

A small GPT-2 (the parameter names and layouts of examples/gpt2, Hugging Face's) written in
plain PyTorch, its cross-entropy loss over shifted targets with two ignored positions (-1), and
loss.backward(): this writes tests/fixtures/gpt2_grad/ with the weights (as Hugging Face saves
them), the tokens and targets, the loss, and every parameter's gradient (grads.safetensors,
under kiln's parameter names). And tests/fixtures/gpt2_adamw/: 20 training steps of a smaller
one by torch.optim.AdamW with kiln's schedule and clipping on the windows kiln's --train draws:
the initial and final weights, the data, each step's loss and learning rate. And
tests/fixtures/gpt2_aux_{grad,adamw}/: the same with Al-Rfou et al.'s auxiliary losses
(intermediate blocks through the shared head, dropped on schedule; heads for tokens further
ahead). And tests/fixtures/bert_mlm_grad/: a small BertForMaskedLM's masked-LM loss and gradients; and
tests/fixtures/transformer_grad/: torch.nn.Transformer's teacher-forced loss and gradients. And
tests/fixtures/reformer_grad{,_16}/: examples/reformer's reversible stack (full causal attention;
4 and 16 layers) as plain autograd without reversal; tests/fixtures/reformer_lsh_grad/: the
same with LSH attention (explicit hashing with the same rotations, sorting and chunks). And
tests/fixtures/sparse_grad_<pattern>_<combine>/: examples/sparse --train with each pattern and
combination, its attention a masked dense softmax (the oracle for the block-sparse backward).
And tests/fixtures/universal_grad/: examples/universal --train --causal, its ACT loop unrolled
in plain PyTorch (the halting decisions are comparisons, so autograd treats them as constants).

    build/peers-venv/bin/python tests/reference/make_grad_fixtures.py [name...]   # any python with torch

The fixtures are committed, so the test suite needs no torch.
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

from make_fixtures import ROOT, bert_hidden, bert_weights, gpt2_logits, gpt2_weights, save_safetensors, sinusoid


def save_grad_fixture(name, params, inputs, loss, file_name=lambda k: k):
    """tests/fixtures/<name>/: weights.safetensors (each parameter under file_name(its name), as a
    checkpoint names it) and grads.safetensors (each .grad under kiln's parameter name), each
    input as <input>.npy (int64) and loss.npy."""
    out = os.path.join(ROOT, name)
    os.makedirs(out, exist_ok=True)
    save_safetensors(os.path.join(out, "weights.safetensors"), {file_name(k): v.detach() for k, v in params.items()})
    save_safetensors(os.path.join(out, "grads.safetensors"), {k: v.grad for k, v in params.items()})
    for k, v in inputs.items():
        np.save(os.path.join(out, k + ".npy"), v.numpy().astype(np.int64))
    np.save(os.path.join(out, "loss.npy"), np.array([loss.item()], dtype=np.float32))


def gpt2_grad(g, layers=2, d=64, heads=4, vocab=256, ctx=64, n=23):
    w = gpt2_weights(g, layers, d, vocab, ctx)
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + 1,), generator=g)
    tokens, targets = seq[:n], seq[1:].clone()
    targets[[4, 17]] = -1
    loss = F.cross_entropy(gpt2_logits(w, tokens, layers, d, heads), targets, ignore_index=-1)
    loss.backward()

    save_grad_fixture("gpt2_grad", w, {"tokens": tokens, "targets": targets}, loss,
                      file_name=lambda k: k[len("transformer."):])  # as Hugging Face saves GPT-2


def bert_mlm_weights(g, layers, d, vocab, ctx):
    """BERT's weights and BertForMaskedLM's head (cls.predictions), requires_grad."""
    r = lambda *s: torch.randn(*s, generator=g) * 0.1
    w = bert_weights(g, layers, d, vocab, ctx)
    h = "cls.predictions."
    w[h + "transform.dense.weight"], w[h + "transform.dense.bias"] = r(d, d), r(d)
    w[h + "transform.LayerNorm.weight"], w[h + "transform.LayerNorm.bias"] = 1 + r(d), r(d)
    w[h + "bias"] = r(vocab)
    for t in w.values():
        t.requires_grad_(True)
    return w


def bert_mlm_logits(w, tokens, layers, d, heads):
    """The masked-LM logits of one sequence (token types all 0): dense, erf GELU, LayerNorm eps
    1e-12, the word embeddings as the decoder, a bias."""
    h = "cls.predictions."
    x = bert_hidden(w, tokens, torch.zeros(len(tokens), dtype=torch.int64), layers, d, heads)
    t = F.gelu(x @ w[h + "transform.dense.weight"].T + w[h + "transform.dense.bias"])
    t = F.layer_norm(t, (d,), w[h + "transform.LayerNorm.weight"], w[h + "transform.LayerNorm.bias"], 1e-12)
    return t @ w["bert.embeddings.word_embeddings.weight"].T + w[h + "bias"]


def bert_mlm_grad(g, layers=2, d=32, heads=2, vocab=120, ctx=32, n=21, mask=103):
    """BertForMaskedLM's loss in plain PyTorch (Hugging Face's names: the encoder, and the head
    cls.predictions: dense, erf GELU, LayerNorm eps 1e-12, the word embeddings as the decoder, a
    bias) on a window masked as ./bert --train does (a masked position's token is [MASK], a random
    id or kept; its target is the original id, -1 elsewhere), token types all 0, and
    loss.backward(): tests/fixtures/bert_mlm_grad/."""
    w = bert_mlm_weights(g, layers, d, vocab, ctx)

    ids = torch.randint(0, vocab, (n,), generator=g)
    tokens, targets = ids.clone(), torch.full((n,), -1, dtype=torch.int64)
    for pos, becomes in ((2, mask), (7, mask), (11, int(ids[3])), (15, int(ids[15])), (20, mask)):
        tokens[pos], targets[pos] = becomes, ids[pos]
    logits = bert_mlm_logits(w, tokens, layers, d, heads)
    loss = F.cross_entropy(logits, targets, ignore_index=-1)
    loss.backward()
    save_grad_fixture("bert_mlm_grad", w, {"tokens": tokens, "targets": targets}, loss)


def nn_transformer(g, layers, d, heads, d_ff, src_vocab, tgt_vocab):
    """torch.nn.Transformer (dropout 0, batch_first) with its biases and norms moved off their
    initial values, and examples/transformer's embeddings and generator (requires_grad)."""
    torch.manual_seed(int(torch.randint(0, 1 << 30, (1,), generator=g)))
    model = torch.nn.Transformer(d_model=d, nhead=heads, num_encoder_layers=layers, num_decoder_layers=layers,
                                 dim_feedforward=d_ff, dropout=0.0, batch_first=True)
    with torch.no_grad():  # nn.Transformer starts biases at zero and norms at one: make them matter
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    extra = {"src_embed.weight": torch.randn(src_vocab, d, generator=g) * 0.2,
             "tgt_embed.weight": torch.randn(tgt_vocab, d, generator=g) * 0.2,
             "generator.weight": torch.randn(tgt_vocab, d, generator=g) * 0.2,
             "generator.bias": torch.randn(tgt_vocab, generator=g) * 0.1}
    for t in extra.values():
        t.requires_grad_(True)
    return model, extra


def transformer_grad(g, layers=2, d=32, heads=2, d_ff=64, src_vocab=50, tgt_vocab=60, S=13, T=9):
    """torch.nn.Transformer (dropout 0) with examples/transformer's embeddings (scaled by sqrt(d),
    sinusoidal positions) and generator: the teacher-forced cross-entropy (two targets -1) and
    loss.backward(): tests/fixtures/transformer_grad/."""
    model, extra = nn_transformer(g, layers, d, heads, d_ff, src_vocab, tgt_vocab)
    src = torch.randint(0, src_vocab, (S,), generator=g)
    tgt = torch.randint(0, tgt_vocab, (T,), generator=g)
    targets = torch.randint(0, tgt_vocab, (T,), generator=g)
    targets[[2, 6]] = -1
    emb = lambda table, ids: table[ids] * math.sqrt(d) + sinusoid(len(ids), d)
    mask = model.generate_square_subsequent_mask(T)
    y = model(emb(extra["src_embed.weight"], src).unsqueeze(0), emb(extra["tgt_embed.weight"], tgt).unsqueeze(0),
              tgt_mask=mask, tgt_is_causal=True)[0]
    logits = y @ extra["generator.weight"].T + extra["generator.bias"]
    loss = F.cross_entropy(logits, targets, ignore_index=-1)
    loss.backward()

    params = dict(model.named_parameters())
    params.update(extra)
    save_grad_fixture("transformer_grad", params, {"src_tokens": src, "tgt_tokens": tgt, "targets": targets}, loss)


def gpt2_grad_batch(g, B=3, layers=2, d=64, heads=4, vocab=256, ctx=64, n=23):
    """gpt2_grad over a batch of B sequences ([B, n] tokens and targets, a few -1): the loss is
    the mean over every valid position of the batch: tests/fixtures/gpt2_grad_b3/."""
    w = gpt2_weights(g, layers, d, vocab, ctx)
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (B, n + 1), generator=g)
    tokens, targets = seq[:, :n], seq[:, 1:].clone()
    targets[0, 4], targets[1, 17], targets[2, 0] = -1, -1, -1
    logits = torch.stack([gpt2_logits(w, tokens[b], layers, d, heads) for b in range(B)])
    loss = F.cross_entropy(logits.reshape(B * n, vocab), targets.reshape(B * n), ignore_index=-1)
    loss.backward()
    save_grad_fixture("gpt2_grad_b3", w, {"tokens": tokens, "targets": targets}, loss,
                      file_name=lambda k: k[len("transformer."):])


def bert_mlm_grad_batch(g, B=3, layers=2, d=32, heads=2, vocab=120, ctx=32, n=21, mask=103):
    """bert_mlm_grad over a batch of B windows, each masked at its own positions (the mean over
    every masked position of the batch): tests/fixtures/bert_mlm_grad_b3/."""
    w = bert_mlm_weights(g, layers, d, vocab, ctx)
    ids = torch.randint(0, vocab, (B, n), generator=g)
    tokens, targets = ids.clone(), torch.full((B, n), -1, dtype=torch.int64)
    masked = [((2, mask), (7, mask), (11, int(ids[0, 3])), (20, mask)),
              ((0, mask), (5, int(ids[1, 5])), (13, mask)),
              ((1, mask), (9, mask), (14, int(ids[2, 8])), (16, mask), (19, mask))]
    for b, positions in enumerate(masked):
        for pos, becomes in positions:
            tokens[b, pos], targets[b, pos] = becomes, ids[b, pos]
    logits = torch.cat([bert_mlm_logits(w, tokens[b], layers, d, heads) for b in range(B)])
    loss = F.cross_entropy(logits, targets.reshape(B * n), ignore_index=-1)
    loss.backward()
    save_grad_fixture("bert_mlm_grad_b3", w, {"tokens": tokens, "targets": targets}, loss)


def transformer_grad_batch(g, B=3, layers=2, d=32, heads=2, d_ff=64, src_vocab=50, tgt_vocab=60, S=13, T=9):
    """transformer_grad over a batch of B source and target sequences (batch_first), the mean
    over every valid target of the batch: tests/fixtures/transformer_grad_b3/."""
    model, extra = nn_transformer(g, layers, d, heads, d_ff, src_vocab, tgt_vocab)
    src = torch.randint(0, src_vocab, (B, S), generator=g)
    tgt = torch.randint(0, tgt_vocab, (B, T), generator=g)
    targets = torch.randint(0, tgt_vocab, (B, T), generator=g)
    targets[0, 2], targets[1, 6], targets[2, 8] = -1, -1, -1
    emb = lambda table, ids: table[ids] * math.sqrt(d) + sinusoid(ids.shape[-1], d)
    mask = model.generate_square_subsequent_mask(T)
    y = model(emb(extra["src_embed.weight"], src), emb(extra["tgt_embed.weight"], tgt), tgt_mask=mask, tgt_is_causal=True)
    logits = y @ extra["generator.weight"].T + extra["generator.bias"]
    loss = F.cross_entropy(logits.reshape(B * T, tgt_vocab), targets.reshape(B * T), ignore_index=-1)
    loss.backward()
    params = dict(model.named_parameters())
    params.update(extra)
    save_grad_fixture("transformer_grad_b3", params, {"src_tokens": src, "tgt_tokens": tgt, "targets": targets}, loss)


M64 = (1 << 64) - 1


def mix(x):
    """splitmix64, as kiln's --train draws its windows."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def window_start(seed, step, n, T, reach=1):
    """The first token of step `step`'s window (./model --train --seed S) of T + reach tokens, as
    runtime/src/train.cpp."""
    return mix((mix(seed ^ 0x7261696E) + step) & M64) % (n - T - reach + 1)


def gpt2_optimizer(w, lr):
    """examples/gpt2's AdamW: betas 0.9, 0.95, eps 1e-8, weight decay 0.1 on matrices, none on
    vectors."""
    decayed = [t for t in w.values() if t.dim() >= 2]
    plain = [t for t in w.values() if t.dim() < 2]
    return torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1}, {"params": plain, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


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
    opt = gpt2_optimizer(w, lr)
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


def gpt2_aux_loss(w, tokens, targets, layers, d, heads, ahead_weight=0.5, step=None, total=None):
    """examples/gpt2 --train-aux-layers --train-ahead K's loss (Al-Rfou et al. 2018's auxiliary
    losses): the next-token loss; block l's output (l = 1 .. layers-1) through the shared head
    (ln_f, the tied embedding), weight 1, while step <= l / (2 layers) * total (always when
    total is None); and heads aux.ahead.k predicting targets[k] (the token k ahead), weight
    ahead_weight each. targets: {k: ids}, k = 1 the next token. Returns the loss and its first
    term, the next-token loss."""
    hidden = []
    logits = gpt2_logits(w, tokens, layers, d, heads, hidden)
    loss = nxt = F.cross_entropy(logits, targets[1], ignore_index=-1)
    norm = lambda x: F.layer_norm(x, (d,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
    for l in range(1, layers):
        if total is None or step <= l / (2 * layers) * total:
            loss = loss + F.cross_entropy(norm(hidden[l - 1]) @ w["transformer.wte.weight"].T, targets[1], ignore_index=-1)
    h = norm(hidden[-1])
    for k in sorted(targets):
        if k >= 2:
            loss = loss + ahead_weight * F.cross_entropy(h @ w[f"aux.ahead.{k}.weight"].T, targets[k], ignore_index=-1)
    return loss, nxt


def gpt2_aux_grad(g, layers=3, d=32, heads=2, vocab=64, ctx=32, n=19, K=3):
    """gpt2_aux_loss's gradients: every term counts (the `gradients` entry outside --train);
    targets.k for k = 2 .. K, a few -1: tests/fixtures/gpt2_aux_grad/."""
    w = gpt2_weights(g, layers, d, vocab, ctx)
    for k in range(2, K + 1):
        w[f"aux.ahead.{k}.weight"] = torch.randn(vocab, d, generator=g) * 0.2
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + K,), generator=g)
    tokens = seq[:n]
    targets = {k: seq[k:n + k].clone() for k in range(1, K + 1)}
    targets[1][[4, 11]] = -1
    targets[2][[0, 17]] = -1
    loss, _ = gpt2_aux_loss(w, tokens, targets, layers, d, heads)
    loss.backward()
    inputs = {"tokens": tokens, "targets": targets[1]}
    inputs.update({f"targets.{k}": targets[k] for k in range(2, K + 1)})
    save_grad_fixture("gpt2_aux_grad", w, inputs, loss)


def gpt2_aux_adamw(g, steps=10, layers=3, d=32, heads=2, vocab=64, ctx=32, T=19, n=150, seed=5, lr=3e-3, warmup=3, K=2):
    """examples/gpt2 --train --train-aux-layers --train-ahead 2 (--train-lr 3e-3 --train-warmup 3,
    constant after it) for `steps` steps of `./gpt2 --train --seq T --steps 10 --seed 5`: the
    windows hold T + K tokens; block 1's term counts at step 1 only (1/6 of 10), block 2's at
    steps 1 .. 3 (2/6 of 10). torch.optim.AdamW as gpt2_adamw: tests/fixtures/gpt2_aux_adamw/."""
    w = gpt2_weights(g, layers, d, vocab, ctx)
    for k in range(2, K + 1):
        w[f"aux.ahead.{k}.weight"] = torch.randn(vocab, d, generator=g) * 0.2
    name = lambda k: k[len("transformer."):] if k.startswith("transformer.") else k
    init = {name(k): v.clone() for k, v in w.items()}
    for t in w.values():
        t.requires_grad_(True)
    data = torch.randint(0, vocab, (n,), generator=g)
    opt = gpt2_optimizer(w, lr)
    losses, next_losses = [], []
    for step in range(1, steps + 1):
        for group in opt.param_groups:
            group["lr"] = lr * step / warmup if step <= warmup else lr
        s = window_start(seed, step, n, T, K)
        targets = {k: data[s + k:s + k + T] for k in range(1, K + 1)}
        opt.zero_grad()
        loss, nxt = gpt2_aux_loss(w, data[s:s + T], targets, layers, d, heads, step=step, total=steps)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        losses.append(loss.item())
        next_losses.append(nxt.item())

    out = os.path.join(ROOT, "gpt2_aux_adamw")
    os.makedirs(out, exist_ok=True)
    save_safetensors(os.path.join(out, "init.safetensors"), init)
    save_safetensors(os.path.join(out, "final.safetensors"), {name(k): v.detach() for k, v in w.items()})
    np.save(os.path.join(out, "data.npy"), data.numpy().astype(np.int64))
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float32))
    np.save(os.path.join(out, "next_losses.npy"), np.array(next_losses, dtype=np.float32))


def lsh_attention(qk, v, rot, chunk, causal, margins):
    """kiln's lsh_attention written out: per hash round the buckets argmax([x·R; -x·R]) (no
    gradient: constants), the positions sorted by (bucket, position), each query attending to the
    keys of its bucket in its sorted chunk and the previous one (causal: at or before it), keys the
    unit-normalized qk, itself with a score 1e9 lower; the rounds merged by softmax over their
    log-sum-exps. qk, v [H, L, hd], rot [R, hd, buckets / 2]. Appends each round's smallest gap
    between the best and second-best projection to `margins`."""
    H, L, hd = qk.shape
    scale = 1.0 / math.sqrt(hd)
    n = qk.norm(dim=-1, keepdim=True)
    khat = torch.where(n > 0, qk / torch.where(n > 0, n, torch.ones_like(n)), torch.zeros_like(qk))
    outs, lses = [], []
    for r in range(rot.shape[0]):
        with torch.no_grad():
            proj = qk @ rot[r]
            both = torch.cat([proj, -proj], -1)
            top2 = both.topk(2, dim=-1).values
            margins.append((top2[..., 0] - top2[..., 1]).min().item())
            b = both.argmax(-1)
            order = torch.argsort(b * L + torch.arange(L), dim=-1)
            inv = torch.argsort(order, dim=-1)
        o_r, lse_r = [], []
        for h in range(H):
            pos = order[h]
            qs, ks, vs, bs = qk[h, pos], khat[h, pos], v[h, pos], b[h, pos]
            cs = torch.arange(L) // chunk
            allowed = ((cs[None, :] == cs[:, None]) | (cs[None, :] == cs[:, None] - 1)) & (bs[None, :] == bs[:, None])
            if causal:
                allowed &= pos[None, :] <= pos[:, None]
            sc = (qs @ ks.T) * scale + torch.where(pos[None, :] == pos[:, None], -1e9, 0.0)
            sc = sc.masked_fill(~allowed, float("-inf"))
            lse = torch.logsumexp(sc, -1)
            o = torch.exp(sc - lse[:, None]) @ vs
            o_r.append(o[inv[h]])
            lse_r.append(lse[inv[h]])
        outs.append(torch.stack(o_r))
        lses.append(torch.stack(lse_r))
    w = torch.softmax(torch.stack(lses), dim=0)
    return (w[..., None] * torch.stack(outs)).sum(0)


def reformer_lm_loss(w, tokens, targets, layers, d, heads, lsh=None):
    """examples/reformer --train --causal (--attention full, or LSH attention with `lsh` =
    (chunk, margins)), in plain PyTorch and without reversal (autograd keeps every activation):
    tokens embedded (x sqrt(d)) plus sinusoidal positions, duplicated into the halves of a
    reversible stack, y1 = x1 + F(x2), y2 = x2 + G(y1) with F = layer norm + causal multi-head
    attention and G = layer norm + GELU FFN; the halves' mean, layer-normed; logits by the tied
    embedding; the mean cross-entropy of the next tokens."""
    n, hd = tokens.shape[0], d // heads
    lin = lambda x, p: x @ w[p + ".weight"].T + w[p + ".bias"]
    ln = lambda x, p: F.layer_norm(x, (d,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    heads_of = lambda x: x.view(n, heads, hd).transpose(0, 1)
    e = w["tok_embed.weight"][tokens] * math.sqrt(d) + sinusoid(n, d)
    x1, x2 = e, e
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    for i in range(layers):
        p = f"layers.{i}"

        def attn(h):
            h = ln(h, p + ".attn.norm")
            if lsh:
                chunk, margins = lsh
                a = lsh_attention(heads_of(lin(h, p + ".attn.qk")), heads_of(lin(h, p + ".attn.v")),
                                  w[p + ".attn.rotations"], chunk, True, margins)
            else:
                q, k, v = (heads_of(lin(h, p + ".attn." + t)) for t in "qkv")
                s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
                a = torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v
            return lin(a.transpose(0, 1).reshape(n, d), p + ".attn.out")

        ffn = lambda h: lin(F.gelu(lin(ln(h, p + ".ffn.norm"), p + ".ffn.fc1")), p + ".ffn.fc2")
        y1 = x1 + attn(x2)
        y2 = x2 + ffn(y1)
        x1, x2 = y1, y2
    hidden = ln((x1 + x2) * 0.5, "norm")
    return F.cross_entropy(hidden @ w["tok_embed.weight"].T, targets, ignore_index=-1)


def reformer_grad(g, name, layers, d=32, heads=2, vocab=64, n=45, lsh=None):
    """`lsh`: (buckets, hashes, chunk) for LSH attention; None for full attention."""
    r = lambda *s: torch.randn(*s, generator=g)
    w = {"tok_embed.weight": r(vocab, d) / math.sqrt(d)}
    for i in range(layers):
        p = f"layers.{i}"
        for t in ("attn.norm", "ffn.norm"):
            w[f"{p}.{t}.weight"], w[f"{p}.{t}.bias"] = 1 + 0.1 * r(d), 0.1 * r(d)
        for t in (("attn.qk", "attn.v", "attn.out") if lsh else ("attn.q", "attn.k", "attn.v", "attn.out")):
            w[f"{p}.{t}.weight"], w[f"{p}.{t}.bias"] = r(d, d) / math.sqrt(d), 0.1 * r(d)
        if lsh:
            w[f"{p}.attn.rotations"] = r(lsh[1], d // heads, lsh[0] // 2)
        w[f"{p}.ffn.fc1.weight"], w[f"{p}.ffn.fc1.bias"] = r(4 * d, d) / math.sqrt(d), 0.1 * r(4 * d)
        w[f"{p}.ffn.fc2.weight"], w[f"{p}.ffn.fc2.bias"] = r(d, 4 * d) / math.sqrt(4 * d), 0.1 * r(d)
    w["norm.weight"], w["norm.bias"] = 1 + 0.1 * r(d), 0.1 * r(d)
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + 1,), generator=g)
    tokens, targets = seq[:n], seq[1:].clone()
    targets[[3, 30]] = -1
    margins = []
    loss = reformer_lm_loss(w, tokens, targets, layers, d, heads, (lsh[2], margins) if lsh else None)
    loss.backward()
    if lsh:
        # A bucket decided within float rounding could legitimately differ in kiln.
        assert min(margins) > 1e-4, f"{name}: a hash projection's top two are {min(margins)} apart; pick another seed"
        w = {k: v for k, v in w.items()}
        for k in list(w):
            if k.endswith(".rotations"):
                w[k].grad = torch.zeros_like(w[k])  # fixed: kiln gives them a zero gradient too
    save_grad_fixture(name, w, {"tokens": tokens, "targets": targets}, loss)


def sparse_mask(n, pattern, part, stride, summary, layout=None, noncausal=False):
    """The sparse patterns as a dense [n, n] mask: the Sparse Transformer's factorized causal
    ones, strided local i - s < j <= i, global (i - j) % s == 0; fixed local j // c == i // c,
    global j % c >= c - t; union either. A window i - w < j <= i (w = stride); a block layout
    (blocks of `stride`) where layout[i // b][j // b] is '#' (and j <= i unless noncausal)."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    causal = j <= i
    if pattern == "window":
        return causal & ((i - j) < stride)
    if pattern == "layout":
        at = lambda r, c: r < len(layout) and c < len(layout[r]) and layout[r][c] == "#"
        m = torch.tensor([[at(a // stride, b // stride) for b in range(n)] for a in range(n)])
        return m if noncausal else m & causal
    if pattern == "strided":
        local, glob = (i - j) < stride, (i - j) % stride == 0
    else:
        local, glob = (j // stride) == (i // stride), (j % stride) >= stride - summary
    return causal & {"local": local, "global": glob, "union": local | glob}[part]


def sparse_lm_loss(w, tokens, targets, layers, d, heads, pattern, combine, stride, summary, layout=None,
                   noncausal=False):
    """examples/sparse --train: pre-norm decoder blocks whose attention is a masked dense softmax
    with the pattern (a row with no allowed key: zeros) (the oracle for kiln's block-sparse kernels): `alternate` local on even
    layers and global on odd ones, `merged` the union, `heads` the first half of the heads local
    and the second global."""
    n, hd = tokens.shape[0], d // heads
    lin = lambda x, p: x @ w[p + ".weight"].T + w[p + ".bias"]
    ln = lambda x, p: F.layer_norm(x, (d,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    heads_of = lambda x: x.view(n, heads, hd).transpose(0, 1)
    mask = lambda part: sparse_mask(n, pattern, part, stride, summary, layout, noncausal)
    x = w["tok_embed.weight"][tokens] + w["pos_embed.weight"][:n]
    for i in range(layers):
        p = f"layers.{i}"
        q, k, v = (heads_of(t) for t in lin(ln(x, p + ".ln1"), p + ".attn.qkv").split(d, dim=1))
        if combine == "alternate":
            m = mask("local" if i % 2 == 0 else "global").expand(heads, n, n)
        elif combine == "merged":
            m = mask("union").expand(heads, n, n)
        else:
            m = torch.cat([mask("local").expand(heads // 2, n, n), mask("global").expand(heads // 2, n, n)])
        s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        # A row the pattern gives no key (the fixed global half's first positions) is zeros, as
        # kiln defines it (a finite fill keeps its softmax, multiplied by 0, free of NaN).
        a = torch.where(m.any(-1, keepdim=True), torch.softmax(s.masked_fill(~m, -1e30), -1), 0.0) @ v
        x = x + lin(a.transpose(0, 1).reshape(n, d), p + ".attn.proj")
        h = F.gelu(lin(ln(x, p + ".ln2"), p + ".mlp.fc1"), approximate="tanh")
        x = x + lin(h, p + ".mlp.fc2")
    logits = ln(x, "ln_f") @ w["head.weight"].T
    return F.cross_entropy(logits, targets, ignore_index=-1)


def sparse_grad(g, name, pattern, combine, layers=2, d=32, heads=2, vocab=64, ctx=64, n=45, stride=8, summary=2,
                layout=None, noncausal=False):
    r = lambda *s: torch.randn(*s, generator=g)
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
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + 1,), generator=g)
    tokens, targets = seq[:n], seq[1:].clone()
    targets[[3, 30]] = -1
    loss = sparse_lm_loss(w, tokens, targets, layers, d, heads, pattern, combine, stride, summary, layout, noncausal)
    loss.backward()
    save_grad_fixture(name, w, {"tokens": tokens, "targets": targets}, loss)


def universal_lm_loss(w, tokens, targets, d, heads, T, eps=0.01, tau=0.01, margins=None, sepconv=False):
    """examples/universal --train --causal in plain PyTorch, ACT unrolled over T steps (Graves
    2016; Dehghani et al. 2019): the state starts as the tokens' embedding x sqrt(d); step t's
    input x is the state plus the position's and t's sinusoids; y = the shared post-norm block
    (causal attention, ReLU FFN); p = sigmoid(x . halt.weight + halt.bias). A running position
    with halting sum h halts when h + p > 1 - eps (or at the last step), its output getting the
    weight 1 - h (the remainder R), else the weight p; a halted position's state is its output
    and nothing of it changes afterwards. The loss is the next tokens' mean cross-entropy
    through the tied embedding plus tau * mean(N + R), N the steps taken (a constant).
    `margins` collects |h + p - (1 - eps)| of every decision that was not forced. `sepconv`: the
    transition is a causal depthwise convolution over the positions (row i reads rows i - k + 1
    to i, zeros before the first; weight [k, d]) and two pointwise linears with a ReLU between, instead of the FFN."""
    n, hd = tokens.shape[0], d // heads
    lin = lambda x, p: x @ w[p + ".weight"].T + w[p + ".bias"]
    ln = lambda x, p: F.layer_norm(x, (d,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    heads_of = lambda x: x.view(n, heads, hd).transpose(0, 1)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    b = "ut.block"

    def block(x):
        q, k, v = (heads_of(lin(x, b + ".attn." + t)) for t in "qkv")
        a = torch.softmax(((q @ k.transpose(1, 2)) / math.sqrt(hd)).masked_fill(~mask, float("-inf")), -1) @ v
        h = ln(x + lin(a.transpose(0, 1).reshape(n, d), b + ".attn.out"), b + ".ln_1")
        if sepconv:
            k = w[b + ".conv.depthwise.weight"]
            # causal: row i reads rows i - k + 1 .. i (zeros before the first)
            c = F.conv1d(F.pad(h.T[None], (k.shape[0] - 1, 0)), k.T[:, None, :], w[b + ".conv.depthwise.bias"],
                         groups=d)[0].T
            t = lin(torch.relu(lin(c, b + ".conv.pointwise1")), b + ".conv.pointwise2")
        else:
            t = lin(torch.relu(lin(h, b + ".ffn.fc1")), b + ".ffn.fc2")
        return ln(h + t, b + ".ln_2")

    state = w["tok_embed.weight"][tokens] * math.sqrt(d)
    pos, time = sinusoid(n, d), sinusoid(T, d)
    thr = 1.0 - eps
    h, r, steps = torch.zeros(n), torch.zeros(n), torch.zeros(n)
    out, halted = torch.zeros(n, d), torch.zeros(n, dtype=torch.bool)
    for t in range(T):
        x = state + pos + time[t]
        y = block(x)
        p = torch.sigmoid(x @ w["ut.halt.weight"] + w["ut.halt.bias"])
        running = ~halted
        if margins is not None and t < T - 1:
            margins.extend((h + p - thr)[running].abs().tolist())
        now = running & ((h + p > thr) | (t == T - 1))
        weight = torch.where(now, 1 - h, torch.where(running, p, torch.zeros_like(p)))
        out = out + weight[:, None] * y
        state = torch.where(now[:, None], out, torch.where(running[:, None], y, state))
        steps = steps + running.float()
        r = torch.where(now, 1 - h, r)
        h = torch.where(now, torch.ones_like(h), torch.where(running, h + p, h))
        halted = halted | now
    loss = F.cross_entropy(out @ w["tok_embed.weight"].T, targets, ignore_index=-1)
    return loss + tau * (steps + r).mean(), steps


def universal_grad(g, name, d=32, heads=2, vocab=64, n=29, T=4, tau=0.5, sepconv=False, kernel=3):
    """tau 0.5 rather than the default 0.01, so that the ponder cost's gradient is not lost in
    the cross-entropy's rounding."""
    r = lambda *s: torch.randn(*s, generator=g)
    b = "ut.block"
    w = {"tok_embed.weight": r(vocab, d) / math.sqrt(d)}
    for t in ("attn.q", "attn.k", "attn.v", "attn.out"):
        w[f"{b}.{t}.weight"], w[f"{b}.{t}.bias"] = r(d, d) / math.sqrt(d), 0.1 * r(d)
    for t in ("ln_1", "ln_2"):
        w[f"{b}.{t}.weight"], w[f"{b}.{t}.bias"] = 1 + 0.1 * r(d), 0.1 * r(d)
    t1, t2 = ("conv.pointwise1", "conv.pointwise2") if sepconv else ("ffn.fc1", "ffn.fc2")
    w[f"{b}.{t1}.weight"], w[f"{b}.{t1}.bias"] = r(4 * d, d) / math.sqrt(d), 0.1 * r(4 * d)
    w[f"{b}.{t2}.weight"], w[f"{b}.{t2}.bias"] = r(d, 4 * d) / math.sqrt(4 * d), 0.1 * r(d)
    if sepconv:
        w[f"{b}.conv.depthwise.weight"], w[f"{b}.conv.depthwise.bias"] = 0.5 * r(kernel, d), 0.1 * r(d)
    w["ut.halt.weight"], w["ut.halt.bias"] = 0.1 * r(d), torch.tensor([0.5])
    for t in w.values():
        t.requires_grad_(True)
    seq = torch.randint(0, vocab, (n + 1,), generator=g)
    tokens, targets = seq[:n], seq[1:].clone()
    targets[[5, 20]] = -1
    margins = []
    loss, steps = universal_lm_loss(w, tokens, targets, d, heads, T, tau=tau, margins=margins, sepconv=sepconv)
    loss.backward()
    # A decision within float rounding of the threshold could legitimately go the other way.
    assert min(margins) > 1e-3, f"{name}: a halting sum is {min(margins)} from the threshold; pick another seed"
    counts = torch.bincount(steps.long(), minlength=T + 1).tolist()
    assert sum(c > 0 for c in counts) >= 3, f"{name}: positions halt at too few depths ({counts}); pick other weights"
    print(f"{name}: steps per position {counts[1:]} (1..{T}), smallest margin {min(margins):.2e}")
    save_grad_fixture(name, w, {"tokens": tokens, "targets": targets}, loss)


def rms_norm_grad(g, vocab=19, d=12, heads=2, n=11):
    """RMSNorm with torch.nn.functional.rms_norm (PyTorch's own, not a formula of kiln's): token
    embeddings, an RMSNorm over rows (eps 1e-5), one over the heads of a 2-way split (eps 1e-6,
    Qwen3's q/k norm), their sum through a head [d, vocab]; every weight random, the gains around
    1 (perturbed: a gain read as 1 or swapped with the other shows). Saved under the names of
    tests/train/gradients_test.cpp's model."""
    r = lambda *s: torch.randn(*s, generator=g)
    w = {"emb": r(vocab, d) * 0.5, "n1.g": 1 + 0.2 * r(d), "n2.g": 1 + 0.2 * r(d // heads), "head": r(d, vocab) * 0.3}
    for t in w.values():
        t.requires_grad_(True)
    tokens = torch.randint(0, vocab, (n,), generator=g)
    targets = torch.randint(0, vocab, (n,), generator=g)
    targets[[2, 7]] = -1
    x = F.embedding(tokens, w["emb"])
    h = F.rms_norm(x, (d,), w["n1.g"], 1e-5)
    q = F.rms_norm(h.view(n, heads, d // heads), (d // heads,), w["n2.g"], 1e-6).view(n, d)
    loss = F.cross_entropy((h + q) @ w["head"], targets, ignore_index=-1)
    loss.backward()
    save_grad_fixture("rms_norm_grad", w, {"tokens": tokens, "targets": targets}, loss)


FIXTURES = {
    "rms_norm_grad": lambda: rms_norm_grad(torch.Generator().manual_seed(2080)),
    "gpt2_grad": lambda: gpt2_grad(torch.Generator().manual_seed(2027)),
    "gpt2_adamw": lambda: gpt2_adamw(torch.Generator().manual_seed(2028)),
    "gpt2_aux_grad": lambda: gpt2_aux_grad(torch.Generator().manual_seed(2060)),
    "gpt2_aux_adamw": lambda: gpt2_aux_adamw(torch.Generator().manual_seed(2061)),
    "bert_mlm_grad": lambda: bert_mlm_grad(torch.Generator().manual_seed(2029)),
    "transformer_grad": lambda: transformer_grad(torch.Generator().manual_seed(2030)),
    "gpt2_grad_b3": lambda: gpt2_grad_batch(torch.Generator().manual_seed(2031)),
    "bert_mlm_grad_b3": lambda: bert_mlm_grad_batch(torch.Generator().manual_seed(2032)),
    "transformer_grad_b3": lambda: transformer_grad_batch(torch.Generator().manual_seed(2033)),
    "reformer_grad": lambda: reformer_grad(torch.Generator().manual_seed(2034), "reformer_grad", layers=4),
    "reformer_grad_16": lambda: reformer_grad(torch.Generator().manual_seed(2035), "reformer_grad_16", layers=16, d=16),
    "reformer_lsh_grad": lambda: reformer_grad(torch.Generator().manual_seed(2036), "reformer_lsh_grad", layers=2,
                                               lsh=(4, 2, 8)),
    "universal_grad": lambda: universal_grad(torch.Generator().manual_seed(2070), "universal_grad"),
    "universal_grad_sepconv": lambda: universal_grad(torch.Generator().manual_seed(2078), "universal_grad_sepconv",
                                                     sepconv=True),
}
# examples/sparse's two patterns and three combinations (stride 8, summary 2, 45 positions: blocks
# of 16, the last one partial).
for _i, (_pat, _comb) in enumerate([(p_, c_) for p_ in ("strided", "fixed") for c_ in ("merged", "alternate", "heads")]):
    FIXTURES[f"sparse_grad_{_pat}_{_comb}"] = (lambda i=_i, p_=_pat, c_=_comb: sparse_grad(
        torch.Generator().manual_seed(2040 + i), f"sparse_grad_{p_}_{c_}", p_, c_,
        heads=4 if c_ == "heads" else 2))
# A window of 8 (blocks of 16) and block layouts of 16 (4 rows for ctx 64), causal and not.
FIXTURES["sparse_grad_window"] = lambda: sparse_grad(torch.Generator().manual_seed(2050), "sparse_grad_window", "window",
                                                     "merged")
# Longer: 300 positions, stride (block) 16, summary 4, blocks of 16: many key blocks per query
# block and query blocks per key block.
for _i, _pat in enumerate(("strided", "fixed")):
    FIXTURES[f"sparse_grad_{_pat}_long"] = (lambda i=_i, p_=_pat: sparse_grad(
        torch.Generator().manual_seed(2053 + i), f"sparse_grad_{p_}_long", p_, "merged", d=16, ctx=320, n=300, stride=16,
        summary=4))
SPARSE_LAYOUT = "#...,##..,.##.,#.##"
SPARSE_LAYOUT_NONCAUSAL = "#.#.,.##.,#..#,##.#"
FIXTURES["sparse_grad_layout"] = lambda: sparse_grad(torch.Generator().manual_seed(2051), "sparse_grad_layout", "layout",
                                                     "merged", stride=16, layout=SPARSE_LAYOUT.split(","))
FIXTURES["sparse_grad_layout_noncausal"] = lambda: sparse_grad(
    torch.Generator().manual_seed(2052), "sparse_grad_layout_noncausal", "layout", "merged", stride=16,
    layout=SPARSE_LAYOUT_NONCAUSAL.split(","), noncausal=True)

if __name__ == "__main__":
    import sys
    names = sys.argv[1:] or list(FIXTURES)  # the named fixtures only, or all of them
    for name in names:
        if name not in FIXTURES:
            sys.exit(f"unknown fixture {name!r}; known: {', '.join(FIXTURES)}")
        FIXTURES[name]()
    print(f"gradient fixtures written to {os.path.normpath(ROOT)}: {', '.join(names)}")
