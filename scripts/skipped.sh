#!/usr/bin/env bash
# kiln: what a ctest run skipped, and why, so that a green ./test.sh says what it did not check.
# Reads ctest's console output (its "did not run" list; ./test.sh keeps it in build/ctest.out)
# and build/Testing/Temporary/LastTest.log (each test's output: its "SKIP: ..." line, or
# GTEST_SKIP's message).
set -uo pipefail
out="${1:-$(dirname "$0")/../build/ctest.out}"
log="${2:-$(dirname "$0")/../build/Testing/Temporary/LastTest.log}"
[ -f "$out" ] || exit 0
awk -v logfile="$log" '
  BEGIN {  # each test'"'"'s reason, from its output in LastTest.log
    while ((getline line < logfile) > 0) {
      if (line ~ /^[0-9]+\/[0-9]+ Testing: /) { split(line, f, " "); name = f[3]; want = 0; continue }
      if (name == "" || (name in why)) continue
      if (line ~ /^SKIP: /) { why[name] = substr(line, 7); continue }
      if (line ~ /: Skipped$/) { want = 1; continue }
      if (want) { why[name] = line; want = 0 }
    }
  }
  /^The following tests did not run:/ { listing = 1; next }
  listing && /^[ \t]+[0-9]+ - .* \((Skipped|Not Run|Disabled)\)$/ {
    s = $0; sub(/^[ \t]+[0-9]+ - /, "", s); sub(/ \((Skipped|Not Run|Disabled)\)$/, "", s)
    names[++n] = s; next
  }
  listing && !/^[ \t]/ { listing = 0 }
  END {
    if (n == 0) { print "Skipped: none."; exit }
    printf "Skipped: %d test(s), not checked by this run:\n", n
    for (i = 1; i <= n; ++i) printf "  %s: %s\n", names[i], ((names[i] in why) ? why[names[i]] : "(no reason printed)")
  }' "$out"
