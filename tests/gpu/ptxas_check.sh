#!/bin/bash
# The CUDA checks that need no GPU (a ctest): every example compiled with --target=cuda, each
# kernel's PTX (extracted from its object into the dump folder) accepted by `ptxas -arch=sm_90`,
# kernels without PTX (they run on the host) listed, and every CUDA executable run here, where
# there is no driver, failing with the clear error and exit code 1.
#
#   tests/gpu/ptxas_check.sh BIN_DIR CACHE_DIR WORK_DIR
# Exit 77 (a visible ctest skip) when no ptxas is installed.
set -uo pipefail
bin=$1 cache=$2 work=$3
ptxas=$(command -v ptxas || true)
[ -z "$ptxas" ] && [ -x /usr/local/cuda/bin/ptxas ] && ptxas=/usr/local/cuda/bin/ptxas
if [ -z "$ptxas" ]; then
  echo "SKIP: no ptxas (the CUDA toolkit) on this machine: the PTX of the CUDA kernels is not checked"
  exit 77
fi
have_driver=0
ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && have_driver=1
fail=0 count=0
check() {  # NAME COMPILE-ARGS...
  local name=$1
  shift
  count=$((count + 1))
  local dir=$work/$count-$name
  rm -rf "$dir" && mkdir -p "$dir"
  if ! "$bin/$name-compile" "$@" --target=cuda --quiet --cache-dir "$cache" --dump-dir "$dir/dump" -o "$dir/model" >"$dir/compile.log" 2>&1; then
    echo "FAIL $name: compile for --target=cuda"; cat "$dir/compile.log"; fail=1; return
  fi
  local n=0 host=""
  for k in "$dir"/dump/*.schedule.txt; do
    local kernel
    kernel=$(basename "$k" .schedule.txt)
    [[ $kernel == kilnrt_* ]] && { host="$host $kernel"; continue; }
    if [ ! -s "$dir/dump/$kernel.ptx" ]; then host="$host $kernel"; continue; fi
    if ! "$ptxas" -arch=sm_90 "$dir/dump/$kernel.ptx" -o "$dir/$kernel.cubin" >"$dir/$kernel.ptxas.log" 2>&1; then
      echo "FAIL $name: ptxas -arch=sm_90 rejected $kernel"; cat "$dir/$kernel.ptxas.log"; fail=1
    fi
    n=$((n + 1))
  done
  echo "$name: $n kernels' PTX accepted by ptxas -arch=sm_90; on the host:${host:- none}"
  if [ $have_driver = 0 ]; then
    local out rc
    out=$("$dir/model" --random-weights 2>&1)
    rc=$?
    if [ $rc != 1 ] || ! grep -q "no CUDA driver or device" <<<"$out"; then
      echo "FAIL $name: expected 'no CUDA driver or device' and exit 1 without a driver, got exit $rc: $out"; fail=1
    fi
  fi
}
check gpt2 --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32
check bert --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32
check bert --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --pool mean --normalize --batch 2
check transformer --layers 1 --d-model 64 --heads 4 --d-ff 128 --src-vocab 50 --tgt-vocab 60 --ctx 32
check sparse --layers 2 --d-model 64 --heads 4 --vocab 64 --ctx 256 --stride 32
check reformer --layers 1 --d-model 64 --heads 2 --vocab 64 --ctx 256 --buckets 8 --chunk 32
check universal --d-model 64 --heads 4 --vocab 64 --ctx 32 --max-steps 3
check universal --d-model 64 --heads 4 --vocab 64 --ctx 32 --max-steps 3 --transition sepconv
check reformer --layers 1 --d-model 64 --heads 2 --vocab 64 --ctx 256 --buckets 8 --chunk 32 --gpu-buffers=device
check universal --d-model 64 --heads 4 --vocab 64 --ctx 32 --max-steps 3 --gpu-buffers=device
[ $have_driver = 1 ] && echo "note: a CUDA driver is installed here: the no-driver error was not checked"
exit $fail
