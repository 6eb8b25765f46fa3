#!/usr/bin/env python3
"""bench/peers/minilm.py: all-MiniLM-L6-v2 sentence embeddings (the sentence-transformers folder
of the PyPI wheel, scripts/fetch_models.sh) for a batch of 32 sentences padded to the longest:
kiln (examples/bert compiled with --pool mean --normalize --batch 32) against ONNX Runtime (the
same BertModel + mean pooling + normalization exported by torch.onnx) and PyTorch eager, in one
run, 2 threads by default, each peer in its own process (its peak RSS is its own).

    bench/peers/setup.sh && scripts/fetch_models.sh
    build/peers-venv/bin/python bench/peers/minilm.py [--threads 2] [--rounds 20]

Row `minilm_embed` (kiln-bench's CSV columns): the median time of one batch (ms) over --rounds
runs after a warm-up, against each peer; every side's embeddings are checked against PyTorch's
(max |difference| in the note).
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

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, "build", "bin")
OUT = os.path.join(ROOT, "build", "peers")
FOLDER = os.path.join(ROOT, "build", "models", "all-MiniLM-L6-v2")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "minilm", "sentences.json")
MORE = [
    "The train to the airport leaves every twenty minutes.",
    "She planted tomatoes, basil and two rows of beans in the spring.",
    "Is there a pharmacy open near the station tonight?",
    "The orchestra rehearsed the second movement until midnight.",
    "Rain is expected over the mountains by the weekend.",
    "He forgot his umbrella again.",
    "A database index trades write speed for faster lookups.",
    "The children built a castle of sand before the tide came in.",
    "Please send the signed contract by Friday.",
    "The museum's new wing displays sculptures from the nineteenth century.",
    "Cats sleep for most of the day.",
    "What time does the library close on Sundays?",
]


def batch():
    from transformers import AutoTokenizer
    sentences = json.load(open(FIXTURE))["sentences"] + MORE
    tok = AutoTokenizer.from_pretrained(FOLDER)
    enc = tok(sentences, padding=True, return_tensors="np")
    return enc["input_ids"].astype(np.int64), enc["attention_mask"].astype(np.int64)


def module():
    import torch
    from transformers import AutoModel

    class Embed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = AutoModel.from_pretrained(FOLDER, dtype=torch.float32, attn_implementation="eager").eval()

        def forward(self, ids, mask):
            h = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(e, p=2, dim=1)
    return Embed()


def timed(f, rounds):
    f()  # warm-up
    ts = []
    for _ in range(rounds):
        a = time.perf_counter()
        out = f()
        ts.append((time.perf_counter() - a) * 1e3)
    return statistics.median(ts), out


def peer(name, threads, rounds):
    ids, mask = batch()
    import torch
    torch.set_num_threads(threads)
    m = module()
    if name == "torch":
        ti, tm = torch.from_numpy(ids), torch.from_numpy(mask)
        with torch.inference_mode():
            ms, out = timed(lambda: m(ti, tm).numpy(), rounds)
    else:
        import onnxruntime as ort
        path = os.path.join(OUT, "minilm.onnx")
        with torch.inference_mode():
            torch.onnx.export(m, (torch.from_numpy(ids), torch.from_numpy(mask)), path, input_names=["ids", "mask"],
                              output_names=["e"], dynamic_axes={"ids": {0: "b", 1: "l"}, "mask": {0: "b", 1: "l"}},
                              opset_version=17, dynamo=False)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        ms, out = timed(lambda: s.run(None, {"ids": ids, "mask": mask})[0], rounds)
    np.save(os.path.join(OUT, "minilm-%s.npy" % name), out)
    return dict(ms=ms, rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--peer", default="")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if a.peer:  # a child: one peer, printed as JSON
        print(json.dumps(peer(a.peer, a.threads, a.rounds)))
        return
    if not os.path.exists(os.path.join(FOLDER, "model.safetensors")):
        sys.exit("minilm: no %s: run scripts/fetch_models.sh" % FOLDER)
    ids, mask = batch()
    np.save(os.path.join(OUT, "minilm-ids.npy"), ids.astype(np.int32))
    np.save(os.path.join(OUT, "minilm-mask.npy"), mask.astype(np.int32))
    exe = os.path.join(OUT, "minilm-kiln")
    subprocess.run([os.path.join(BIN, "bert-compile"), "--config", os.path.join(FOLDER, "config.json"), "--pool", "mean",
                    "--normalize", "--batch", str(len(ids)), "--ctx", "512", "-o", exe, "--quiet"], check=True)
    p = subprocess.run([os.path.join(BIN, "kiln-bench"), "--peak"], capture_output=True, text=True)
    m = re.search(r"measured on \d+ cores: FMA peak [0-9.]+ GFLOP/s.*", p.stdout + p.stderr)
    print("minilm: " + (m.group(0) if m else "no FMA peak measured"), file=sys.stderr)
    print("minilm: CPU " + next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
          file=sys.stderr)
    kout = os.path.join(OUT, "minilm-out")
    p = subprocess.run([exe, "--weights", os.path.join(FOLDER, "model.safetensors"), "--input",
                        "tokens=" + os.path.join(OUT, "minilm-ids.npy"), "--input", "attention_mask=" + os.path.join(OUT, "minilm-mask.npy"),
                        "--threads", str(a.threads), "--repeat", str(a.rounds + 1), "--output-dir", kout],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("minilm: kiln failed:\n" + p.stdout[-2000:] + p.stderr[-2000:])
    km = float(re.search(r"median time over \d+ runs: ([0-9.]+) ms", p.stdout).group(1))
    krss = int(float(re.search(r"peak RSS ([0-9.]+) MiB", p.stdout).group(1)) * 1048576)
    res = {}
    for name in ("onnxruntime", "torch"):
        q = subprocess.run([sys.executable, __file__, "--peer", name, "--threads", str(a.threads), "--rounds", str(a.rounds)],
                           capture_output=True, text=True)
        if q.returncode != 0:
            sys.exit("minilm: peer %s failed:\n%s" % (name, q.stderr[-3000:]))
        res[name] = json.loads(q.stdout.strip().splitlines()[-1])
    ref = np.load(os.path.join(OUT, "minilm-torch.npy"))
    kerr = float(np.abs(np.load(os.path.join(kout, "embedding.npy")) - ref).max())
    oerr = float(np.abs(np.load(os.path.join(OUT, "minilm-onnxruntime.npy")) - ref).max())
    print("case,L,density,computed_density,kiln_ms,baseline,baseline_ms,ratio,kiln_peak_bytes,baseline_peak_bytes,note")
    for name in ("onnxruntime", "torch"):
        b = res[name]["ms"]
        print("minilm_embed,%d,1,1,%.3f,%s,%.3f,%.3f,%d,%d,B=%d; max |kiln - torch| %.2g; max |onnxruntime - torch| %.2g"
              % (ids.shape[1], km, name, b, b / km, krss, res[name]["rss"], len(ids), kerr, oerr))


if __name__ == "__main__":
    main()
