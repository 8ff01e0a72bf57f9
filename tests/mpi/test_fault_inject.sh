#!/bin/sh
# I/O failures injected into one rank of gaaw-train (tests/harness/fault_inject.c, an
# LD_PRELOAD library; 2 ranks, dp 2, the tiny GPT of test_train_checkpoint.sh):
#  (a) the shim itself: a malformed GAAW_FAULT ends the program with 99; open:2 fails
#      the second open of a file only;
#  (b) checkpoints (--save-every 4, 8 steps): rank 1's fsync of its file in the second
#      save, rank 0's rename of `latest` in the second save, rank 1's first open of the
#      first save: the run ends with exit 1 (MPI_Abort: its messages may be lost),
#      `latest` still names the last complete checkpoint (or none), and --resume auto
#      then finishes the run, its saves sweeping the failed save's temporary directory;
#  (c) offload_optimizer=nvme: rank 1's io_uring submission in the first step and its
#      posix_fallocate when the file is made: GAAW_ERR_IO, the failing rank named, the
#      nvme directory left empty.
# Skips without mpiexec or without the shared shim (a --disable-shared build).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
if test -z "$MPIEXEC" || ! test -f "$shim"; then
  echo "no mpiexec or no $shim: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_fault_inject.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
tiny="--backend host --zero 1 --layers 1 --heads 2 --dim 32 --seq 32 --batch 4 --lr 0.005 --warmup 2
      --eval-every 4 --eval-batches 2 --sample 0 --seed 7"

# faulty NAME RANK FAULT ARGS...: gaaw-train with FAULT injected on RANK
faulty() {
  name=$1 rank=$2 fault=$3
  shift 3
  timeout -k 5 120 $MPIEXEC -n 2 env LD_PRELOAD="$shim" GAAW_FAULT="$fault" GAAW_FAULT_RANK=$rank \
    $prog $tiny "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
}
# failed NAME RANK [saved]: exit 1 (not a hang, not a crash). A failure while training
# or saving ends gaaw-train with MPI_Abort, whose teardown may drop the ranks' last
# output under load, so only the exit and the files are checked there ("saved");
# a failure while setting up ends the run normally: the injection and GAAW_ERR_IO
# are printed, with the failing rank named (by rank 0).
failed() {
  test $rc -eq 1 || { err "$1: exit $rc, want 1"; cat "$tmp/$1.err"; return 1; }
  test "x$3" = xsaved && return 0
  grep -q '^gaaw-fault: ' "$tmp/$1.err" || err "$1: the fault was not injected"
  grep -q "failed: GAAW_ERR_IO" "$tmp/$1.err" || err "$1: no GAAW_ERR_IO reported"
  grep -q "world rank $2 failed, so every rank stops" "$tmp/$1.err" || err "$1: the failing rank $2 is not named"
}
# intact NAME DIR STEP: `latest` names step STEP (none when STEP is -), and --resume
# auto finishes the 8 steps, its saves sweeping the failed save's temporary directory
intact() {
  name=$1 dir=$2
  if test "x$3" = x-; then
    test ! -e "$dir/latest" || err "$name: latest exists after a failed first save"
  else
    test "`cat "$dir/latest" 2>/dev/null`" = "step-0000000$3" || err "$name: latest is '`cat "$dir/latest"`', want step-0000000$3"
  fi
  timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny --steps 8 --save-dir "$dir" --save-every 4 --resume auto \
    >"$tmp/$name.resume.out" 2>"$tmp/$name.resume.err"
  test $? -eq 0 || { err "$name: the resumed run failed"; cat "$tmp/$name.resume.err"; }
  grep -q '^done: ' "$tmp/$name.resume.out" || err "$name: the resumed run did not finish"
  ls -a "$dir" | grep -q '^\.tmp' && err "$name: a temporary directory is left: `ls -a "$dir"`"
  test "`cat "$dir/latest" 2>/dev/null`" = step-00000008 || err "$name: the resumed run's latest is not step 8"
}

# (a) the shim
echo x >"$tmp/file"
env LD_PRELOAD="$shim" GAAW_FAULT=fsync cat "$tmp/file" >/dev/null 2>"$tmp/bad.err"
test $? -eq 99 || err "a malformed GAAW_FAULT: want exit 99"
grep -q 'want CALL:K' "$tmp/bad.err" || err "a malformed GAAW_FAULT: no message"
env LD_PRELOAD="$shim" GAAW_FAULT="open:2@$tmp/file" cat "$tmp/file" "$tmp/file" >"$tmp/cat.out" 2>"$tmp/cat.err"
test $? -ne 0 && test "`cat "$tmp/cat.out"`" = x && grep -q "gaaw-fault: open #2 on $tmp/file" "$tmp/cat.err" ||
  err "open:2: want the first open through and the second failed"

# (b) checkpoints
mkdir "$tmp/s1" "$tmp/s2" "$tmp/s3"
faulty fsync 1 "fsync:1@step-00000008" --steps 8 --save-dir "$tmp/s1" --save-every 4
failed fsync 1 saved && intact fsync "$tmp/s1" 4
faulty rename 0 "rename:2@latest" --steps 8 --save-dir "$tmp/s2" --save-every 4
failed rename 0 saved && intact rename "$tmp/s2" 4
faulty open 1 "open:1@step-00000004" --steps 8 --save-dir "$tmp/s3" --save-every 4
failed open 1 saved && intact open "$tmp/s3" -

# (c) nvme offload
for f in "io_uring_submit:1" "posix_fallocate:1@$tmp/n"; do
  rm -rf "$tmp/n" && mkdir "$tmp/n"
  name=`echo "$f" | sed 's/:.*//'`
  faulty $name 1 "$f" --steps 4 --offload-optimizer nvme --nvme-path "$tmp/n"
  failed $name 1
  test -z "`ls -A "$tmp/n"`" || err "$name: files left in the nvme directory: `ls -A "$tmp/n"`"
done
test $fail -eq 0 && echo "fault injection: every failure ended the run, nothing lost"
exit $fail
