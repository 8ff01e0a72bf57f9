#!/bin/sh
# Allocations failing inside one rank's collective call (tests/mpi/alloc_faults.c,
# 2 ranks, rank 1 faulty; rank 0 for the save, the root that gathers and writes
# meta.json): every allocation the call makes is failed in turn, one per run (GAAW_FAULT=alloc:K, tests/harness/fault_inject.c). Each run must end normally on
# both ranks, and either go on as without the fault (an allocation whose failure the
# call survives, such as a message's) or fail on both ranks with the cause named:
# GAAW_ERR_NO_MEMORY, or GAAW_ERR_COMM ("the job was aborted") carrying it and naming
# the faulty rank. A rank that waited for its peer until comm_timeout, crashed or went
# on would fail the check. Calls: the agreement's heap path (100 slots), a sampler's
# push at tp 2 and exchange at dp 2, a model's checkpoint load and a save. Skips
# without mpiexec or without the shim.
prog=./tests/mpi/alloc_faults
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
if test -z "$MPIEXEC" || ! test -f "$shim"; then
  echo "no mpiexec or no $shim: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_alloc_faults.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }

# run MODE K: alloc_faults MODE with rank $faulty's K-th allocation failing; the library's
# allocations come from libgaaw*.so in a shared build, from the program where the
# library is linked in statically: one rule for each, only one of which can match
run() {
  rm -rf "$tmp/ckpt" && mkdir "$tmp/ckpt"
  timeout -k 5 60 $MPIEXEC -n 2 env LD_PRELOAD="$shim" GAAW_FAULT="alloc:$2@libgaaw,alloc:$2@/alloc_faults" \
    GAAW_FAULT_RANK=$faulty $prog $1 "$tmp/ckpt" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
# status R: rank R's status in the last run
status() { sed -n "s/^rank $1: \([^,]*\),.*/\1/p" "$tmp/out"; }

for mode in agree push exchange load save; do
  faulty=1 peer=0
  test $mode = save && faulty=0 peer=1
  run $mode 1000000
  clean=`status $faulty` allocations=`sed -n "s/^rank $faulty: .*, \([0-9]*\) allocations$/\1/p" "$tmp/out"`
  if test $rc -ne 0 || test -z "$allocations" || test "$allocations" -lt 1; then
    err "$mode: the run without a fault failed (exit $rc) or made no allocation"
    cat "$tmp/out" "$tmp/err"
    continue
  fi
  failed=0
  k=1
  while test $k -le $allocations; do
    run $mode $k
    what="$mode, allocation $k of $allocations"
    s0=`status 0` s1=`status 1`
    if test $rc -ne 0 || test -z "$s0" || test -z "$s1"; then
      err "$what: exit $rc (a crash, a hang or an MPI abort)"
      cat "$tmp/out" "$tmp/err"
    elif test "$s0" = "$clean" && test "$s1" = "$clean"; then
      :
    else
      failed=`expr $failed + 1`
      for s in "$s0" "$s1"; do
        case $s in "out of memory"|"communication error") ;; *) err "$what: a rank's status is '$s'" ;; esac
      done
      test `grep -c '^message: .*GAAW_ERR_NO_MEMORY' "$tmp/out"` -eq 2 ||
        { err "$what: not every rank names the failed allocation"; cat "$tmp/out"; }
      test "`status $peer`" = "out of memory" || grep -q "^message: .*on world rank $faulty: " "$tmp/out" ||
        { err "$what: rank $peer does not name rank $faulty"; cat "$tmp/out"; }
    fi
    k=`expr $k + 1`
  done
  test $failed -ge 1 || err "$mode: no failed allocation made the call fail"
  echo "$mode: $allocations allocations failed in turn, $failed of them failing the call"
done
exit $fail
