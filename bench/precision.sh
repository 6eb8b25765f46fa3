#!/bin/sh
# Mixed-precision inference: GPT-2 small (examples/gpt2's defaults) compiled with --precision f32
# and --precision bf16, the same random weights (written once by the f32 executable as an F32
# checkpoint; the bf16 executable rounds them once at load, and saves them again as a BF16
# checkpoint, which it then loads as stored), in one run, alternating. Prints per precision and
# checkpoint: the checkpoint's bytes, load time and peak RSS, the forward at L = LEN (median of
# REPEAT), and --generate's prompt and decode rates (prompt PROMPT tokens, NEW new ones), and the
# largest logit difference between the two precisions' forwards. Not run by ./test.sh.
#
#   bench/precision.sh [OUT]   (default build/precision; LEN=512 REPEAT=10 PROMPT=128 NEW=64 ROUNDS=3 THREADS=2)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build/precision}
LEN=${LEN:-512} REPEAT=${REPEAT:-10} PROMPT=${PROMPT:-128} NEW=${NEW:-64} ROUNDS=${ROUNDS:-3} THREADS=${THREADS:-2}
mkdir -p "$OUT"
for p in f32 bf16; do
  [ -x "$OUT/gpt2-$p" ] || "$ROOT/build/bin/gpt2-compile" --precision $p --quiet --cache-dir "$ROOT/build/kernel-cache" -o "$OUT/gpt2-$p"
done
ids() { python3 -c "import sys; n=int(sys.argv[1]); print(','.join(str((i * 7919 + 13) % 50257) for i in range(n)))" "$1"; }
FWD=$(ids "$LEN") GEN=$(ids "$PROMPT")
[ -f "$OUT/f32.safetensors" ] || "$OUT/gpt2-f32" --random-weights --seed 1 --tokens 1 --quiet --save-weights "$OUT/f32.safetensors" > /dev/null
[ -f "$OUT/bf16.safetensors" ] || "$OUT/gpt2-bf16" --weights "$OUT/f32.safetensors" --tokens 1 --quiet --save-weights "$OUT/bf16.safetensors" > /dev/null
: > "$OUT/runs.txt"
for round in $(seq "$ROUNDS"); do
  for run in "f32 f32" "bf16 f32" "bf16 bf16"; do
    set -- $run
    exe="$OUT/gpt2-$1" w="$OUT/$2.safetensors" tag="$1 model, $2 checkpoint"
    fwd=$("$exe" --weights "$w" --threads "$THREADS" --tokens "$FWD" --repeat "$REPEAT" --output-dir "$OUT/out-$1" 2>&1)
    gen=$("$exe" --weights "$w" --threads "$THREADS" --tokens "$GEN" --generate "$NEW" 2>&1)
    ms=$(echo "$fwd" | sed -n 's/^median time over [0-9]* runs: \([0-9.]*\) ms.*/\1/p')
    load=$(echo "$fwd" | sed -n 's/^weights loaded in \([0-9.]*\) ms; peak RSS \([0-9.]* MiB\).*/\1 ms, RSS \2/p')
    rates=$(echo "$gen" | sed -n 's/^prompt: .* (\([0-9.]*\) tok\/s); generated: .* (\([0-9.]*\) ms\/token.*/prompt \1 tok\/s, decode \2 ms\/token/p')
    echo "$tag|$(stat -c %s "$w")|$load|$ms|$rates" >> "$OUT/runs.txt"
  done
done
python3 - "$OUT" "$LEN" <<'PY'
import statistics, struct, sys
out, L = sys.argv[1], int(sys.argv[2])
rows = {}
for line in open(f"{out}/runs.txt"):
    tag, size, load, ms, rates = line.rstrip("\n").split("|")
    r = rows.setdefault(tag, {"size": int(size), "load": load, "ms": [], "rates": []})
    r["ms"].append(float(ms)); r["rates"].append(rates)
print(f"GPT-2 small, forward at L = {L} (median of each round's median), then --generate")
for tag, r in rows.items():
    print(f"  {tag:28s} checkpoint {r['size'] / 2**20:7.1f} MiB, load {r['load']}; forward {statistics.median(r['ms']):8.1f} ms "
          f"(rounds {', '.join(f'{m:.1f}' for m in r['ms'])}); {r['rates'][-1]}")
def npy(p):
    b = open(p, "rb").read(); h = struct.unpack("<H", b[8:10])[0]
    return struct.unpack(f"<{(len(b) - 10 - h) // 4}f", b[10 + h:])
a, b = npy(f"{out}/out-f32/logits.npy"), npy(f"{out}/out-bf16/logits.npy")
print(f"  logits: bf16 - f32 max |diff| {max(abs(x - y) for x, y in zip(a, b)):.4f}, max |f32 logit| {max(abs(x) for x in a):.3f}")
PY
