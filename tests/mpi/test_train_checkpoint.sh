#!/bin/sh
# gaaw-train's checkpoints from the outside (it launches mpiexec itself), a tiny GPT
# on the shipped corpus, 2 ranks (dp 2, ZeRO 1, host backend) unless said otherwise:
#  (a) 12 steps saving every 4 (--save-dir, --save-every, --keep): a save on steps 4, 8
#      and 12, its time on those step lines and as save_ms in those metrics lines,
#      `latest` naming step-00000012; resumed from step-00000004 (--resume DIR), the
#      run trains steps 5-12 and its metrics lines (all but the times and the device
#      peak, which a new process measures afresh) are bitwise those of the
#      uninterrupted run; the same with checkpoint_async (its last save
#      committed before the run ends);
#  (b) --resume auto with an empty --save-dir says it starts fresh; that run, killed
#      with SIGKILL (the whole mpiexec) while training, then the same command again
#      (it resumes from the newest checkpoint): its metrics file, continued after the
#      loaded step, is bitwise (all but the times) the uninterrupted run's;
#  (c) a kill inside a save (GAAW_TEST_CHECKPOINT_KILL=before_rename, after_rename,
#      before_latest: rank 0 SIGKILLs itself there, MPICH ends the job): the run dies,
#      `latest` still names a complete checkpoint, and the same command without the
#      switch continues bitwise like the uninterrupted run;
#  (d) resumed on 1 rank from checkpoints saved on 2 (dp 2 x batch 4 resumed as
#      batch 8; tp 2 resumed as tp 1): the losses of steps 5-12 within 1e-5 relative;
#  (e) --export FILE after training, then --steps 0 --import FILE: the validation loss
#      of the run's end; the same with --resume auto and a --save-dir without a
#      checkpoint (--import is the fresh start); --steps 0 --resume DIR: the same;
#  (f) bad values (--save-every 0, --keep -1, --resume auto without --save-dir,
#      --steps 0 alone, --resume DIR with --import, a directory without a checkpoint, a
#      checkpoint beyond --steps or of another model, an --import file missing, of
#      another model or truncated, an --export file in a missing directory, a
#      --save-dir that is a file) exit 2 with one message, before any training, on
#      every rank, without hanging.
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_checkpoint.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
tiny="--backend host --zero 1 --layers 1 --heads 2 --dim 32 --seq 32 --batch 4 --lr 0.005 --warmup 2
      --eval-every 4 --eval-batches 2 --sample 0 --seed 7"
# train NAME NP ARGS...: gaaw-train with the tiny options and ARGS; stdout in
# $tmp/NAME.out, stderr in $tmp/NAME.err, status in $rc.
train() {
  name=$1 np=$2
  shift 2
  timeout -k 5 120 $MPIEXEC -n $np $prog $tiny "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
}
# ok NAME: exit 0 and a summary
ok() {
  test $rc -eq 0 || { err "$1: exit $rc"; cat "$tmp/$1.err"; return 1; }
  grep '^done: ' "$tmp/$1.out" >/dev/null || { err "$1: no 'done:' line"; return 1; }
}
# strip FILE [FROM]: the metrics lines of steps FROM.. (default all) without the times
# and the device peak (a resumed process starts its peak afresh: its first step has
# no communicator scratch from an earlier one yet)
strip() {
  sed 's/,"ms":[0-9.]*,"tokens_per_s":[0-9.]*,"tflops":[-0-9.e+]*\(,"mfu":[-0-9.e+]*\)\{0,1\}\(,"save_ms":[0-9.]*\)\{0,1\}//
       s/,"device_peak_bytes":[0-9]*//' "$1" |
    awk -v from=${2:-1} '{ s = $0; sub(/^{"step":/, "", s); sub(/,.*/, "", s) } s + 0 >= from'
}
# same WHAT A B: files A and B are the same
same() {
  cmp -s "$2" "$3" || { err "$1 differ:"; diff "$2" "$3" | head -4 | cut -c1-300; }
}
# latest_ok WHAT DIR: DIR/latest names a directory holding meta.json
latest_ok() {
  named=`cat "$2/latest" 2>/dev/null`
  test -n "$named" && test -f "$2/$named/meta.json" || err "$1: latest ('$named') does not name a complete checkpoint"
}
# val_loss NAME: the last validation loss that run NAME printed (4 decimals)
val_loss() { sed -n 's/^step  *[0-9]*\/[0-9]* | val loss \([0-9.]*\)$/\1/p' "$tmp/$1.out" | tail -1; }
# losses FILE: "step loss" per metrics line
losses() { sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),.*/\1 \2/p' "$1"; }
# close WHAT A B: the losses of metrics files A and B, step by step, within 1e-5 relative
close() {
  losses "$2" >"$tmp/close.a"
  losses "$3" | paste -d ' ' "$tmp/close.a" - | awk '
    function far(a, b) { d = a - b; if (d < 0) d = -d; return d > 1e-5 * (b < 0 ? -b : b) }
    NF != 4 || $1 != $3 { print "  steps differ: " $0; bad = 1; next }
    far($4, $2) { print "  step " $1 ": loss " $4 " vs " $2; bad = 1 }
    END { if (NR == 0) { print "  no steps"; bad = 1 }; exit bad }' || err "$1: losses above not within 1e-5 relative"
}

