#!/bin/sh
# bench/uneven on 4 ranks, ranks 2 and 3 slowed SLOWDOWN times (option compute_slowdown
# through the environment, set per rank by an MPMD launch): the step time of the even
# split against shares sized by gaaw_plan_shares. Run from the build directory:
#   [SLOWDOWN=2] [MPIEXEC=mpiexec] SRCDIR/bench/uneven.sh [bench/uneven's options]
# Prints bench/uneven's one line (see its header).
mpiexec=${MPIEXEC:-mpiexec}
slow=${SLOWDOWN:-2}
exec $mpiexec -n 2 ./bench/uneven "$@" : -n 2 env GAAW_COMPUTE_SLOWDOWN="$slow" ./bench/uneven "$@"
