#!/bin/sh
# The OpenMP wait policy gaaw chooses (backends/host/omp_wait.c), as libgomp itself
# reports it at start (OMP_DISPLAY_ENV=verbose) in a program linked with libgaaw
# (gaaw-info):
#  - with neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set: GOMP_SPINCOUNT = '10000';
#  - a user's GOMP_SPINCOUNT or OMP_WAIT_POLICY is kept.
# Skips (77) where the build has no OpenMP or no shared library (the choice needs the
# loader to run libgaaw_ompwait's constructor before libgomp's).
prog=./examples/gaaw-info
if grep "^dlname=''" ./libgaaw.la >/dev/null 2>&1; then
  echo "no shared library in this build: skipped"
  exit 77
fi
show() { env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose "$@" $prog --help 2>&1 >/dev/null; }
out=`show`
if ! echo "$out" | grep -q "GOMP_SPINCOUNT"; then
  echo "libgomp printed no GOMP_SPINCOUNT (no OpenMP in this build?): skipped"
  exit 77
fi
fail=0
err() { echo "FAIL: $*"; fail=1; }
echo "$out" | grep -q "GOMP_SPINCOUNT = '10000'" || err "gaaw's choice: libgomp saw $(echo "$out" | grep SPINCOUNT)"
out=`show GOMP_SPINCOUNT=777`
echo "$out" | grep -q "GOMP_SPINCOUNT = '777'" || err "the user's GOMP_SPINCOUNT=777: libgomp saw $(echo "$out" | grep SPINCOUNT)"
out=`show OMP_WAIT_POLICY=active`
echo "$out" | grep -q "OMP_WAIT_POLICY = 'ACTIVE'" || err "the user's OMP_WAIT_POLICY=active: libgomp saw $(echo "$out" | grep WAIT_POLICY)"
echo "$out" | grep -q "GOMP_SPINCOUNT = '10000'" && err "OMP_WAIT_POLICY=active was overridden by gaaw's spin count"
exit $fail
