#!/bin/sh
# The memory estimate with each of its allocations failing in turn (tests/mpi/
# estimate_faults.c, one process under tests/harness/fault_inject.c): the answer
# without the fault or GAAW_ERR_NO_MEMORY, and no memory lost. Skips without the shim.
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
if ! test -f "$shim"; then
  echo "no $shim: skipped"
  exit 77
fi
# tcache_count=0: freed chunks go back to the heap at once, so that its count of
# bytes in use is the same after calls that freed alike
${MPIEXEC:+$MPIEXEC -n 1} env GLIBC_TUNABLES=glibc.malloc.tcache_count=0 LD_PRELOAD="$shim" \
  ./tests/mpi/estimate_faults
