#!/usr/bin/env bash
# kiln demo: compile examples/gpt2 (small) from the DSL to a standalone executable and run it.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
mkdir -p build
scripts/build.sh gpt2-compile kilnrt kilnrt_main
DUMP=build/demo-dump
rm -rf "$DUMP"
build/bin/gpt2-compile --layers 2 --d-model 128 --heads 4 --vocab 256 --ctx 128 \
  -o build/bin/gpt2 --dump-dir "$DUMP"
echo
echo "== running build/bin/gpt2 on 8 tokens with random weights"
build/bin/gpt2 --random-weights --seed 1 --tokens 17,4,99,3,250,8,61,42 --output-dir build/demo-out
echo
echo "== artefacts"
echo "per-pass IR : $DUMP/NN-<pass>.mlir ($(ls "$DUMP"/*.mlir | wc -l) files)"
echo "schedules   : $DUMP/<kernel>.schedule.txt ($(ls "$DUMP"/*.schedule.txt | wc -l) kernels), lowered Halide: $DUMP/<kernel>.stmt"
echo "cost report : $DUMP/cost.txt"
echo "outputs     : build/demo-out/logits.npy"
echo "executable  : build/bin/gpt2 (ldd: $(ldd build/bin/gpt2 | awk '{print $1}' | tr '\n' ' '))"