# (a) the uninterrupted run, with saves (and the export of (e))
train ref 2 --steps 12 --save-dir "$tmp/ref" --save-every 4 --keep 0 --metrics "$tmp/ref.jsonl" \
  --export "$tmp/ref.safetensors"
ok ref
test "`cat "$tmp/ref/latest" 2>/dev/null`" = step-00000012 || err "ref: latest is '`cat "$tmp/ref/latest"`'"
for s in 4 8 12; do
  test -f "$tmp/ref/`printf step-%08d $s`/meta.json" || err "ref: no checkpoint of step $s"
done
saves=`sed -n 's/^step  *\([0-9]*\)\/12 | loss .* | save [0-9.]* ms$/\1/p' "$tmp/ref.out" | tr '\n' ' '`
test "$saves" = "4 8 12 " || err "ref: the step lines with a save time are '$saves', expected steps 4 8 12"
saves=`sed -n 's/^{"step":\([0-9]*\),.*"save_ms":[0-9.]*,.*/\1/p' "$tmp/ref.jsonl" | tr '\n' ' '`
test "$saves" = "4 8 12 " || err "ref: the metrics lines with save_ms are '$saves', expected steps 4 8 12"
strip "$tmp/ref.jsonl" 5 >"$tmp/ref.5"

train middle 2 --steps 12 --resume "$tmp/ref/step-00000004" --metrics "$tmp/middle.jsonl"
if ok middle; then
  grep "^resume: step 4 from $tmp/ref/step-00000004, training steps 5-12\$" "$tmp/middle.out" >/dev/null ||
    err "middle: no 'resume: step 4' line"
  strip "$tmp/middle.jsonl" >"$tmp/middle.5"
  same "(a) a run resumed at step 4 and the uninterrupted one: metrics of steps 5-12" "$tmp/ref.5" "$tmp/middle.5"
fi

# (a) with checkpoint_async: the same metrics and checkpoints, the last one committed
train async 2 --steps 12 --save-dir "$tmp/async" --save-every 4 --checkpoint-async yes --metrics "$tmp/async.jsonl"
if ok async; then
  strip "$tmp/ref.jsonl" >"$tmp/ref.all"
  strip "$tmp/async.jsonl" >"$tmp/async.all"
  same "(a) the metrics with and without checkpoint_async" "$tmp/ref.all" "$tmp/async.all"
  test "`cat "$tmp/async/latest" 2>/dev/null`" = step-00000012 || err "async: latest is '`cat "$tmp/async/latest"`'"
  train async-middle 2 --steps 12 --resume "$tmp/async/step-00000004" --metrics "$tmp/async-middle.jsonl"
  ok async-middle && strip "$tmp/async-middle.jsonl" >"$tmp/async.5" &&
    same "(a) resumed from an asynchronous save: metrics of steps 5-12" "$tmp/ref.5" "$tmp/async.5"
fi

