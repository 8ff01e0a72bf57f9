#!/bin/sh
# gaaw-train's model FLOPs, throughput and MFU, and its progress line, from the
# outside (it launches mpiexec itself), 4 steps of a tiny GPT on 2 ranks (dp 2,
# host backend):
#  - with --peak-tflops 0.01, every metrics line has model_flops_per_token equal to
#    6 (N - seq dim) + 12 layers seq dim, N counted here from the GPT's shapes
#    (DESIGN.md 6a: wte, wpe, per block two norms and four linears with biases,
#    ln_f; the LM head tied to wte); tflops = model_flops_per_token x tokens_per_s
#    / 2 ranks / 1e12 and mfu = tflops / 0.01 (within the printed digits); every
#    step line shows the TFLOP/s and MFU of its metrics line;
#  - without a peak: tflops still there, no mfu in the metrics, no MFU in the step
#    lines, and the header says the peak is unknown;
#  - --peak-tflops measure: the header gives a measured figure > 0 and mfu =
#    tflops / that figure;
#  - --peak-tflops -1 and --peak-tflops fast exit 2 naming the option;
#  - on a terminal (script(1) gives a pty): gaaw-train run directly (a singleton
#    MPI process, whose stderr is the terminal) redraws a progress line with '\r',
#    the step count, an ETA and tok/s; --no-progress removes it; under mpiexec
#    (whose pipes are no terminal) --progress yes shows it; without a terminal
#    nothing is drawn.
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_mfu.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
L=2 C=32 T=32 V=256
# one line: it is also part of script(1)'s command
tiny="--backend host --zero 1 --steps 4 --layers $L --heads 2 --dim $C --seq $T --vocab $V --batch 2 --warmup 1"
tiny="$tiny --eval-every 0 --eval-batches 1 --sample 0"
# train NAME ARGS...: 2 ranks; metrics in $tmp/NAME.jsonl, stdout $tmp/NAME.out,
# stderr $tmp/NAME.err, status in $rc
train() {
  name=$1
  shift
  timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny "$@" --metrics "$tmp/$name.jsonl" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  test $rc -eq 0 || { err "$name: exit $rc"; cat "$tmp/$name.err"; }
}
# fields NAME: "model_flops_per_token tokens_per_s tflops mfu" per metrics line (mfu "-" when absent)
fields() {
  sed -n 's/.*"model_flops_per_token":\([0-9]*\),.*"tokens_per_s":\([0-9.]*\),"tflops":\([-0-9.e+]*\)\(,"mfu":\([-0-9.e+]*\)\)\{0,1\}.*/\1 \2 \3 \5/p' \
    "$tmp/$1.jsonl" | awk 'NF == 3 { $4 = "-" } { print }'
}

# the parameters of the tied GPT, from its shapes, and its FLOPs per token
params=`awk -v L=$L -v C=$C -v T=$T -v V=$V 'BEGIN {
  block = 2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (4 * C * C + 4 * C) + (4 * C * C + C)
  printf "%.0f", V * C + T * C + L * block + 2 * C }'`
flops=`awk -v N=$params -v L=$L -v C=$C -v T=$T 'BEGIN { printf "%.0f", 6 * (N - T * C) + 12 * L * T * C }'`

# a fixed peak
train fixed --peak-tflops 0.01
grep "^flops: .*, peak 0.01 TFLOP/s per rank (peak_tflops)" "$tmp/fixed.out" >/dev/null ||
  err "fixed: no header line with the peak: `grep '^flops' "$tmp/fixed.out"`"
test `fields fixed | wc -l` -eq 4 || err "fixed: expected 4 metrics lines with the throughput fields: `cat "$tmp/fixed.jsonl"`"
fields fixed | awk -v f=$flops -v peak=0.01 '
  function off(a, b) { d = a - b; if (d < 0) d = -d; return d > 1e-4 * (b < 0 ? -b : b) }
  $1 != f { print "  model_flops_per_token " $1 ", expected " f; bad = 1 }
  off($3, $1 * $2 / 2 / 1e12) { print "  tflops " $3 ", expected " $1 " x " $2 " / 2 / 1e12"; bad = 1 }
  $4 == "-" || off($4, $3 / peak) { print "  mfu " $4 ", expected " $3 " / " peak; bad = 1 }
  END { exit bad }' || err "fixed: the throughput fields above are wrong (N = $params)"
