#!/usr/bin/env bash
# kiln: configure (once) and build into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >build/cmake-configure.log 2>&1 || {
    mkdir -p build; cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release; exit 1; }
fi
ninja -C build "$@"
