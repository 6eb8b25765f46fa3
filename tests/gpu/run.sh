#!/bin/bash
# The GPU checks, in two halves: what needs the compiler runs here, what needs a GPU runs on the
# lent machine, which has only the driver and libc (no compiler packages, no network).
#
#   tests/gpu/run.sh prepare [BUNDLE]   # here, after scripts/build.sh: BUNDLE (default
#                                        # build/gpu-bundle) gets each example compiled for the
#                                        # CPU and for --target=cuda, shared weights, the CPU
#                                        # outputs and kiln-npy-compare (a few MB in all)
#   tests/gpu/run.sh device [BUNDLE]    # on the GPU machine: runs every CUDA executable with the
#                                        # same weights and inputs, compares with the CPU outputs
#
# KILN_GPU_API=opencl compiles for --target=opencl instead (no bench): the same GPU schedules on
# any OpenCL device. ctest gpu/opencl-examples runs both halves here, on PoCL's CPU device.
# The comparison is the shared one with tolerance 2e-4 (reordered f32 sums on the GPU). Exit 0
# when every output of every model matches.
set -uo pipefail
mode=${1:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${2:-$root/build/gpu-bundle}
api=${KILN_GPU_API:-cuda}
tol=2e-4

# name | compile args | run args (inputs given as token lists: no input files)
models=(
  "gpt2|--layers 2 --d-model 128 --heads 4 --vocab 256 --ctx 128|--tokens 5,17,3,99,42,7,1,250"
  "bert|--layers 2 --d-model 64 --heads 4 --vocab 512 --ctx 128|--tokens 101,7,300,12,102"
  "transformer|--layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 300 --tgt-vocab 310 --ctx 64|--tokens src_tokens=4,8,15,16,23,42 --tokens tgt_tokens=1,2,3"
  "sparse|--layers 2 --d-model 64 --heads 4 --vocab 256 --ctx 512 --stride 32|--tokens 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40"
  "reformer|--layers 2 --d-model 64 --heads 2 --vocab 256 --ctx 1024 --buckets 8 --chunk 32|--tokens 9,8,7,6,5,4,3,2,1,0,11,12,13,14,15,16,17,18,19,20"
  "universal|--d-model 64 --heads 4 --vocab 256 --ctx 128 --max-steps 6|--tokens 3,1,4,1,5,9,2,6,5,3,5"
)

prepare() {
  local bin=$root/build/bin
  [ -x "$bin/gpt2-compile" ] && [ -x "$bin/kiln-npy-compare" ] || { echo "run scripts/build.sh first"; exit 1; }
  rm -rf "$bundle" && mkdir -p "$bundle"
  cp "$bin/kiln-npy-compare" "$bundle/"
  echo "$api" >"$bundle/api"
  if [ "$api" = cuda ]; then
    cmake --build "$root/build" --target kiln-gpu-bench >"$bundle/gpu-bench-build.log" 2>&1 ||
      { cat "$bundle/gpu-bench-build.log"; exit 1; }
    cp "$bin/kiln-gpu-bench" "$bundle/"
  fi
  for m in "${models[@]}"; do
    IFS='|' read -r name cargs rargs <<<"$m"
    local dir=$bundle/$name
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$bin/$name-compile" $cargs --quiet -o "$dir/cpu" || exit 1
    # shellcheck disable=SC2086
    "$bin/$name-compile" $cargs --quiet --target=$api -o "$dir/$api" || exit 1
    # shellcheck disable=SC2086
    "$bin/$name-compile" $cargs --quiet --target=$api --gpu-buffers=device -o "$dir/$api-resident" || exit 1
    # shellcheck disable=SC2086
    "$dir/cpu" --random-weights --seed 3 --save-weights "$dir/w.safetensors" $rargs --output-dir "$dir/want" >/dev/null || exit 1
    echo "$rargs" >"$dir/args"
    echo "prepared $name ($(ls "$dir/want" | wc -l) outputs)"
  done
  echo "bundle: $bundle ($(du -sh "$bundle" | cut -f1))"
}

device() {
  [ -d "$bundle" ] || { echo "no bundle at $bundle: run '$0 prepare' on the build machine"; exit 1; }
  local fail=0 api
  api=$(cat "$bundle/api")
  for m in "${models[@]}"; do
    IFS='|' read -r name _ _ <<<"$m"
    for variant in "$api" "$api-resident"; do  # buffers copied per kernel call; buffers kept on the device
      local dir=$bundle/$name exe=$bundle/$name/$variant
      [ -n "${KILN_GPU_DRY_RUN:-}" ] && exe=$bundle/$name/cpu  # checks this script without a GPU
      rm -rf "$dir/got"
      local t0 t1
      t0=$(date +%s.%N)
      # shellcheck disable=SC2046
      if ! "$exe" --weights "$dir/w.safetensors" $(cat "$dir/args") --output-dir "$dir/got" >"$dir/run.log" 2>&1; then
        if [ "$api" = opencl ] && grep -q "no OpenCL platform or device" "$dir/run.log"; then
          echo "SKIP: $(cat "$dir/run.log")"; exit 77  # ctest: a visible skip where there is no OpenCL
        fi
        echo "FAIL $name ($variant): the executable failed:"; cat "$dir/run.log"; fail=1; continue
      fi
      t1=$(date +%s.%N)
      for want in "$dir"/want/*.npy; do
        "$bundle/kiln-npy-compare" "$want" "$dir/got/$(basename "$want")" $tol || fail=1
      done
      echo "$name ($variant): ran in $(echo "$t1 - $t0" | bc 2>/dev/null || echo "?") s (process, first call included)"
    done
  done
  [ $fail = 0 ] && echo "all models match the CPU outputs" || echo "SOME MODELS DIFFER"
  if [ "${3:-}" != nobench ] && [ -z "${KILN_GPU_DRY_RUN:-}" ] && [ -x "$bundle/kiln-gpu-bench" ]; then
    echo "kiln-gpu-bench:"
    "$bundle/kiln-gpu-bench" || fail=1
  fi
  exit $fail
}

case "$mode" in
  prepare) prepare ;;
  device) device "$@" ;;
  *) sed -n '2,14p' "$0"; exit 2 ;;
esac
