#!/bin/sh
# gaaw-train --plot DIR (it launches mpiexec itself; skipped, 77, without mpiexec or
# gnuplot):
#  - a tiny run on 2 ranks (tp 2, host backend, 4 steps) without --metrics leaves
#    DIR/metrics.jsonl (one line per step) and gaaw-plot's SVGs in DIR, the loss
#    plot with the training and validation series; exit 0;
#  - with --metrics FILE the plots are drawn from FILE (no DIR/metrics.jsonl);
#  - a --plot DIR that cannot be created exits 2 before training, and so does a
#    gnuplot that gaaw-plot --check cannot find (GAAW_GNUPLOT names no program);
#  - when gaaw-plot fails at the end (GAAW_GNUPLOT=/bin/false) gaaw-train exits 1 and
#    says where the metrics are.
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_plot.XXXXXX` || exit 99
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
tiny="--backend host --tp 2 --steps 4 --layers 1 --heads 2 --dim 32 --seq 32 --batch 4 --eval-every 2 --sample 0"
run() {
  timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

run --plot "$tmp/plots"
if test $rc -ne 0 && grep 'gnuplot is needed' "$tmp/err" >/dev/null; then
  cat "$tmp/err"
  exit 77
fi
test $rc -eq 0 || { err "--plot: exit $rc"; cat "$tmp/err"; }
test "`wc -l <"$tmp/plots/metrics.jsonl" 2>/dev/null`" = 4 || err "--plot: DIR/metrics.jsonl does not hold the 4 steps"
for p in loss lr grad_norm throughput memory; do
  test -s "$tmp/plots/$p.svg" || err "--plot: no $p.svg in DIR"
done
grep '>metrics.jsonl train<' "$tmp/plots/loss.svg" >/dev/null || err "loss.svg names no training series"
grep '>metrics.jsonl validation<' "$tmp/plots/loss.svg" >/dev/null || err "loss.svg names no validation series"

run --plot "$tmp/p2" --metrics "$tmp/run.jsonl"
test $rc -eq 0 || { err "--plot with --metrics: exit $rc"; cat "$tmp/err"; }
grep '>run.jsonl train<' "$tmp/p2/loss.svg" >/dev/null || err "--metrics run.jsonl is not what was plotted"
test -f "$tmp/p2/metrics.jsonl" && err "--plot with --metrics also wrote DIR/metrics.jsonl"

: >"$tmp/file"
run --plot "$tmp/file/sub"
test $rc -eq 2 || err "--plot under a regular file: exit $rc, expected 2"
grep -- "--plot '$tmp/file/sub' is not a writable directory" "$tmp/err" >/dev/null || err "--plot under a file: `cat $tmp/err`"
grep '^step ' "$tmp/out" >/dev/null && err "--plot under a file: training started"

GAAW_GNUPLOT="$tmp/none" run --plot "$tmp/p3"
test $rc -eq 2 || err "no gnuplot: exit $rc, expected 2"
grep "GAAW_GNUPLOT='$tmp/none' is not an executable gnuplot" "$tmp/err" >/dev/null || err "no gnuplot: `cat $tmp/err`"
grep 'cannot draw the plots' "$tmp/err" >/dev/null || err "no gnuplot: gaaw-train does not say why it stops"
grep '^step ' "$tmp/out" >/dev/null && err "no gnuplot: training started"

GAAW_GNUPLOT=/bin/false run --plot "$tmp/p4"
test $rc -eq 1 || err "a failing gaaw-plot: exit $rc, expected 1"
grep '^step     4/4 ' "$tmp/out" >/dev/null || err "a failing gaaw-plot: the training did not end"
grep "the metrics are in $tmp/p4/metrics.jsonl" "$tmp/err" >/dev/null || err "a failing gaaw-plot: `cat $tmp/err`"
exit $fail
