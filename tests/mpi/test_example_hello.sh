#!/bin/sh
# examples/hello_gaaw on 4 ranks with --tp 2 (dp 2 x tp 2): the all-reduce sums over
# the tp and dp groups must be right on every rank (the program checks them); a bad
# command line must give exit status 2. Skips (77) only without mpiexec: an
# all-reduce that fails, GAAW_ERR_UNSUPPORTED included, is a failure.
prog=./examples/hello_gaaw
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi

$MPIEXEC -n 1 $prog --no-such-option >/dev/null 2>&1
rc=$?
if test $rc -ne 2; then
  echo "FAIL: hello_gaaw --no-such-option exited with $rc, expected 2"
  exit 1
fi

out=`$MPIEXEC -n 4 $prog --tp 2 2>&1`
rc=$?
echo "$out"
if test $rc -ne 0; then
  echo "FAIL: hello_gaaw exited with $rc"
  exit 1
fi
for want in 'world 4 = dp 2 x pp 1 x tp 2' 'rank 3: dp 1, pp 0, tp 1' 'sums are right on every rank'; do
  if echo "$out" | grep "$want" >/dev/null; then :; else
    echo "FAIL: the output lacks '$want'"
    exit 1
  fi
done
exit 0