# (b) kill -9 of the whole job while it trains, then the same command again
long="--steps 300 --save-every 10 --eval-every 100"
train long 2 $long --metrics "$tmp/long.jsonl"
ok long
# the job in a session of its own, so that one signal reaches mpiexec and its ranks
setsid $MPIEXEC -n 2 $prog $tiny $long --save-dir "$tmp/auto" --resume auto --metrics "$tmp/auto.jsonl" \
  >"$tmp/killed.out" 2>"$tmp/killed.err" &
job=$!
n=0
until grep '^{"step":2[5-9],' "$tmp/auto.jsonl" >/dev/null 2>&1 || test $n -ge 1500; do
  sleep 0.02
  n=$((n + 1))
done
env kill -s KILL -- -$job
wait $job
n=0
while ps -o pid= -s $job >/dev/null && test $n -lt 500; do # until every process of the job has gone
  sleep 0.02
  n=$((n + 1))
done
grep "^resume: no checkpoint in $tmp/auto: a fresh start\$" "$tmp/killed.out" >/dev/null ||
  err "(b) --resume auto with an empty --save-dir did not say it starts fresh"
if grep '^done: ' "$tmp/killed.out" >/dev/null; then
  err "(b) the run ended before it was killed (the machine is faster than this test assumed)"
else
  latest_ok "(b) after kill -9" "$tmp/auto"
  train auto 2 $long --save-dir "$tmp/auto" --resume auto --metrics "$tmp/auto.jsonl"
  if ok auto; then
    # the killed run may have saved its last step before the signal came (its
    # output unflushed, as under Open MPI): then there is nothing to resume, and the
    # metrics must still be the uninterrupted run's
    grep -E "^resume: step [1-9][0-9]* from $tmp/auto(, training steps|: nothing left to train)" "$tmp/auto.out" \
      >/dev/null || err "(b) the rerun did not resume: `grep '^resume' "$tmp/auto.out"`"
    strip "$tmp/long.jsonl" >"$tmp/long.all"
    strip "$tmp/auto.jsonl" >"$tmp/auto.all"
    same "(b) the metrics of a run killed and resumed, and of the uninterrupted run," "$tmp/long.all" "$tmp/auto.all"
  fi
fi

# (c) a kill inside a save: from the checkpoint of step 4, killed in the save of step 8
for point in before_rename after_rename before_latest; do
  mkdir "$tmp/$point"
  cp -r "$tmp/ref/step-00000004" "$tmp/$point/"
  echo step-00000004 >"$tmp/$point/latest"
  export GAAW_TEST_CHECKPOINT_KILL=$point
  train $point-killed 2 --steps 12 --save-dir "$tmp/$point" --save-every 4 --resume auto --metrics "$tmp/$point.jsonl"
  unset GAAW_TEST_CHECKPOINT_KILL
  test $rc -ne 0 || err "(c) $point: the run was not killed"
  grep '^done: ' "$tmp/$point-killed.out" >/dev/null && err "(c) $point: the run finished"
  latest_ok "(c) $point" "$tmp/$point"
  train $point 2 --steps 12 --save-dir "$tmp/$point" --save-every 4 --resume auto --metrics "$tmp/$point.jsonl"
  ok $point || continue
  strip "$tmp/$point.jsonl" >"$tmp/$point.5"
  same "(c) $point: the metrics of steps 5-12 after the kill and of the uninterrupted run" "$tmp/ref.5" "$tmp/$point.5"
  test "`cat "$tmp/$point/latest"`" = step-00000012 || err "(c) $point: latest is '`cat "$tmp/$point/latest"`' at the end"
done

# (d) saved on 2 ranks, resumed on 1
train one 1 --batch 8 --steps 12 --resume "$tmp/ref/step-00000004" --metrics "$tmp/one.jsonl"
ok one && close "(d) dp 2 x batch 4 resumed on 1 rank x batch 8 at step 4" "$tmp/ref.5" "$tmp/one.jsonl"
train tp 2 --tp 2 --batch 8 --steps 12 --save-dir "$tmp/tp" --save-every 4 --metrics "$tmp/tp.jsonl"
ok tp && strip "$tmp/tp.jsonl" 5 >"$tmp/tp.5"
train tp1 1 --batch 8 --steps 12 --resume "$tmp/tp/step-00000004" --metrics "$tmp/tp1.jsonl"
ok tp1 && close "(d) tp 2 resumed on 1 rank at step 4" "$tmp/tp.5" "$tmp/tp1.jsonl"

