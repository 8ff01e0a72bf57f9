#!/bin/sh
# Without a GPU, bench/cuda_device_check.sh skips cleanly: one SKIP line, exit 77,
# within seconds, and nothing built. (On a machine with a GPU this test skips:
# run the script itself there.)
script=${GAAW_TOP_SRCDIR:-.}/bench/cuda_device_check.sh
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  echo "test_device_check_skip: a GPU is here; run $script instead"
  exit 77
fi
tmp=`mktemp -d`
start=`date +%s`
OUT=$tmp/out BUILD=$tmp/build sh -c "bash '$script'" > $tmp/stdout 2>&1
rc=$?
took=$((`date +%s` - start))
cat $tmp/stdout
fail=0
err() { echo "FAIL: $*"; fail=1; }
test $rc -eq 77 || err "exit status $rc, expected 77"
test `wc -l < $tmp/stdout` -eq 1 || err "expected one line of output"
grep '^cuda_device_check: gpu SKIP ' $tmp/stdout > /dev/null || err "no SKIP line"
cmp -s $tmp/stdout $tmp/out/summary.txt || err "the summary differs from what was printed"
test ! -e $tmp/build || err "it started a build without a GPU"
test $took -le 20 || err "it took $took s"
rm -rf $tmp
test $fail -eq 0 && echo "test_device_check_skip: passed"
exit $fail
