#!/usr/bin/env python3
"""bench/peers/smollm2.py: SmolLM2-135M-Instruct from its Q4_1 GGUF file: kiln against llama.cpp
(llama-cpp-python, built from source by bench/peers/setup.sh) and transformers eager (the file
dequantized to f32), in one run, 2 threads by default.

    bench/peers/setup.sh && scripts/fetch_models.sh
    build/peers-venv/bin/python bench/peers/smollm2.py [--threads 2] [--rounds 3] [--prompt 512] [--generate 64]

Rows (kiln-bench's CSV columns, as bench/peers/run.py prints them):
  smollm2_prefill  the prompt of `--prompt` tokens through the model once (ms);
  smollm2_decode   one generated token after it (ms per token, the mean over `--generate` greedy
                   steps at pasts prompt .. prompt + generate);
each against llama.cpp (n_ctx 1024; its KV cache in f32 as kiln's, `--llama-kv f16` for its default)
and transformers. Every peer runs in its own process (its peak RSS is its own). kiln's greedy
tokens are checked against transformers' (identical, as the default path multiplies f32
activations by the blocks decoded in registers); llama.cpp's agreement is reported, not required
(its int8 activations change the logits by ~1e-2).
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "build", "bin")
OUT = os.path.join(ROOT, "build", "peers")
GGUF_DIR = os.path.join(ROOT, "build", "models", "smollm2")
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def prompt_ids(n):
    """n token ids of English text (the GPL's), with transformers' tokenizer of the file."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(GGUF_DIR, gguf_file=GGUF)
    text = open("/usr/share/common-licenses/GPL-3").read()
    ids = tok(text)["input_ids"]
    return ids[:n]


def peer_llama_cpp(ids, gen, threads, kv="f32"):
    import llama_cpp
    from llama_cpp import Llama
    kv_type = llama_cpp.GGML_TYPE_F32 if kv == "f32" else llama_cpp.GGML_TYPE_F16
    llm = Llama(model_path=os.path.join(GGUF_DIR, GGUF), n_ctx=1024, n_threads=threads, n_threads_batch=threads,
                n_batch=len(ids), type_k=kv_type, type_v=kv_type, verbose=False)
    llm.reset()
    a = time.perf_counter()
    llm.eval(ids)
    prefill = (time.perf_counter() - a) * 1e3
    import ctypes
    import llama_cpp
    import numpy as np

    def last_argmax():  # the last position's logits, as llama.cpp keeps them (no copy of all rows)
        p = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        return int(np.ctypeslib.as_array(ctypes.cast(p, ctypes.POINTER(ctypes.c_float)), shape=(llm.n_vocab(),)).argmax())

    out = []
    tok = last_argmax()
    a = time.perf_counter()
    for _ in range(gen):
        out.append(tok)
        llm.eval([tok])
        tok = last_argmax()
    decode = (time.perf_counter() - a) * 1e3 / gen
    return dict(prefill_ms=prefill, decode_ms=decode, tokens=out)


def peer_transformers(ids, gen, threads):
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(GGUF_DIR, gguf_file=GGUF, dtype=torch.float32).eval()
    with torch.inference_mode():
        x = torch.tensor([ids])
        a = time.perf_counter()
        o = model(x, use_cache=True)
        prefill = (time.perf_counter() - a) * 1e3
        past, tok, out = o.past_key_values, int(o.logits[0, -1].argmax()), []
        a = time.perf_counter()
        for _ in range(gen):
            out.append(tok)
            o = model(torch.tensor([[tok]]), past_key_values=past, use_cache=True)
            past, tok = o.past_key_values, int(o.logits[0, -1].argmax())
        decode = (time.perf_counter() - a) * 1e3 / gen
    return dict(prefill_ms=prefill, decode_ms=decode, tokens=out)


def run_peer(name, ids, gen, threads, kv):
    """One peer in its own process: its timings, tokens and peak RSS."""
    p = subprocess.run([sys.executable, __file__, "--peer", name, "--threads", str(threads), "--generate", str(gen),
                        "--llama-kv", kv, "--ids", ",".join(map(str, ids))], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("smollm2: peer %s failed:\n%s" % (name, p.stderr[-3000:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_kiln(exe, ids, gen, threads):
    out = os.path.join(OUT, "smollm2-out")
    p = subprocess.run([exe, "--weights", os.path.join(GGUF_DIR, GGUF), "--tokens", ",".join(map(str, ids)), "--generate",
                        str(gen), "--threads", str(threads), "--output-dir", out],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("smollm2: kiln failed:\n" + p.stdout[-2000:] + p.stderr[-2000:])
    t = re.search(r"prompt: \d+ tokens in ([0-9.]+) ms.*generated: (\d+) tokens in [0-9.]+ ms \(([0-9.]+) ms/token", p.stderr)
    r = re.search(r"peak RSS ([0-9.]+) MiB", p.stderr)
    import numpy as np
    toks = np.load(os.path.join(out, "generated.npy")).reshape(-1).tolist()
    return dict(prefill_ms=float(t.group(1)), decode_ms=float(t.group(3)), tokens=toks[-gen:],
                rss=int(float(r.group(1)) * 1048576))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--generate", type=int, default=64)
    ap.add_argument("--llama-kv", choices=("f32", "f16"), default="f32", help="llama.cpp's KV cache type (kiln's is f32)")
    ap.add_argument("--peer", default="")
    ap.add_argument("--ids", default="")
    a = ap.parse_args()
    if a.peer:  # a child: one peer, printed as JSON
        ids = [int(x) for x in a.ids.split(",")]
        if a.peer == "llama.cpp":
            r = peer_llama_cpp(ids, a.generate, a.threads, a.llama_kv)
        else:
            r = peer_transformers(ids, a.generate, a.threads)
        r["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps(r))
        return
    if not os.path.exists(os.path.join(GGUF_DIR, GGUF)):
        sys.exit("smollm2: no %s: run scripts/fetch_models.sh" % os.path.join(GGUF_DIR, GGUF))
    os.makedirs(OUT, exist_ok=True)
    exe = os.path.join(OUT, "smollm2-kiln")
    subprocess.run([os.path.join(BIN, "llama-compile"), "--config", os.path.join(GGUF_DIR, GGUF), "--ctx", "1024", "-o", exe,
                    "--quiet"], check=True)
    p = subprocess.run([os.path.join(BIN, "kiln-bench"), "--peak"], capture_output=True, text=True)
    m = re.search(r"measured on \d+ cores: FMA peak [0-9.]+ GFLOP/s.*", p.stdout + p.stderr)
    print("smollm2: " + (m.group(0) if m else "no FMA peak measured"), file=sys.stderr)
    print("smollm2: CPU " + next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
          file=sys.stderr)
    ids = prompt_ids(a.prompt)
    res = {"kiln": [], "llama.cpp": [], "transformers": []}
    for _ in range(a.rounds):
        res["kiln"].append(run_kiln(exe, ids, a.generate, a.threads))
        for peer in ("llama.cpp", "transformers"):
            res[peer].append(run_peer(peer, ids, a.generate, a.threads, a.llama_kv))
    med = lambda k, f: statistics.median(r[f] for r in res[k])
    kt, tt, lt = res["kiln"][0]["tokens"], res["transformers"][0]["tokens"], res["llama.cpp"][0]["tokens"]
    same = next((i for i, (x, y) in enumerate(zip(kt, tt)) if x != y), len(kt))
    agree_llama = next((i for i, (x, y) in enumerate(zip(lt, tt)) if x != y), len(lt))
    if same < len(kt):
        sys.exit("smollm2: kiln's greedy tokens leave transformers' at step %d" % same)
    print("case,L,density,computed_density,kiln_ms,baseline,baseline_ms,ratio,kiln_peak_bytes,baseline_peak_bytes,note")
    for case, f in (("smollm2_prefill", "prefill_ms"), ("smollm2_decode", "decode_ms")):
        for peer in ("llama.cpp", "transformers"):
            k, b = med("kiln", f), med(peer, f)
            note = "greedy tokens = transformers' (%d of %d)" % (same, len(kt))
            if peer == "llama.cpp":
                note += "; llama.cpp's (KV cache %s) agree with transformers' for %d of %d" % (a.llama_kv, agree_llama, len(lt))
            print("%s,%d,1,1,%.3f,%s,%.3f,%.3f,%d,%d,%s" % (case, a.prompt, k, peer, b, b / k, med("kiln", "rss"), med(peer, "rss"), note))


if __name__ == "__main__":
    main()