# (e) the exported weights, and the last checkpoint, evaluated again
want=`val_loss ref`
train import 2 --steps 0 --import "$tmp/ref.safetensors"
if ok import; then
  got=`sed -n 's/^done: 0 steps (at step 0) | val loss \([0-9.]*\)$/\1/p' "$tmp/import.out"`
  test -n "$want" && test "$got" = "$want" || err "(e) --import of the export: val loss '$got', the run ended at '$want'"
fi
train fresh 2 --steps 0 --import "$tmp/ref.safetensors" --save-dir "$tmp/fresh" --resume auto
if ok fresh; then
  grep "^resume: no checkpoint in $tmp/fresh: a fresh start from $tmp/ref.safetensors\$" "$tmp/fresh.out" >/dev/null ||
    err "(e) --resume auto --import: no 'fresh start from' line"
  got=`sed -n 's/^done: 0 steps (at step 0) | val loss \([0-9.]*\)$/\1/p' "$tmp/fresh.out"`
  test "$got" = "$want" || err "(e) --resume auto --import, no checkpoint: val loss '$got', the run ended at '$want'"
fi
train eval 2 --steps 0 --resume "$tmp/ref"
if ok eval; then
  got=`sed -n 's/^done: 0 steps (at step 12) | val loss \([0-9.]*\)$/\1/p' "$tmp/eval.out"`
  test -n "$want" && test "$got" = "$want" || err "(e) --steps 0 --resume: val loss '$got', the run ended at '$want'"
fi

# (f) bad values: exit 2, PATTERN once on stderr, no training
bad() {
  what=$1 pattern=$2
  shift 2
  train bad 2 "$@"
  test $rc -eq 2 || { err "(f) $what: exit $rc, expected 2"; cat "$tmp/bad.err"; }
  n=`grep -c -- "$pattern" "$tmp/bad.err"`
  test "$n" -eq 1 || err "(f) $what: '$pattern' appears $n times on stderr, expected once: `cat "$tmp/bad.err"`"
  grep '^step ' "$tmp/bad.out" >/dev/null && err "(f) $what: training started"
}
mkdir "$tmp/empty"
: >"$tmp/file"
bad "--save-every 0" "--save-every must be >= 1, got 0" --save-dir "$tmp/x" --save-every 0
bad "--keep -1" "--keep must be an integer >= 0" --save-dir "$tmp/x" --keep -1
bad "--resume auto alone" "--resume auto needs --save-dir" --resume auto
bad "--steps 0 alone" "--steps 0 needs --resume or --import" --steps 0
bad "--resume DIR with --import" "--resume DIR and --import exclude each other" --resume "$tmp/ref" \
  --import "$tmp/ref.safetensors"
bad "--resume of a directory without a checkpoint" "failed: GAAW_ERR_NOT_FOUND" --resume "$tmp/empty"
bad "--resume of a missing directory" "--resume '$tmp/missing' is neither auto nor a readable directory" \
  --resume "$tmp/missing"
bad "a checkpoint beyond --steps" "is at step 12, beyond --steps 8" --steps 8 --resume "$tmp/ref"
bad "a checkpoint of another model" "dim is 32 there, 64 here" --dim 64 --resume "$tmp/ref"
bad "a missing --import file" "cannot read the --import file" --import "$tmp/missing.safetensors"
bad "an --import file of another model" "the model's wte.weight is \[256, 64\]" --dim 64 --steps 0 \
  --import "$tmp/ref.safetensors"
head -c 500 "$tmp/ref.safetensors" >"$tmp/cut.safetensors"
bad "a truncated --import file" "failed: GAAW_ERR_CORRUPT" --steps 0 --import "$tmp/cut.safetensors"
bad "an --export file in a missing directory" "the directory of the --export file" --export "$tmp/missing/w.safetensors"
bad "a --save-dir that is a file" "--save-dir '$tmp/file' is not a writable directory" --save-dir "$tmp/file"
exit $fail
