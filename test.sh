#!/usr/bin/env bash
# kiln: build everything and run the whole test suite (unit, IR lit tests, end to end) with ctest.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
mkdir -p build
scripts/build.sh
cd build
ctest --output-on-failure -j2 "$@"
