#!/bin/sh
# Mixed device backends in one MPI job, launched MPMD-style (the harness runs one
# program on N ranks, so this script calls $MPIEXEC itself):
#  - 2 ranks on the host backend and 2 on OpenCL: collectives on world, tp, dp and
#    a tp 2 x dp 2 ZeRO-1 GPT run against the all-host run (see
#    tests/mpi/test_mixed_backends.c);
#  - the same program on 4 host ranks, where every comparison must be exact.
# Skips (77) without mpiexec, or when OpenCL is not built or finds no device.
prog=${GAAW_MIXED_PROG:-./tests/mpi/test_mixed_backends}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
fail=0
timeout -k 5 200 $MPIEXEC -n 4 env GAAW_BACKEND=host $prog host
rc=$?
test $rc -eq 0 || { echo "FAIL: the all-host launch exited with $rc"; fail=1; }
timeout -k 5 200 $MPIEXEC -n 2 env GAAW_BACKEND=host $prog mixed : -n 2 env GAAW_BACKEND=opencl $prog mixed
rc=$?
if test $rc -eq 77; then
  test $fail -eq 0 && exit 77
elif test $rc -ne 0; then
  echo "FAIL: the mixed host/opencl launch exited with $rc"
  fail=1
fi
exit $fail
