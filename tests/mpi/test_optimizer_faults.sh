#!/bin/sh
# The optimizer's creation with each of its allocations failing in turn (tests/mpi/
# optimizer_faults.c, one process under tests/harness/fault_inject.c), with its state
# on the device, on host and on nvme: the result without the fault or
# GAAW_ERR_NO_MEMORY, nothing left in nvme_path and no memory lost. Skips without the
# shim, and in a sanitizer build (the shim's malloc would replace the sanitizer's).
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
if ! test -f "$shim" || test -n "$GAAW_TEST_SANITIZERS"; then
  echo "no $shim, or a sanitizer build: skipped"
  exit 77
fi
# tcache_count=0: freed chunks go back to the heap at once, so that its count of
# bytes in use is the same after calls that freed alike
${MPIEXEC:+$MPIEXEC -n 1} env GLIBC_TUNABLES=glibc.malloc.tcache_count=0 LD_PRELOAD="$shim" \
  ./tests/mpi/optimizer_faults