# each step line against its metrics line: TFLOP/s to 3 digits, MFU to 0.1%
sed -n 's/^step *[0-9]*\/4 | loss .* | \([-0-9.e+]*\) TFLOP\/s | MFU \([0-9.]*\)%.*/\1 \2/p' "$tmp/fixed.out" >"$tmp/lines"
fields fixed >"$tmp/fields"
test `wc -l <"$tmp/lines"` -eq 4 || err "fixed: not every step line shows TFLOP/s and MFU: `grep '^step' "$tmp/fixed.out"`"
paste -d ' ' "$tmp/lines" "$tmp/fields" | awk '
  function abs(x) { return x < 0 ? -x : x }
  abs($1 - $5) > 0.005 * $5 || abs($2 - 100 * $6) > 0.051 { print "  line " $1 " TFLOP/s, MFU " $2 "%; metrics " $5 ", " $6; bad = 1 }
  END { exit bad }' || err "fixed: a step line's figures differ from its metrics line"

# no peak
train none
fields none | awk '$4 != "-" { bad = 1 } END { exit bad || NR != 4 }' ||
  err "none: mfu written without a peak, or a line without tflops: `cat "$tmp/none.jsonl"`"
grep '"mfu"' "$tmp/none.jsonl" >/dev/null && err "none: mfu in the metrics without a peak"
grep '^step .*MFU' "$tmp/none.out" >/dev/null && err "none: MFU in a step line without a peak"
grep '^step .* TFLOP/s' "$tmp/none.out" >/dev/null || err "none: no TFLOP/s in the step lines"
grep '^flops: .*, peak unknown: no MFU' "$tmp/none.out" >/dev/null || err "none: the header does not say the peak is unknown"

# a measured peak
train measure --peak-tflops measure
measured=`sed -n 's/^flops: .*, peak \([-0-9.e+]*\) TFLOP\/s per rank (measured: .*/\1/p' "$tmp/measure.out"`
awk -v p="$measured" 'BEGIN { exit !(p > 0) }' || err "measure: no positive measured peak: `grep '^flops' "$tmp/measure.out"`"
test `grep -c '^flops: ' "$tmp/measure.out"` -eq 1 || err "measure: the peak is not printed once"
fields measure | awk -v peak="$measured" '
  function abs(x) { return x < 0 ? -x : x }
  $4 == "-" || abs($4 - $3 / peak) > 1e-3 * $4 { print "  mfu " $4 ", tflops " $3 ", peak " peak; bad = 1 }
  END { exit bad || NR != 4 }' || err "measure: mfu is not tflops / the measured peak"
test $fail -eq 0 && echo "measured peak: $measured TFLOP/s per rank; `grep '^step *4/4 | loss' "$tmp/measure.out"`"

# bad peaks
for bad in -1 fast; do
  timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny --peak-tflops $bad >"$tmp/bad.out" 2>"$tmp/bad.err"
  rc=$?
  test $rc -eq 2 || err "--peak-tflops $bad: exit $rc, expected 2"
  grep 'peak_tflops must be' "$tmp/bad.err" >/dev/null || err "--peak-tflops $bad: no message naming it: `cat "$tmp/bad.err"`"
done

# the progress line, on a pty
if script -qec true /dev/null >/dev/null 2>&1; then
  # progress NAME COMMAND: COMMAND's terminal output in $tmp/NAME.tty
  progress() {
    timeout -k 5 120 script -qec "$2" /dev/null </dev/null >"$tmp/$1.tty" 2>&1 || err "$1: '$2' failed: `cat "$tmp/$1.tty"`"
  }
  # drawn NAME: a redrawn line with the step count, an ETA and tok/s
  drawn() { tr '\r' '\n' <"$tmp/$1.tty" | grep 'step 4/4 100.0% | elapsed [0-9:]* | ETA [0-9:]* | loss [0-9.]* | [0-9]* tok/s' >/dev/null; }
  progress tty "$prog $tiny"
  drawn tty || err "tty: no progress line on the terminal: `od -c "$tmp/tty.tty" | tail -20`"
  grep "`printf '\r'`step 1/4 " "$tmp/tty.tty" >/dev/null || err "tty: the progress line is not drawn after a carriage return"
  progress off "$prog $tiny --no-progress"
  grep 'ETA' "$tmp/off.tty" >/dev/null && err "--no-progress: a progress line was drawn"
  grep '^step *4/4 | loss' "$tmp/off.tty" >/dev/null || err "--no-progress: no step lines"
  progress forced "$MPIEXEC -n 2 $prog $tiny --progress yes"
  drawn forced || err "--progress yes under mpiexec: no progress line: `cat "$tmp/forced.tty"`"
  progress piped "$MPIEXEC -n 2 $prog $tiny"
  grep 'ETA' "$tmp/piped.tty" >/dev/null && err "under mpiexec (stderr a pipe): a progress line was drawn"
else
  echo "script(1) cannot make a pty here: the progress line on a terminal is not checked"
fi
grep 'ETA' "$tmp/fixed.err" "$tmp/fixed.out" >/dev/null && err "without a terminal: a progress line was drawn"
exit $fail
