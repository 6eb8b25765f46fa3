#!/usr/bin/env python3
"""bench/peers/run.py: kiln's compiled examples against ONNX Runtime and PyTorch eager, in one run.

    bench/peers/setup.sh                       # the pinned peers in build/peers-venv (once)
    build/peers-venv/bin/python bench/peers/run.py [--threads 2] [--repeat 5] [--rounds 3]
                                               [--only gpt2_small_forward,...] [--quick]

Cases: gpt2_small_forward, gpt2_small_decode, gpt2_small_decode_batch, gpt2_small_generate, the
training steps, bert_base_forward, attention_causal, sparse_gradients (examples/sparse --train's
gradients against PyTorch's backward with a masked scaled_dot_product_attention).

It writes Hugging Face GPT-2 small and BERT-base checkpoints (random weights, seed 0,
save_pretrained) and their ONNX exports under build/peers (bench/peers/checkpoints.py), compiles
kiln's examples from those config.json files, and then, for every case, alternates `rounds`
times between kiln (the compiled executable, loading model.safetensors as a user does, timed by
its own --repeat median or, for generation, the whole process's wall time) and each peer (same
thread count; ONNX Runtime with all graph optimizations, PyTorch under torch.inference_mode).
Each row is the median over the rounds. Every row also checks kiln's outputs against the peer's
(max |diff| <= 1e-4 * max |ref|) and the run fails loudly when one does not match.

Output: kiln-bench's CSV columns (case,L,density,computed_density,kiln_ms,baseline,baseline_ms,
ratio,kiln_peak_bytes,baseline_peak_bytes,gflops,peak_fraction) plus max_rel_diff and a note;
ratio = baseline_ms / kiln_ms (above 1: kiln is faster). kiln_peak_bytes is the kiln process's
peak RSS; gflops is kiln's, on the case's work; peak_fraction is gflops over the FMA peak of
the threads used, which `kiln-bench --peak` measures at the start of the run (all cores' peak,
scaled by threads / cores).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "build", "bin")
OUT = os.path.join(ROOT, "build", "peers")
TOL = 1e-4
# The training rows' gradients at GPT-2 small's size, each relative to its own largest element
# (measured 3.5e-6 on 2026-12-07: every one of the 148, plain and --recompute-ffn all).
GRAD_TOL = 2e-5


def log(*a):
    print("peers:", *a, file=sys.stderr, flush=True)


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("peers: command failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout[-2000:], r.stderr[-2000:]))
    return r


def stale(exe, src):
    """An executable older than its compiler or the runtime it links."""
    deps = [src] + [os.path.join(ROOT, "build", "lib", l) for l in ("libkilnrt.a", "libkilnrt_main.a")]
    return not os.path.exists(exe) or any(os.path.exists(d) and os.path.getmtime(exe) < os.path.getmtime(d) for d in deps)


def compile_examples(threads):
    exes = {}
    for name, prog, cfg in (("gpt2", "gpt2-compile", "gpt2"), ("bert", "bert-compile", "bert")):
        exe = os.path.join(OUT, name + "-kiln")
        src = os.path.join(BIN, prog)
        if stale(exe, src):
            log("compiling", name, "with", prog)
            sh([src, "--config", os.path.join(OUT, cfg, "config.json"), "-o", exe])
        exes[name] = exe
    attn = {}
    for L in (2048, 8192):
        exe = os.path.join(OUT, "attention-causal-%d" % L)
        src = os.path.join(BIN, "kiln-bench-models")
        if stale(exe, src):
            sh([src, "--case", "attention", "--causal", "--heads", "12", "--dim", "64", "--ctx", str(L), "-o", exe])
        attn[L] = exe
    return exes, attn


def run_kiln(args, threads, repeat, out_dir=None):
    """Runs a compiled kiln executable; returns (median ms from --repeat, its peak RSS in bytes, stderr)."""
    cmd = list(args) + ["--threads", str(threads), "--repeat", str(repeat)]
    if out_dir:
        cmd += ["--output-dir", out_dir]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)  # this process's own rusage: its peak RSS
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if p.returncode != 0:
        sys.exit("peers: command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), stdout[-2000:], stderr[-2000:]))
    m = re.search(r"median time over \d+ runs: ([0-9.]+) ms", stdout)
    if repeat > 1 and not m:
        sys.exit("peers: no median time in kiln's output:\n" + stdout[-1000:])
    # kiln's own peak RSS (its --repeat line, or the line after --generate's timing): a child's
    # ru_maxrss counts what it shared with this Python process before exec, so it is only a
    # fallback for an executable that printed neither.
    r = re.search(r"peak RSS ([0-9.]+) MiB", stdout + stderr)
    rss = int(float(r.group(1)) * 1048576) if r else usage.ru_maxrss * 1024
    return (float(m.group(1)) if m else None), rss, stderr


def median_ms(fn, repeat):
    fn()  # warm
    t = []
    for _ in range(repeat):
        a = time.perf_counter()
        fn()
        t.append((time.perf_counter() - a) * 1e3)
    return statistics.median(t)


def check(case, kiln_out, ref, what, tol=None):
    kiln_out, ref = np.asarray(kiln_out, np.float64), np.asarray(ref, np.float64)
    if kiln_out.shape != ref.shape:
        sys.exit("peers: %s: kiln's %s has shape %s, %s's %s" % (case, what, kiln_out.shape, "the peer", ref.shape))
    scale = float(np.max(np.abs(ref)))
    diff = float(np.max(np.abs(kiln_out - ref)))
    rel = diff / scale if scale > 0 else diff
    tol = TOL if tol is None else tol
    if not np.all(np.isfinite(kiln_out)) or rel > tol:
        sys.exit("peers: %s: kiln's %s differs from the peer's: max |diff| %.3g = %.3g x max |ref| (allowed %g)"
                 % (case, what, diff, rel, tol))
    return rel


ROWS = []
PEAK = [0.0]  # GFLOP/s of the threads used (measure_peak)


def measure_peak(threads):
    """The FMA peak of `threads` threads: kiln-bench's all-core figure (best of several trials)
    scaled by threads / cores; 0 when kiln-bench is missing or prints none."""
    exe = os.path.join(BIN, "kiln-bench")
    if not os.path.exists(exe):
        return 0.0
    p = subprocess.run([exe, "--peak"], capture_output=True, text=True)
    m = re.search(r"measured on (\d+) cores: FMA peak ([0-9.]+) GFLOP/s", p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        print("peers: kiln-bench --peak printed no FMA peak; peak_fraction stays empty", file=sys.stderr)
        return 0.0
    cores, peak = int(m.group(1)), float(m.group(2))
    print("peers: " + m.group(0), file=sys.stderr, flush=True)
    return peak * min(threads, cores) / cores


def row(case, L, kiln_ms, baseline, base_ms, rss, gflop, rel, note="", base_rss=None):
    r = dict(case=case, L=L, kiln_ms=kiln_ms, baseline=baseline, baseline_ms=base_ms, ratio=base_ms / kiln_ms,
             kiln_peak_bytes=rss, baseline_peak_bytes=base_rss, gflops=gflop / (kiln_ms / 1e3) if gflop else 0.0, rel=rel,
             note=note)
    ROWS.append(r)
    frac = "%.3f" % (r["gflops"] / PEAK[0]) if r["gflops"] and PEAK[0] else ""
    print("%s,%d,1,1,%.3f,%s,%.3f,%.3f,%d,%s,%.1f,%s,%.2e,%s" % (case, L, kiln_ms, baseline, base_ms, r["ratio"], rss,
                                                               "" if base_rss is None else "%d" % base_rss, r["gflops"],
                                                               frac, rel, note), flush=True)


def gpt2_flops(L, past=0, head_rows=None):
    d, dff, n, V = 768, 3072, 12, 50257
    per_row = n * 2 * (d * 3 * d + d * d + 2 * d * dff)
    attn = n * 2 * 2 * d * (L * (L + 1) / 2 + L * past)  # QK^T and PV, causal
    head = 2 * d * V * (L if head_rows is None else head_rows)
    return (per_row * L + attn + head) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true", help="one size per case, 1 round")
    a = ap.parse_args()
    if a.repeat < 2 or a.rounds < 1:
        ap.error("--repeat must be at least 2 (kiln's time is the median its --repeat prints) and --rounds at least 1")
    only = set(filter(None, a.only.split(",")))
    want = lambda c: not only or c in only
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    import onnxruntime as ort
    from transformers import BertModel, GPT2LMHeadModel
    sys.path.insert(0, os.path.dirname(__file__))
    import checkpoints
    torch.set_num_threads(a.threads)
    os.makedirs(OUT, exist_ok=True)
    gdir, bdir = checkpoints.gpt2(OUT), checkpoints.bert(OUT)
    checkpoints.export(gdir, GPT2LMHeadModel, "logits", os.path.join(gdir, "model.onnx"))
    checkpoints.export(bdir, BertModel, "last_hidden_state", os.path.join(bdir, "model.onnx"))
    exes, attn = compile_examples(a.threads)
    rounds = 1 if a.quick else a.rounds
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    PEAK[0] = measure_peak(a.threads)
    print("case,L,density,computed_density,kiln_ms,baseline,baseline_ms,ratio,kiln_peak_bytes,baseline_peak_bytes,gflops,"
          "peak_fraction,max_rel_diff,note", flush=True)
    rng = np.random.default_rng(0)
    tmp = tempfile.mkdtemp(prefix="kiln-peers-")
    gw, bw = os.path.join(gdir, "model.safetensors"), os.path.join(bdir, "model.safetensors")

    gpt2 = bert = gsess = bsess = None
    if any(want(c) for c in ("gpt2_small_forward", "gpt2_small_decode", "gpt2_small_decode_batch", "gpt2_small_generate")):
        gpt2 = GPT2LMHeadModel.from_pretrained(gdir).eval()
        gsess = ort.InferenceSession(os.path.join(gdir, "model.onnx"), so, providers=["CPUExecutionProvider"])

    def ids_file(L, name, vocab=50257):
        ids = rng.integers(0, vocab, size=L).astype(np.int32)
        path = os.path.join(tmp, "%s-%d.npy" % (name, L))
        np.save(path, ids)
        return ids, path

    if want("gpt2_small_forward"):
        for L in ([128] if a.quick else [128, 512, 1024]):
            ids, path = ids_file(L, "gpt2")
            t = torch.from_numpy(ids.astype(np.int64))[None]
            k, o, p = [], [], []
            for _ in range(rounds):
                ms, rss, _ = run_kiln([exes["gpt2"], "--weights", gw, "--input", "tokens=" + path], a.threads, a.repeat,
                                      os.path.join(tmp, "g%d" % L))
                k.append(ms)
                o.append(median_ms(lambda: gsess.run(None, {"ids": t.numpy()}), a.repeat))
                with torch.inference_mode():
                    p.append(median_ms(lambda: gpt2(t, use_cache=False), a.repeat))
            got = np.load(os.path.join(tmp, "g%d" % L, "logits.npy"))
            ref_o = gsess.run(None, {"ids": t.numpy()})[0][0]
            with torch.inference_mode():
                ref_p = gpt2(t, use_cache=False).logits[0].numpy()
            km = statistics.median(k)
            row("gpt2_small_forward", L, km, "onnxruntime", statistics.median(o), rss, gpt2_flops(L),
                check("gpt2_small_forward", got, ref_o, "logits"))
            row("gpt2_small_forward", L, km, "torch", statistics.median(p), rss, gpt2_flops(L),
                check("gpt2_small_forward", got, ref_p, "logits"))

    if want("gpt2_small_decode"):
        for past in ([128] if a.quick else [128, 511, 1023]):
            ids, ppath = ids_file(past, "prompt")
            tokf = os.path.join(tmp, "token.npy")
            np.save(tokf, np.array([ids[-1]], np.int32))
            pastf = os.path.join(tmp, "past-%d.npy" % past)
            np.save(pastf, np.array([past], np.int32))
            # Correctness: a decode step at `past` after the prompt, through --generate 2 (the first
            # token comes from the prompt's run, the second from decode at past), teacher-forced.
            gd = os.path.join(tmp, "d%d" % past)
            run_kiln([exes["gpt2"], "--weights", gw, "--input", "tokens=" + ppath, "--generate", "2", "--quiet"], a.threads,
                     1, gd)
            gen = np.load(os.path.join(gd, "generated.npy"))
            steps = np.load(os.path.join(gd, "step_logits.npy"))
            t = torch.from_numpy(ids.astype(np.int64))[None]
            with torch.inference_mode():
                full = gpt2(torch.cat([t, torch.tensor([[int(gen[0])]])], 1), use_cache=False).logits[0]
                rel = check("gpt2_small_decode", steps, full[-2:].numpy(), "step logits")
                cache = gpt2(t, use_cache=True).past_key_values
                nxt = torch.tensor([[int(gen[0])]])

                def step():
                    gpt2(nxt, past_key_values=cache, use_cache=True)
                    cache.crop(-1)  # back to `past` rows
                k, p = [], []
                for _ in range(rounds):
                    ms, rss, _ = run_kiln([exes["gpt2"], "--weights", gw, "--entry", "decode", "--input", "token=" + tokf,
                                           "--input", "past=" + pastf], a.threads, 4 * a.repeat)
                    k.append(ms)
                    p.append(median_ms(step, 4 * a.repeat))
            row("gpt2_small_decode", past, statistics.median(k), "torch", statistics.median(p), rss,
                gpt2_flops(1, past), rel, "past=%d; torch DynamicCache cropped back each step" % past)

    if want("gpt2_small_decode_batch"):
        # B sequences each at `past` cached positions, one decode step for all (kiln: decode_batch
        # of GPT-2 compiled with --batch B, one KV cache per sequence; torch: a [B, 1] step on its
        # DynamicCache, cropped back after each timed step).
        B, past = 4, 128
        exe = os.path.join(OUT, "gpt2-batch%d-kiln" % B)
        if stale(exe, os.path.join(BIN, "gpt2-compile")):
            log("compiling gpt2 with --batch", B)
            sh([os.path.join(BIN, "gpt2-compile"), "--config", os.path.join(gdir, "config.json"), "--batch", str(B), "-o", exe])
        prompts = rng.integers(0, 50257, size=(B, past)).astype(np.int32)
        nxt = rng.integers(0, 50257, size=B).astype(np.int32)
        pf, nf, pastf = (os.path.join(tmp, n) for n in ("bprompts.npy", "bnext.npy", "bpast.npy"))
        np.save(pf, prompts)
        np.save(nf, nxt)
        np.save(pastf, np.full(B, past, np.int32))  # each sequence's past (decode_batch's past_batch)
        # Correctness: the prompts through forward (which fills each sequence's cache), then the
        # step, in one process, against torch's last-position logits over prompt + next token.
        bd = os.path.join(tmp, "db")
        run_kiln([exe, "--weights", gw, "--entry", "forward,decode_batch", "--input", "tokens=" + pf, "--input",
                  "token_batch=" + nf, "--input", "past_batch=" + pastf], a.threads, 1, bd)
        tp, tn = torch.from_numpy(prompts.astype(np.int64)), torch.from_numpy(nxt.astype(np.int64))[:, None]
        with torch.inference_mode():
            ref = gpt2(torch.cat([tp, tn], 1), use_cache=False).logits[:, -1].numpy()
            rel = check("gpt2_small_decode_batch", np.load(os.path.join(bd, "next_logits_batch.npy")), ref, "step logits")
            cache = gpt2(tp, use_cache=True).past_key_values

            def bstep():
                gpt2(tn, past_key_values=cache, use_cache=True)
                cache.crop(-1)
            k, p = [], []
            for _ in range(rounds):
                ms, rss, _ = run_kiln([exe, "--weights", gw, "--entry", "decode_batch", "--input", "token_batch=" + nf,
                                       "--input", "past_batch=" + pastf], a.threads, 4 * a.repeat)
                k.append(ms)
                p.append(median_ms(bstep, 4 * a.repeat))
        km, pm = statistics.median(k), statistics.median(p)
        row("gpt2_small_decode_batch", past, km, "torch", pm, rss, B * gpt2_flops(1, past), rel,
            "B=%d sequences at past=%d, one step for all: kiln %.0f tok/s, torch %.0f tok/s" % (B, past, B / (km / 1e3),
                                                                                             B / (pm / 1e3)))

    if want("gpt2_small_generate"):
        P, N = (128, 16) if a.quick else (512, 64)
        ids, ppath = ids_file(P, "gen")
        t = torch.from_numpy(ids.astype(np.int64))[None]
        k, p = [], []
        for r in range(rounds):
            gd = os.path.join(tmp, "gen%d" % r)
            a0 = time.perf_counter()
            _, rss, err = run_kiln([exes["gpt2"], "--weights", gw, "--input", "tokens=" + ppath, "--generate", str(N)],
                                   a.threads, 1, gd)
            k.append((time.perf_counter() - a0) * 1e3)
            with torch.inference_mode():
                a0 = time.perf_counter()
                m = GPT2LMHeadModel.from_pretrained(gdir).eval()
                m.generate(t, max_new_tokens=N, min_new_tokens=N, do_sample=False, pad_token_id=0)
                p.append((time.perf_counter() - a0) * 1e3)
        gen = np.load(os.path.join(gd, "generated.npy"))
        steps = np.load(os.path.join(gd, "step_logits.npy"))
        with torch.inference_mode():  # teacher-forced: the peer's logits over prompt + kiln's tokens
            full = gpt2(torch.cat([t, torch.from_numpy(gen[:-1].astype(np.int64))[None]], 1), use_cache=False).logits[0]
        rel = check("gpt2_small_generate", steps, full[P - 1:].numpy(), "step logits")
        km = statistics.median(k)
        row("gpt2_small_generate", P, km, "torch", statistics.median(p), rss, 0.0, rel,
            "prompt %d + %d new tokens, whole process incl. loading (torch: from_pretrained + generate); kiln %.1f tok/s, "
            "torch %.1f tok/s; kiln: %s" % (P, N, N / (km / 1e3), N / (statistics.median(p) / 1e3), next(l for l in err.splitlines() if l.startswith("prompt:"))))

    # The training step's variants: the compile flags of each.
    train_flags = {"gpt2_small_train": [], "gpt2_small_train_recompute_act": ["--recompute-ffn", "activation"],
                   "gpt2_small_train_recompute_ffn": ["--recompute-ffn", "all"]}
    train_cases = [c for c in train_flags if want(c)]
    if train_cases:
        # One training step (forward, backward, clipping at 1.0, AdamW) over a batch of B = 4
        # windows of T = 256: kiln's train_step against PyTorch eager (dropout 0, as kiln).
        # gpt2_small_train_recompute_act / _ffn: the same compiled with --recompute-ffn activation
        # / all (the backward recomputes each FFN's activation / both intermediates), timed in
        # the same rounds against the same peer.
        B, T = (2, 128) if a.quick else (4, 256)
        exes_t = {}
        for case in train_cases:
            flags = train_flags[case]
            exes_t[case] = exe = os.path.join(OUT, "gpt2-train-kiln-b%d%s" % (B, "-" + flags[-1] if flags else ""))
            if stale(exe, os.path.join(BIN, "gpt2-compile")):
                log("compiling gpt2 with --train --batch %d %s(the backward's kernels at GPT-2 small's sizes: minutes)" %
                    (B, " ".join(flags + [""])))
                sh([os.path.join(BIN, "gpt2-compile"), "--config", os.path.join(gdir, "config.json"), "--train", "--batch",
                    str(B), "-o", exe] + flags)
        ids = rng.integers(0, 50257, size=(B, T + 1)).astype(np.int32)
        tokf, tgtf = os.path.join(tmp, "train-tokens.npy"), os.path.join(tmp, "train-targets.npy")
        np.save(tokf, ids[:, :T])
        np.save(tgtf, ids[:, 1:])
        tt = torch.from_numpy(ids[:, :T].astype(np.int64))
        targets = torch.from_numpy(ids[:, 1:].astype(np.int64)).reshape(B * T)
        # PyTorch's step runs in a process of its own (bench/peers/torch_train.py): its peak RSS
        # is then PyTorch's alone, not this process's ONNX sessions and models.
        def torch_step_child():
            outp = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "torch_train.py"), gdir, tokf,
                                   tgtf, str(a.threads), str(a.repeat)], check=True, capture_output=True, text=True)
            return json.loads(outp.stdout.strip().splitlines()[-1])
        # Correctness at the timed size: the loss of these weights on this window (kiln's eval
        # entry), every parameter's gradient (the `gradients` entry: forward, loss and backward,
        # run by each variant, whose backward is what differs) and the first train_step's loss
        # and gradient sum of squares before clipping, each against PyTorch autograd's (dropout
        # 0, float64 sums of squares). A gradient is checked relative to its own largest element.
        model = GPT2LMHeadModel.from_pretrained(gdir, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0).train()
        loss_t = torch.nn.functional.cross_entropy(model(tt, use_cache=False).logits.reshape(B * T, -1), targets)
        loss_t.backward()
        ref = loss_t.detach().reshape(1).numpy()
        tgrads = {n: p.grad.numpy() for n, p in model.named_parameters()}  # the tied head's: in wte's
        ref_first = np.array([float(loss_t.detach()), sum(float((p.grad.double() ** 2).sum()) for p in model.parameters())])
        del model, loss_t
        # The eval entry has no backward, so --recompute-ffn leaves it as it is: one run checks it.
        ed = os.path.join(tmp, "train-eval")
        run_kiln([next(iter(exes_t.values())), "--weights", gw, "--entry", "eval", "--input", "tokens=" + tokf, "--input",
                  "targets=" + tgtf], a.threads, 1, ed)
        rel = check(train_cases[0], np.load(os.path.join(ed, "loss.npy")), ref, "loss")
        grad_rel = {}
        for case, exe in exes_t.items():
            gd = os.path.join(tmp, "train-grads-" + case)
            run_kiln([exe, "--weights", gw, "--entry", "gradients", "--input", "tokens=" + tokf, "--input",
                      "targets=" + tgtf], a.threads, 1, gd)
            worst, worst_name = 0.0, ""
            for name, g in tgrads.items():
                r_ = check(case, np.load(os.path.join(gd, "grad." + name + ".npy")), g, "gradient of " + name, GRAD_TOL)
                if r_ > worst:
                    worst, worst_name = r_, name
            grad_rel[case] = (worst, worst_name)
            log("%s: %d gradients against PyTorch autograd: at most %.2e of a gradient's largest element (%s)" %
                (case, len(tgrads), worst, worst_name))
            shutil.rmtree(gd, ignore_errors=True)  # 0.5 GB
            sd = os.path.join(tmp, "train-step-" + case)
            run_kiln([exe, "--weights", gw, "--entry", "train_step", "--input", "tokens=" + tokf, "--input",
                      "targets=" + tgtf], a.threads, 1, sd)
            first = np.concatenate([np.load(os.path.join(sd, n + ".npy")) for n in ("loss", "grad_sumsq")])
            r_ = check(case, first, ref_first, "first train_step's loss and grad_sumsq", GRAD_TOL)
            log("%s: the first train_step's loss and gradient sum of squares: %.2e of PyTorch's" % (case, r_))
        k, p, prss, krss = {c: [] for c in exes_t}, [], [], {}
        for _ in range(rounds):
            for case, exe in exes_t.items():
                ms, krss[case], _ = run_kiln([exe, "--weights", gw, "--entry", "train_step", "--input", "tokens=" + tokf,
                                              "--input", "targets=" + tgtf], a.threads, a.repeat)
                k[case].append(ms)
            t = torch_step_child()
            p.append(t["ms"])
            prss.append(t["peak_bytes"])
        for case in exes_t:
            km = statistics.median(k[case])
            row(case, T, km, "torch", statistics.median(p), krss[case], 3 * B * gpt2_flops(T), rel,
                "B=%d T=%d: forward+backward+clip+AdamW%s; kiln %.0f tok/s, torch %.0f tok/s (torch eager, dropout 0, "
                "its own process); every gradient within %.1e of its largest element of PyTorch's (%s)"
                % (B, T, ", " + " ".join(train_flags[case]) if train_flags[case] else "", B * T / (km / 1e3),
                   B * T / (statistics.median(p) / 1e3), grad_rel[case][0], grad_rel[case][1]),
                base_rss=max(prss))

    if want("bert_base_forward"):
        bert = BertModel.from_pretrained(bdir, add_pooling_layer=False).eval()
        bsess = ort.InferenceSession(os.path.join(bdir, "model.onnx"), so, providers=["CPUExecutionProvider"])
        for L in ([128] if a.quick else [128, 512]):
            ids, path = ids_file(L, "bert", 30522)
            t = torch.from_numpy(ids.astype(np.int64))[None]
            k, o, p = [], [], []
            for _ in range(rounds):
                ms, rss, _ = run_kiln([exes["bert"], "--weights", bw, "--input", "tokens=" + path], a.threads, a.repeat,
                                      os.path.join(tmp, "b%d" % L))
                k.append(ms)
                o.append(median_ms(lambda: bsess.run(None, {"ids": t.numpy()}), a.repeat))
                with torch.inference_mode():
                    p.append(median_ms(lambda: bert(input_ids=t, token_type_ids=torch.zeros_like(t)), a.repeat))
            got = np.load(os.path.join(tmp, "b%d" % L, "hidden.npy"))
            ref_o = bsess.run(None, {"ids": t.numpy()})[0][0]
            with torch.inference_mode():
                ref_p = bert(input_ids=t, token_type_ids=torch.zeros_like(t)).last_hidden_state[0].numpy()
            d, dff = 768, 3072
            fl = (12 * 2 * L * (4 * d * d + 2 * d * dff) + 12 * 4 * d * L * L) / 1e9
            km = statistics.median(k)
            row("bert_base_forward", L, km, "onnxruntime", statistics.median(o), rss, fl, check("bert_base_forward", got, ref_o, "hidden"))
            row("bert_base_forward", L, km, "torch", statistics.median(p), rss, fl, check("bert_base_forward", got, ref_p, "hidden"))

    if want("attention_causal"):
        for L in ([2048] if a.quick else [2048, 8192]):
            x = {n: rng.standard_normal((12, L, 64)).astype(np.float32) for n in "qkv"}
            paths = []
            for n, v in x.items():
                paths += ["--input", "%s=%s" % (n, os.path.join(tmp, "%s%d.npy" % (n, L)))]
                np.save(os.path.join(tmp, "%s%d.npy" % (n, L)), v)
            tq, tk, tv = (torch.from_numpy(x[n])[None] for n in "qkv")
            k, p = [], []
            for _ in range(rounds):
                ms, rss, _ = run_kiln([attn[L]] + paths, a.threads, a.repeat, os.path.join(tmp, "a%d" % L))
                k.append(ms)
                with torch.inference_mode():
                    p.append(median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True),
                                       a.repeat))
            got = np.load(os.path.join(tmp, "a%d" % L, "o.npy"))
            with torch.inference_mode():
                ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)[0].numpy()
            fl = 12 * 4 * 64 * L * (L + 1) / 2 / 1e9
            row("attention_causal", L, statistics.median(k), "torch_sdpa", statistics.median(p), rss, fl,
                check("attention_causal", got, ref, "o"))
    if want("sparse_gradients"):
        # examples/sparse --train (strided, 4 layers, d 256, 8 heads, stride 128): one `gradients`
        # run (forward, loss, backward; no optimizer) against PyTorch's forward and backward of
        # the same decoder with scaled_dot_product_attention over the pattern as a boolean mask.
        # Every parameter's gradient is checked.
        import sparse_peer
        from safetensors.numpy import save_file
        layers, d, heads, vocab, stride = 4, 256, 8, 256, 128
        for L in ([2048] if a.quick else [2048, 8192]):
            exe = os.path.join(OUT, "sparse-strided-%d" % L)
            if stale(exe, os.path.join(BIN, "sparse-compile")):
                sh([os.path.join(BIN, "sparse-compile"), "--train", "--pattern", "strided", "--ctx", str(L), "-o", exe])
            w = sparse_peer.random_weights(np.random.default_rng(L), layers, d, vocab, L)
            wpath = os.path.join(tmp, "sparse%d.safetensors" % L)
            save_file(w, wpath)
            ids = rng.integers(0, vocab, L + 1)
            tokp, tgtp = os.path.join(tmp, "st%d.npy" % L), os.path.join(tmp, "sy%d.npy" % L)
            np.save(tokp, ids[:L].astype(np.int64))
            np.save(tgtp, ids[1:].astype(np.int64))
            tw = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in w.items()}
            tt, ty = torch.from_numpy(ids[:L].astype(np.int64)), torch.from_numpy(ids[1:].astype(np.int64))
            mask = sparse_peer.strided_mask(L, stride)

            def tstep():
                for t in tw.values():
                    t.grad = None
                l = sparse_peer.loss(tw, tt, ty, layers, d, heads, mask)
                l.backward()
                return l
            k, p = [], []
            out_dir = os.path.join(tmp, "sg%d" % L)
            for _ in range(rounds):
                ms, rss, _ = run_kiln([exe, "--weights", wpath, "--entry", "gradients", "--input", "tokens=" + tokp,
                                       "--input", "targets=" + tgtp], a.threads, a.repeat, out_dir)
                k.append(ms)
                p.append(median_ms(tstep, a.repeat))
            rel = check("sparse_gradients", np.load(os.path.join(out_dir, "loss.npy")), [float(tstep().detach())], "loss")
            for name, t in tw.items():
                rel = max(rel, check("sparse_gradients", np.load(os.path.join(out_dir, "grad.%s.npy" % name)).reshape(t.shape),
                                     t.grad.numpy(), "grad." + name))
            pairs = float(mask.sum()) * heads
            lin = 2 * L * layers * 12 * d * d + 2 * L * d * vocab
            fl = 3 * (lin + 4 * (d // heads) * pairs) / 1e9  # forward and backward (about twice the forward)
            row("sparse_gradients", L, statistics.median(k), "torch_sdpa_mask", statistics.median(p), rss, fl, rel,
                note="strided s=%d: %.1f%% of the causal pairs" % (stride, 100 * pairs / heads / (L * (L + 1) / 2)))
    log("done: %d rows, every output matched its peer" % len(ROWS))


if __name__ == "__main__":
    main()
