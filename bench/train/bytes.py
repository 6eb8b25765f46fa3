#!/usr/bin/env python3
"""The byte-level training demo's data and its baseline, with nothing but Python's standard library.

    bench/train/bytes.py data OUT_DIR
        OUT_DIR/train.npy: the bytes of every regular file in /usr/share/common-licenses/ but
        GPL-3 (the GPL, LGPL and GFDL links point at versioned files: links are skipped, so no
        copy of GPL-3 reaches the training data), in name order; OUT_DIR/val.npy: GPL-3's bytes.
    bench/train/bytes.py ngram OUT_DIR ORDER T
        The mean negative log-likelihood (nats) of an order-ORDER byte model with add-one
        smoothing, counted on train.npy, over the positions the executable's --eval-data reads:
        the targets of the first min(64, available) non-overlapping windows of T + 1 bytes of
        val.npy (contexts from the validation text; shorter at its start).
    bench/train/bytes.py depths OUT_DIR EXE WEIGHTS T
        A Universal Transformer's halting depths (examples/universal): EXE with WEIGHTS run on
        the same validation windows' T inputs; how many positions took each number of steps,
        and the mean depth of the positions after a space or newline against the others.
"""
import math
import os
import struct
import subprocess
import sys
import tempfile
from collections import Counter

LICENSES = "/usr/share/common-licenses"


def write_npy(path, data):
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % len(data)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%di" % len(data), *data))
    os.replace(tmp, path)


def read_npy(path):
    with open(path, "rb") as f:
        raw = f.read()
    hl = struct.unpack("<H", raw[8:10])[0]
    body = raw[10 + hl:]
    return list(struct.unpack("<%di" % (len(body) // 4), body))


def data(out):
    os.makedirs(out, exist_ok=True)
    train = b""
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.join(LICENSES, name)
        if name != "GPL-3" and os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                train += f.read()
    with open(os.path.join(LICENSES, "GPL-3"), "rb") as f:
        val = f.read()
    write_npy(os.path.join(out, "train.npy"), list(train))
    write_npy(os.path.join(out, "val.npy"), list(val))
    print(f"train.npy: {len(train)} bytes, val.npy: {len(val)} bytes")


def ngram(out, order, T):
    train, val = read_npy(os.path.join(out, "train.npy")), read_npy(os.path.join(out, "val.npy"))
    k = order - 1
    full, ctx = Counter(), Counter()
    for i in range(len(train)):
        c = tuple(train[max(0, i - k):i])
        full[c + (train[i],)] += 1
        ctx[c] += 1
    windows = min(64, (len(val) - 1) // T)
    total, n = 0.0, 0
    for w in range(windows):
        for j in range(1, T + 1):  # the targets of window w
            i = w * T + j
            c = tuple(val[max(0, i - k):i])
            total -= math.log((full[c + (val[i],)] + 1) / (ctx[c] + 256))
            n += 1
    print(f"{total / n:.6f}")


def depths(out, exe, weights, T):
    val = read_npy(os.path.join(out, "val.npy"))
    windows = min(64, (len(val) - 1) // T)
    hist, after_space, other = Counter(), [], []
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(windows):
            tokens = val[w * T:w * T + T]
            write_npy(os.path.join(tmp, "tokens.npy"), tokens)
            subprocess.run([exe, "--weights", weights, "--input", "tokens=" + os.path.join(tmp, "tokens.npy"),
                            "--output-dir", os.path.join(tmp, "out")], check=True, capture_output=True)
            steps = read_npy(os.path.join(tmp, "out", "steps.npy"))
            hist.update(steps)
            for i, s in enumerate(steps):
                (after_space if tokens[i] in (32, 10) else other).append(s)
    n = sum(hist.values())
    print("positions by halting depth: " + ", ".join(f"{k} steps: {hist[k]} ({100 * hist[k] / n:.1f}%)" for k in sorted(hist)))
    mean = lambda v: sum(v) / max(1, len(v))
    print(f"mean depth: {mean(after_space + other):.3f}; at a space or newline {mean(after_space):.3f}, "
          f"elsewhere {mean(other):.3f}")


if __name__ == "__main__":
    if sys.argv[1] == "data":
        data(sys.argv[2])
    elif sys.argv[1] == "depths":
        depths(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        ngram(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
