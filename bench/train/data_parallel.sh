#!/bin/sh
# Data parallel training speed: the byte-level demo model (bench/train/run.sh's, compiled with a
# batch) trained for STEPS steps of a global batch of B windows, by one process (all cores) and
# by `mpirun -np 2` (half the cores each), in one run. Prints steps per second of both, and the
# largest difference of their losses. Not run by ./test.sh.
#
#   bench/train/data_parallel.sh [OUT]   (default build/train-dp; B=8 SEQ=128 LAYERS=4 D=128 STEPS=40)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/train-dp}
B=${B:-8} SEQ=${SEQ:-128} LAYERS=${LAYERS:-4} D=${D:-128} STEPS=${STEPS:-40}
CORES=$(nproc)
mkdir -p "$OUT"
python3 "$ROOT/bench/train/bytes.py" data "$OUT"
"$ROOT/build/bin/gpt2-compile" --train --batch "$B" --layers "$LAYERS" --d-model "$D" --heads 4 --vocab 256 --ctx "$SEQ" \
  --train-lr 2e-3 --train-warmup 100 --quiet -o "$OUT/bytes-gpt"
ARGS="--train --data $OUT/train.npy --seq $SEQ --batch $B --steps $STEPS --seed 1 --quiet"
"$OUT/bytes-gpt" $ARGS --threads "$CORES" --log "$OUT/one.csv"
mpirun --allow-run-as-root --oversubscribe --mca btl self,vader --mca btl_vader_single_copy_mechanism none -np 2 \
  "$OUT/bytes-gpt" $ARGS --threads $(( CORES / 2 > 0 ? CORES / 2 : 1 )) --log "$OUT/two.csv"
python3 - "$OUT" "$STEPS" <<'PY'
import csv, sys
out, steps = sys.argv[1], int(sys.argv[2])
def rows(p): return list(csv.DictReader(open(p)))
one, two = rows(out + "/one.csv"), rows(out + "/two.csv")
# steps per second over the second half (the first steps fault the arena in)
def rate(r): h = len(r) // 2; return (len(r) - h) / (float(r[-1]["elapsed_s"]) - float(r[h - 1]["elapsed_s"]))
worst = max(abs(float(a["loss"]) - float(b["loss"])) / abs(float(a["loss"])) for a, b in zip(one, two))
print(f"1 process: {rate(one):.2f} steps/s   2 ranks: {rate(two):.2f} steps/s   ratio {rate(two) / rate(one):.2f}")
print(f"losses over {steps} steps: largest relative difference {worst:.2e}")
PY
