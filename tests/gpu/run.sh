#!/bin/bash
# The GPU checks, in two halves: what needs the compiler runs here, what needs a GPU runs on the
# lent machine, which has only the driver and libc (no compiler packages, no network).
#
#   tests/gpu/run.sh prepare [BUNDLE]   # here, after scripts/build.sh: BUNDLE (default
#                                        # build/gpu-bundle) gets each example compiled for the
#                                        # CPU and for --target=cuda, shared weights, the CPU
#                                        # outputs and kiln-npy-compare (a few MB in all)
#   tests/gpu/run.sh device [BUNDLE] [PARTS]
#                                        # on the GPU machine: runs every CUDA executable with the
#                                        # same weights and inputs, compares with the CPU outputs
#                                        # and, for the end-to-end cases, with the test's reference
#                                        # (plain loops or PyTorch) where it had one;
#                                        # PARTS (default examples,e2e,bench): the examples, the
#                                        # end-to-end test models' recorded cases (KILN_GPU_JOBS at
#                                        # a time, default the cores up to 8), kiln-gpu-bench
#
# KILN_GPU_API=opencl compiles for --target=opencl instead (no bench): the same GPU schedules on
# any OpenCL device. ctest gpu/opencl-examples runs both halves here, on PoCL's CPU device.
# The comparison is the shared one with tolerance 2e-4 (reordered f32 sums on the GPU). Exit 0
# when every output of every model matches. KILN_GPU_DRY_RUN=1 runs the device half with the
# CPU executables (the examples' only; the end-to-end cases are counted, not run), to check the
# script itself: it never reports a match then.
set -uo pipefail
mode=${1:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${2:-$root/build/gpu-bundle}
api=${KILN_GPU_API:-cuda}
tol=2e-4

# name (or label@name: another configuration of example `name`) | compile args | run args (inputs
# given as token lists: no input files)
models=(
  "gpt2|--layers 2 --d-model 128 --heads 4 --vocab 256 --ctx 128|--tokens 5,17,3,99,42,7,1,250"
  "bert|--layers 2 --d-model 64 --heads 4 --vocab 512 --ctx 128|--tokens 101,7,300,12,102"
  "bert_pooled@bert|--layers 2 --d-model 64 --heads 4 --vocab 512 --ctx 128 --pool mean --normalize|--tokens 101,7,300,12,102"
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
    local comp=${name#*@}  # LABEL@COMPILER: a second configuration of an example
    name=${name%@*}
    local dir=$bundle/$name
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    "$bin/$comp-compile" $cargs --quiet -o "$dir/cpu" || exit 1
    # shellcheck disable=SC2086
    "$bin/$comp-compile" $cargs --quiet --target=$api -o "$dir/$api" || exit 1
    # shellcheck disable=SC2086
    "$bin/$comp-compile" $cargs --quiet --target=$api --gpu-buffers=device -o "$dir/$api-resident" || exit 1
    # shellcheck disable=SC2086
    "$dir/cpu" --random-weights --seed 3 --save-weights "$dir/w.safetensors" $rargs --output-dir "$dir/want" >/dev/null || exit 1
    echo "$rargs" >"$dir/args"
    echo "prepared $name ($(ls "$dir/want" | wc -l) outputs)"
  done
  # Packed like the end-to-end models below: the executables share their runtime, so the
  # examples' 18 (about 50 MB) pack into a few MB.
  local names=()
  for m in "${models[@]}"; do
    m=${m%%|*}
    names+=("${m%@*}")
  done
  strip "${names[@]/#/$bundle/}"/{cpu,$api,$api-resident} 2>/dev/null
  tar -C "$bundle" -cf - "${names[@]}" | xz -9 -T2 --lzma2=preset=9,dict=64MiB >"$bundle/examples.tar.xz" || exit 1
  (cd "$bundle" && rm -rf "${names[@]}")
  # The end-to-end test models: the suite runs here on the CPU; every model it compiles is also
  # compiled for the GPU, and every run with outputs becomes a case (tests/support/harness.h).
  # Random weights are regenerated from their seed there, so no weights travel.
  local work=$bundle.work
  rm -rf "$work" && mkdir -p "$work"
  if ! KILN_TEST_GPU_BUNDLE="$work/e2e" KILN_TEST_GPU_BUNDLE_API=$api KILN_TEST_WORK_DIR="$work/tests" \
      "$bin/kiln_e2e_tests" --gtest_brief=1 >"$work/e2e.log" 2>&1; then
    tail -30 "$work/e2e.log"; echo "the end-to-end tests failed on the CPU"; exit 1
  fi
  strip "$work"/e2e/models/* 2>/dev/null
  # xz with a dictionary spanning the whole archive: the models share their runtime, so 70
  # executables (about 60 MB) pack into a few MB and the bundle fits what a GPU machine carries.
  tar -C "$work" -cf - e2e | xz -9 -T2 --lzma2=preset=9,dict=64MiB >"$bundle/e2e.tar.xz" || exit 1
  echo "prepared $(ls "$work/e2e/cases" | wc -l) end-to-end cases of $(ls "$work/e2e/models" | wc -l) models"
  rm -rf "$work"
  echo "bundle: $bundle ($(du -sh "$bundle" | cut -f1))"
}

# One end-to-end case (a folder of the unpacked bundle): runs its model, compares each output
# with kiln's CPU output and with the test's reference where it had one, and writes the failures
# (none: an empty file) to the case's `verdict`.
run_case() {
  local c=$1 exe out=""
  exe=$(cat "$c/model")
  rm -f "$c/verdict"
  # shellcheck disable=SC2046
  if ! (cd "$c" && $limit "./$exe" $(cat args) --output-dir got >run.log 2>&1); then
    printf 'FAIL e2e case %s (%s %s):\n%s\n' "$(basename "$c")" "$exe" "$(cat "$c/args")" "$(tail -5 "$c/run.log")" >"$c/verdict"
    return
  fi
  # Against kiln's CPU outputs, and against the reference the test checked them with (the
  # plain-loop reference or PyTorch's outputs), where it had one.
  local want
  for want in "$c"/want/*.npy "$c"/ref/*.npy; do
    [ -f "$want" ] || continue
    "$bundle/kiln-npy-compare" "$want" "$c/got/$(basename "$want")" $tol >"$c/compare.log" 2>&1 ||
      out+="FAIL e2e case $(basename "$c") ($exe $(cat "$c/args")) against $(basename "$(dirname "$want")")/$(basename "$want"):"$'\n'"$(cat "$c/compare.log")"$'\n'
  done
  printf '%s' "$out" >"$c/verdict"
}

device() {
  [ -d "$bundle" ] || { echo "no bundle at $bundle: run '$0 prepare' on the build machine"; exit 1; }
  local fail=0 api parts=",${3:-examples,e2e,bench},"
  api=$(cat "$bundle/api")
  if [ -f "$bundle/examples.tar.xz" ]; then
    command -v xz >/dev/null || { echo "no xz here to unpack the bundle's examples.tar.xz"; exit 1; }
    xz -dc "$bundle/examples.tar.xz" | tar -C "$bundle" -xf - || { echo "could not unpack examples.tar.xz"; exit 1; }
  fi
  local limit=""
  # a hung kernel fails its case, not the whole run (KILN_GPU_CASE_LIMIT seconds per executable)
  command -v timeout >/dev/null && limit="timeout ${KILN_GPU_CASE_LIMIT:-300}"
  [[ $parts == *,examples,* ]] && for m in "${models[@]}"; do
    IFS='|' read -r name _ _ <<<"$m"
    name=${name%@*}
    for variant in "$api" "$api-resident"; do  # buffers copied per kernel call; buffers kept on the device
      local dir=$bundle/$name exe=$bundle/$name/$variant
      [ -n "${KILN_GPU_DRY_RUN:-}" ] && exe=$bundle/$name/cpu  # checks this script without a GPU
      rm -rf "$dir/got"
      local t0 t1
      t0=$(date +%s.%N)
      # shellcheck disable=SC2046
      if ! $limit "$exe" --weights "$dir/w.safetensors" $(cat "$dir/args") --output-dir "$dir/got" >"$dir/run.log" 2>&1; then
        if [ "$api" = opencl ] && grep -q "no OpenCL platform or device" "$dir/run.log"; then
          echo "SKIP: $(cat "$dir/run.log")"; exit 77  # ctest: a visible skip where there is no OpenCL
        fi
        echo "FAIL $name ($variant): the executable failed:"; cat "$dir/run.log"; fail=1; continue
      fi
      t1=$(date +%s.%N)
      for want in "$dir"/want/*.npy; do
        "$bundle/kiln-npy-compare" "$want" "$dir/got/$(basename "$want")" $tol || fail=1
      done
      echo "$name ($variant${KILN_GPU_DRY_RUN:+: dry run, the CPU executable}): ran in $(echo "$t1 - $t0" | bc 2>/dev/null || echo "?") s (process, first call included)"
    done
  done
  if [[ $parts != *,e2e,* ]]; then
    :
  elif [ -f "$bundle/e2e.tar.xz" ] && ! command -v xz >/dev/null; then
    echo "SKIPPED: the end-to-end test models (no xz here to unpack e2e.tar.xz)"
  elif [ -f "$bundle/e2e.tar.xz" ]; then  # the end-to-end test models' cases
    rm -rf "$bundle/e2e" && { xz -dc "$bundle/e2e.tar.xz" | tar -C "$bundle" -xf -; } || fail=1
    local n=0 bad=0 refs=0 c jobs
    jobs=${KILN_GPU_JOBS:-$(nproc 2>/dev/null || echo 1)}
    [ "$jobs" -gt 8 ] && jobs=8
    for c in "$bundle"/e2e/cases/*/; do
      [ -d "$c/ref" ] && refs=$((refs + 1))
      n=$((n + 1))
    done
    # The cases run $jobs at a time (one GPU, several processes); each writes its verdict to
    # its own folder, read back below in the cases' order.
    if [ -z "${KILN_GPU_DRY_RUN:-}" ]; then
      export bundle tol limit
      export -f run_case
      printf '%s\n' "$bundle"/e2e/cases/*/ | xargs -P "$jobs" -I{} bash -c 'run_case "$1"' _ {}
      for c in "$bundle"/e2e/cases/*/; do
        [ -f "$c/verdict" ] || { echo "FAIL e2e case $(basename "$c"): no verdict (the case did not finish)"; bad=$((bad + 1)); continue; }
        [ -s "$c/verdict" ] && { cat "$c/verdict"; bad=$((bad + $(grep -c '^FAIL' "$c/verdict"))); }
      done
    fi
    echo "end-to-end models: $n cases ($refs with the test's reference as well as the CPU outputs), $bad failing ($SECONDS s since the start)"
    [ $bad = 0 ] || fail=1
  fi
  if [ -n "${KILN_GPU_DRY_RUN:-}" ]; then  # the CPU executables ran: nothing was compared on a GPU
    [ $fail = 0 ] && echo "dry run: the script ran with the CPU executables in place of the GPU ones (no case compared on a GPU)" ||
      echo "dry run FAILED: the CPU executables did not reproduce their own outputs"
  else
    [ $fail = 0 ] && echo "all models match the CPU outputs and the references" || echo "SOME MODELS DIFFER"
  fi
  if [[ $parts == *,bench,* ]] && [ -z "${KILN_GPU_DRY_RUN:-}" ] && [ -x "$bundle/kiln-gpu-bench" ]; then
    echo "kiln-gpu-bench:"
    "$bundle/kiln-gpu-bench" || fail=1
  fi
  exit $fail
}

case "$mode" in
  prepare) prepare ;;
  device) device "$@" ;;
  *) sed -n '2,23p' "$0"; exit 2 ;;
esac
