#!/bin/sh
# Mixed precision: the byte-level demo model (bench/train/run.sh's GPT-2) trained for STEPS steps
# in f32 and with --precision bf16, from the same seed, in one run. Writes OUT/f32.csv and
# OUT/bf16.csv, prints both runs' steps per second, their losses at a few steps and the mean
# of the last 20 steps' losses (with the relative difference), and with gnuplot draws both
# curves in OUT/precision.png. Not run by ./test.sh.
#
#   bench/train/precision.sh [OUT]   (default build/train-precision; STEPS=200 SEQ=128 LAYERS=4 D=128)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/train-precision}
STEPS=${STEPS:-200} SEQ=${SEQ:-128} LAYERS=${LAYERS:-4} D=${D:-128} EXTRA=${EXTRA:-}
mkdir -p "$OUT"
python3 "$ROOT/bench/train/bytes.py" data "$OUT"
for p in f32 bf16; do
  "$ROOT/build/bin/gpt2-compile" --train --layers "$LAYERS" --d-model "$D" --heads 4 --vocab 256 --ctx "$SEQ" \
    --train-lr 2e-3 --train-warmup 100 --train-decay-steps "$STEPS" --precision $p $EXTRA --quiet -o "$OUT/bytes-$p"
done
for p in f32 bf16; do
  "$OUT/bytes-$p" --train --data "$OUT/train.npy" --seq "$SEQ" --steps "$STEPS" --seed 1 --quiet --log "$OUT/$p.csv"
done
python3 - "$OUT" <<'PY'
import csv, sys
out = sys.argv[1]
runs = {p: list(csv.DictReader(open(f"{out}/{p}.csv"))) for p in ("f32", "bf16")}
def rate(r): h = len(r) // 2; return (len(r) - h) / (float(r[-1]["elapsed_s"]) - float(r[h - 1]["elapsed_s"]))
def tail(r): return sum(float(x["loss"]) for x in r[-20:]) / 20
for p, r in runs.items():
    marks = [r[i]["loss"] for i in (0, len(r) // 4, len(r) // 2, len(r) - 1)]
    print(f"{p:5s} {rate(r):6.2f} steps/s   loss at steps 1, {len(r)//4 + 1}, {len(r)//2 + 1}, {len(r)}: {', '.join(marks)}   last 20 steps' mean {tail(r):.4f}")
f, b = tail(runs["f32"]), tail(runs["bf16"])
print(f"bf16 / f32: speed {rate(runs['bf16']) / rate(runs['f32']):.2f}x, last 20 steps' loss {100 * (b - f) / f:+.2f}%")
PY
if command -v gnuplot > /dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,540
set output "$OUT/precision.png"
set datafile separator ","
set xlabel "step"; set ylabel "training loss (nats per byte)"; set key top right
plot "$OUT/f32.csv" every ::1 using 1:2 with lines lw 2 title "f32", \
     "$OUT/bf16.csv" every ::1 using 1:2 with lines lw 2 dt 2 title "bf16 (--precision bf16)"
GP
  echo "wrote $OUT/precision.png"
else
  echo "no gnuplot (apt-get install gnuplot-nox): no precision.png"
fi
