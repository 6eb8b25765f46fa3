#!/bin/sh
# ctest bench/kiln-gpu-bench-opencl-quick: the GPU bench program, run with --quick on an OpenCL
# device (PoCL's CPU device here): every case must run and print its CSV row. Its timings are the
# CPU's and mean nothing for a GPU. A visible skip (77) where there is no OpenCL device.
out=$("$1" --quick 2>&1)
rc=$?
echo "$out"
if echo "$out" | grep -q "no OpenCL platform or device"; then echo "SKIP: no OpenCL device"; exit 77; fi
[ $rc = 0 ] || exit $rc
rows=$(echo "$out" | grep -c -E '^(linear|attention|gpt2)_')
[ "$rows" = 9 ] || { echo "expected 9 CSV rows, got $rows"; exit 1; }
