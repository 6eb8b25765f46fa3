#!/bin/sh
# The byte-level training demo: a small GPT-2 (examples/gpt2 --train, vocabulary 256) trained by
# the compiled executable on /usr/share/common-licenses/ (all but GPL-3), validated on GPL-3,
# against byte n-gram models with add-one smoothing on the same split. Writes OUT/log.csv,
# OUT/ngram.txt and, with gnuplot or matplotlib, OUT/curve.png. Not run by ./test.sh.
#
#   bench/train/run.sh [OUT]     (default build/train-demo; STEPS=8000 SEQ=128 LAYERS=4 D=128: about 4 minutes on 2 cores)
#   EXTRA='--train-aux-layers --train-ahead 2' bench/train/run.sh OUT   (more gpt2-compile flags: the auxiliary losses)
#   MODEL=universal bench/train/run.sh OUT   (a causal Universal Transformer with ACT, D 64, MAX_STEPS 6, at a
#                                            constant learning rate; then its positions' halting depths)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/build/train-demo}
STEPS=${STEPS:-8000} SEQ=${SEQ:-128} LAYERS=${LAYERS:-4} D=${D:-128} EXTRA=${EXTRA:-} MODEL=${MODEL:-gpt2}
mkdir -p "$OUT"
python3 "$ROOT/bench/train/bytes.py" data "$OUT"
: > "$OUT/ngram.txt"
for order in 1 2 3; do
  echo "order $order: $(python3 "$ROOT/bench/train/bytes.py" ngram "$OUT" $order "$SEQ") nats" >> "$OUT/ngram.txt"
done
cat "$OUT/ngram.txt"
EXE="$OUT/bytes-$MODEL"
if [ "$MODEL" = universal ]; then
  "$ROOT/build/bin/universal-compile" --train --causal --d-model "${D_UT:-64}" --heads 4 --vocab 256 --ctx "$SEQ" \
    --max-steps "${MAX_STEPS:-6}" --train-lr 1e-3 --train-warmup 100 $EXTRA --quiet -o "$EXE"
else
  "$ROOT/build/bin/gpt2-compile" --train --layers "$LAYERS" --d-model "$D" --heads 4 --vocab 256 --ctx "$SEQ" \
    --train-lr 2e-3 --train-warmup 100 --train-decay-steps "$STEPS" $EXTRA --quiet -o "$EXE"
fi
"$EXE" --train --data "$OUT/train.npy" --eval-data "$OUT/val.npy" --seq "$SEQ" --steps "$STEPS" \
  --eval-every $((STEPS / 20)) --seed 1 --log "$OUT/log.csv" --save "$OUT/ckpt.safetensors"
if [ "$MODEL" = universal ]; then
  python3 "$ROOT/bench/train/bytes.py" depths "$OUT" "$EXE" "$OUT/ckpt.safetensors" "$SEQ" | tee "$OUT/depths.txt"
fi
o3=$(sed -n 's/order 3: \(.*\) nats/\1/p' "$OUT/ngram.txt")
if command -v gnuplot > /dev/null; then
  gnuplot <<GP
set terminal pngcairo size 900,540
set output "$OUT/curve.png"
set datafile separator ","
set xlabel "step"; set ylabel "loss (nats per byte)"; set key top right
plot "$OUT/log.csv" every ::1 using 1:2 with lines lc rgb "#9bb" title "training loss", \
     "$OUT/log.csv" every ::1 using 1:(\$3 > 0 ? \$3 : 1/0) with linespoints lw 2 title "validation loss (GPL-3)", \
     $o3 with lines dt 2 title "order-3 byte n-gram (add-one)"
GP
  echo "wrote $OUT/curve.png"
else
  echo "no gnuplot (apt-get install gnuplot-nox): no curve.png; the curve is $OUT/log.csv"
fi
