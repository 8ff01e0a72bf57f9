#!/bin/sh
# The nvme offload's file alone (tests/unit/nvme_file.c), under the fault shim when
# it is built (tests/harness/fault_inject.c), without it otherwise (its fault cases
# are then skipped, and said).
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
if test -f "$shim"; then
  LD_PRELOAD="$shim" ./tests/unit/nvme_file
else
  ./tests/unit/nvme_file
fi
