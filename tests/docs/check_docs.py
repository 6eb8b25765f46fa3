#!/usr/bin/env python3
"""The fenced blocks of README.md and docs/*.md, checked so that the documentation cannot rot.

Every fenced block carries a mark on the line before it (blank lines between are allowed):

    <!-- doc: run -->            shell commands: run with bash (-e, -o pipefail) in a scratch
                                 folder per document (its blocks in order, so a later block sees
                                 what an earlier one made), build/bin first on PATH; each must
                                 succeed
    <!-- doc: mlir -->           a kiln module: parsed and verified by kiln-opt
    <!-- doc: dsl-program -->    a whole DSL program (the build compiles README.md's first one,
                                 --extract-first-model, and ctest runs it: docs/first-model)
    <!-- doc: fragment -->       a piece of a program or of a build file
    <!-- doc: output -->         what a command prints, or a layout
    <!-- doc: skip: REASON -->    commands that are not run here, and why (a GPU, a peer
                                 environment, a checkpoint, minutes)

A block without a mark, an unknown mark, or a run or mlir block that fails is an error.

    check_docs.py --root SRC --bin BUILD/bin --work DIR [--cache DIR]
    check_docs.py --extract-first-model README.md OUT.cpp
"""
import argparse
import os
import re
import subprocess
import sys

MARK = re.compile(r"<!--\s*doc:\s*(run|mlir|dsl-program|fragment|output|skip:.*?)\s*-->")


def documents(root):
    docs = [os.path.join(root, "README.md")]
    d = os.path.join(root, "docs")
    docs += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".md"))
    return docs


def blocks(path):
    """(line, kind, text) for every fenced block; kind None when it has no mark."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start = i
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j == len(lines):
                out.append((start + 1, "unclosed", ""))
                break
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = MARK.search(lines[k]) if k >= 0 else None
            kind = m.group(1) if m else None
            out.append((start + 1, kind, "\n".join(lines[start + 1:j])))
            i = j + 1
        else:
            i += 1
    return out


def extract_first_model(readme, out):
    for line, kind, text in blocks(readme):
        if kind == "dsl-program":
            os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
            with open(out + ".tmp", "w", encoding="utf-8") as f:
                f.write("// generated from README.md's first model (tests/docs/check_docs.py)\n" + text + "\n")
            os.replace(out + ".tmp", out)
            return 0
    print(f"{readme}: no block marked dsl-program", file=sys.stderr)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root")
    ap.add_argument("--bin")
    ap.add_argument("--work")
    ap.add_argument("--cache")
    ap.add_argument("--extract-first-model", nargs=2, metavar=("README", "OUT"))
    a = ap.parse_args()
    if a.extract_first_model:
        return extract_first_model(*a.extract_first_model)
    env = dict(os.environ)
    a.bin = os.path.abspath(a.bin)
    env["PATH"] = a.bin + os.pathsep + env.get("PATH", "")
    if a.cache:
        env["KILN_CACHE_DIR"] = a.cache
    errors, counts = [], {}
    for doc in documents(a.root):
        rel = os.path.relpath(doc, a.root)
        work = os.path.join(a.work, re.sub(r"[^A-Za-z0-9]+", "_", rel))
        os.makedirs(work, exist_ok=True)
        for line, kind, text in blocks(doc):
            where = f"{rel}:{line}"
            key = "skip" if kind and kind.startswith("skip:") else kind
            counts[key] = counts.get(key, 0) + 1
            if kind is None:
                errors.append(f"{where}: a block without a mark (<!-- doc: run|mlir|dsl-program|fragment|output|skip: why -->)")
            elif kind == "unclosed":
                errors.append(f"{where}: a block that is never closed")
            elif kind == "run":
                r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
                print(f"{where}: run, exit {r.returncode}")
                if r.returncode != 0:
                    errors.append(f"{where}: the commands failed (exit {r.returncode}):\n{text}\n--- output ---\n{r.stdout[-4000:]}")
            elif kind == "mlir":
                path = os.path.join(work, f"block_{line}.mlir")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text + "\n")
                r = subprocess.run([os.path.join(a.bin, "kiln-opt"), path, "-o", os.devnull], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                print(f"{where}: mlir, exit {r.returncode}")
                if r.returncode != 0:
                    errors.append(f"{where}: kiln-opt rejects the module:\n{r.stdout[-4000:]}")
    print("blocks: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: str(kv[0]))))
    for e in errors:
        print("error: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
