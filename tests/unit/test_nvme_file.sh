#!/bin/sh
# The nvme offload's file alone (tests/unit/nvme_file.c), under the fault shim when
# it is built (tests/harness/fault_inject.c) and the build has no sanitizers, without
# it otherwise (its fault cases are then skipped, and said).
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
launch=${MPIEXEC:+$MPIEXEC -n 1}
# not in a sanitizer build (GAAW_TEST_SANITIZERS): the shim's malloc would replace ASan's
if test -f "$shim" && test -z "${GAAW_TEST_SANITIZERS-}"; then
  $launch env LD_PRELOAD="$shim" ./tests/unit/nvme_file
else
  $launch ./tests/unit/nvme_file
fi
