#!/usr/bin/env python3
"""bench/quantized_ppl.py: what quantization costs SmolLM2-135M-Instruct, in size and perplexity.

    scripts/fetch_models.sh && bench/peers/setup.sh
    build/peers-venv/bin/python bench/quantized_ppl.py [--window 512] [--windows 8] [--threads 2]

Variants, each compiled by llama-compile and run by kiln on the same text (Debian's
/usr/share/common-licenses/GPL-3, held out: the model never trained on this copy's tokens in
this order more than on any other web text), in non-overlapping windows of `--window` tokens:
  q4_1 as stored   the GGUF file itself (Q8_0 embedding/head, Q4_1 matrices), read as stored;
  f32              the same weights dequantized to f32 by transformers (save_pretrained into
                   build/models/smollm2-f32), compiled from that config.json;
  q8_0, q4_0       that f32 form quantized by kiln at load (--quantize), as llama.cpp's
                   quantizer would.
Perplexity: exp of the mean next-token cross-entropy over each window's positions (the window's
first token predicts nothing), from kiln's `forward` logits, computed here in float64. Size: the
bytes of the weights the model keeps (the GGUF's tensor data; 4 bytes a weight for f32; the
blocks' bytes for --quantize). Prints one CSV row per variant.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.path.join(ROOT, "build", "bin")
OUT = os.path.join(ROOT, "build", "quantized_ppl")
GGUF_DIR = os.path.join(ROOT, "build", "models", "smollm2")
GGUF = os.path.join(GGUF_DIR, "SmolLM2-135M-Instruct.Q4_1.gguf")
F32_DIR = os.path.join(ROOT, "build", "models", "smollm2-f32")


def f32_checkpoint():
    if os.path.exists(os.path.join(F32_DIR, "model.safetensors")):
        return
    import torch
    from transformers import AutoModelForCausalLM
    from safetensors.torch import save_file
    m = AutoModelForCausalLM.from_pretrained(GGUF_DIR, gguf_file=os.path.basename(GGUF), dtype=torch.float32)
    # transformers refuses to save a model it read from GGUF: its dequantized tensors, written here.
    tmp = F32_DIR + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    sd = {k: v.contiguous() for k, v in m.state_dict().items() if not (m.config.tie_word_embeddings and k == "lm_head.weight")}
    save_file(sd, os.path.join(tmp, "model.safetensors"))
    cfg = m.config.to_dict()
    cfg.pop("quantization_config", None)
    json.dump(cfg, open(os.path.join(tmp, "config.json"), "w"), indent=1)
    os.rename(tmp, F32_DIR)


def tokens(n_windows, window):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(GGUF_DIR, gguf_file=os.path.basename(GGUF))
    ids = tok(open("/usr/share/common-licenses/GPL-3").read())["input_ids"]
    n = min(n_windows, len(ids) // window)
    return [ids[i * window:(i + 1) * window] for i in range(n)]


def compile_variant(name, config, quantize):
    exe = os.path.join(OUT, "smollm2-" + name)
    cmd = [os.path.join(BIN, "llama-compile"), "--config", config, "--ctx", "1024", "-o", exe, "--quiet"]
    if quantize:
        cmd += ["--quantize", quantize]
    subprocess.run(cmd, check=True)
    return exe


def perplexity(exe, weights, windows, threads):
    nll, count = 0.0, 0
    for k, w in enumerate(windows):
        out = os.path.join(OUT, "out")
        subprocess.run([exe, "--weights", weights, "--tokens", ",".join(map(str, w)), "--threads", str(threads), "--output-dir",
                        out, "--quiet"], check=True, stdout=subprocess.DEVNULL)
        logits = np.load(os.path.join(out, "logits.npy")).astype(np.float64).reshape(len(w), -1)
        lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
        target = np.array(w[1:])
        nll += float(np.sum(lse[:-1] - logits[np.arange(len(w) - 1), target]))
        count += len(w) - 1
    return float(np.exp(nll / count)), count


def weight_bytes(config, quantize):
    """The bytes the model keeps: from --emit=cost's parameter bytes."""
    cmd = [os.path.join(BIN, "llama-compile"), "--config", config, "--ctx", "1024", "--emit", "cost", "--quiet"]
    if quantize:
        cmd += ["--quantize", quantize]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    for line in (p.stdout + p.stderr).splitlines():
        if line.startswith("parameters: "):
            return line.split(": ", 1)[1].strip()
    return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not os.path.exists(GGUF):
        sys.exit("quantized_ppl: no %s: run scripts/fetch_models.sh" % GGUF)
    os.makedirs(OUT, exist_ok=True)
    f32_checkpoint()
    windows = tokens(a.windows, a.window)
    cfg = os.path.join(F32_DIR, "config.json")
    st = os.path.join(F32_DIR, "model.safetensors")
    variants = [("q4_1_as_stored", GGUF, None, GGUF), ("f32", cfg, None, st), ("q8_0", cfg, "q8_0", st), ("q4_0", cfg, "q4_0", st)]
    print("variant,weights_kept,perplexity,positions")
    for name, config, quantize, weights in variants:
        exe = compile_variant(name, config, quantize)
        ppl, n = perplexity(exe, weights, windows, a.threads)
        print("%s,%s,%.4f,%d" % (name, weight_bytes(config, quantize), ppl, n), flush=True)


if __name__ == "__main__":
    main()
