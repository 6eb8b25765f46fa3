#!/usr/bin/env bash
# kiln: build everything and run the whole test suite (unit, IR lit tests, end to end) with ctest,
# then list what the run skipped and why (scripts/skipped.sh).
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
mkdir -p build
scripts/build.sh
cd build
set +e
ctest --output-on-failure -j2 "$@" 2>&1 | tee ctest.out
rc=${PIPESTATUS[0]}
set -e
../scripts/skipped.sh ctest.out Testing/Temporary/LastTest.log
exit "$rc"
