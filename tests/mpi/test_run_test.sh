#!/bin/sh
# The MPI test harness (tests/harness/run-test) combines the ranks' exit statuses so
# that fail beats skip, which mpiexec's own status does not (MPICH's hydra ORs them:
# a rank skipping with 77 and one failing with 1 give 77). A stand-in program
# (tests/mpi/exit_codes.c) exits with the status given for each rank:
#   0 0 -> 0      77 77 -> 77     77 1 and 1 77 -> 1     0 77 and 77 0 -> 1
#   0 1 -> 1      a rank that aborts -> 1     a rank that hangs -> 1 (timeout)
run=${GAAW_RUN_TEST:-./tests/harness/run-test}
prog=./tests/mpi/exit_codes_np2
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
fail=0
# expect WANT CODES...: run-test on the stand-in with those per-rank codes
expect() {
  want=$1
  shift
  out=`$run $prog "$@" 2>&1`
  rc=$?
  if test $rc -ne $want; then
    echo "FAIL: ranks exiting with '$*' gave $rc, expected $want"
    echo "$out" | sed 's/^/  /'
    fail=1
  else
    echo "ok: ranks exiting with '$*' give $rc"
  fi
}
expect 0 0 0
expect 77 77 77
expect 1 77 1
expect 1 1 77
expect 1 0 77
expect 1 77 0
expect 1 0 1
expect 1 3 0
expect 1 0 abort
GAAW_TEST_TIMEOUT=3 expect 1 0 hang
exit $fail
