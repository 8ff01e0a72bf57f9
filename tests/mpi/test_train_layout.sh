#!/bin/sh
# gaaw-train --layout auto from the outside, on 4 ranks (host backend), a small GPT
# (2 layers, 2 heads, dim 64, seq 32) and a global batch of 16 rows (--batch 4 at dp 4):
#  (a) it prints the planner's "layout auto: dp A x pp B x tp C, ..." line before the
#      first step, A x B x C = 4, the header that follows reports the same dp and tp,
#      the tokens per step are those of 16 rows, and 3 steps train (exit 0);
#  (b) --layout bogus: exit 2 naming --layout, before any step;
#  (c) MPMD, --layout auto on rank 0 only: exit 2 on every rank, naming --layout, at
#      once (well inside the 60 s timeout), never a hang.
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_layout.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
small="--backend host --steps 3 --layers 2 --heads 2 --dim 64 --seq 32 --batch 4 --lr 0.005 --warmup 2
       --eval-every 0 --eval-batches 1 --sample 0 --seed 7 --comm-timeout 60"

# (a)
for run in a; do
  timeout -k 5 300 $MPIEXEC -n 4 $prog $small --layout auto >"$tmp/$run.out" 2>"$tmp/$run.err"
  rc=$?
  cat "$tmp/$run.out"
  if test $rc -ne 0; then
    err "($run) exit $rc"
    cat "$tmp/$run.err"
    continue
  fi
  line=`grep -n '^layout auto: dp [0-9]* x pp [0-9]* x tp [0-9]*' "$tmp/$run.out" | cut -d: -f1`
  step=`grep -n '^step  *1/' "$tmp/$run.out" | head -1 | cut -d: -f1`
  test -n "$line" && test -n "$step" && test "$line" -lt "$step" ||
    err "($run) no layout line before the first step (line '$line', first step '$step')"
  set -- `sed -n 's/^layout auto: dp \([0-9]*\) x pp \([0-9]*\) x tp \([0-9]*\),.*/\1 \2 \3/p' "$tmp/$run.out"`
  test "$#" -eq 3 && test `expr $1 \* $2 \* $3` -eq 4 || err "($run) the layout's sizes '$*' do not make 4 ranks"
  grep -q "^gaaw-train: world 4 = dp $1 .*tp $3," "$tmp/$run.out" || err "($run) the header does not show dp $1 and tp $3"
  grep -q "= 512 tokens per step" "$tmp/$run.out" || err "($run) a step is not 16 rows of 32 tokens"
  grep -q '^step  *3/3' "$tmp/$run.out" || err "($run) 3 steps did not run"
done

# (b) a bad value
timeout -k 5 60 $MPIEXEC -n 4 $prog $small --layout bogus >"$tmp/b.out" 2>"$tmp/b.err"
rc=$?
test $rc -eq 2 || err "(b) --layout bogus: exit $rc, expected 2"
grep -q -- "--layout" "$tmp/b.err" || err "(b) the message does not name --layout: `cat $tmp/b.err`"
grep -q '^step ' "$tmp/b.out" && err "(b) steps ran"

# (c) auto on rank 0 only
began=`date +%s`
timeout -k 5 60 $MPIEXEC -n 1 $prog $small --layout auto : -n 3 $prog $small >"$tmp/c.out" 2>"$tmp/c.err"
rc=$?
took=$((`date +%s` - began))
test $rc -eq 2 || err "(c) MPMD --layout: exit $rc, expected 2"
grep -q -- "--layout is auto on some ranks only" "$tmp/c.err" || err "(c) the message: `cat $tmp/c.err`"
test $took -lt 30 || err "(c) took $took s"
exit $fail
