#!/bin/sh
# offload_optimizer=nvme's failures on 2 ranks (tests/mpi/offload_faults.c): a
# missing, read-only, size-limited and full nvme_path on one rank, and each write of
# a step failing in turn, each the same named error on every rank, without a hang.
# The read-only directory and the full filesystem: as root, two tmpfs mounted in a
# private mount namespace (unshare -m; root writes through permission bits); as
# another user, a directory without write permission, and no full filesystem.
prog=${GAAW_FAULTS_PROG:-./tests/mpi/offload_faults}
# the fault shim fails each write of a step in turn (that case is skipped without it,
# and in a sanitizer build, whose malloc the shim's would replace)
shim=`pwd`/tests/harness/.libs/libgaaw_fault.so
if test -f "$shim" && test -z "${GAAW_TEST_SANITIZERS-}"; then
  prog="env LD_PRELOAD=$shim $prog"
fi
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_offload_faults.XXXXXX` || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' 0
mkdir "$tmp/ro" "$tmp/tiny" || exit 1
run() { timeout -k 5 240 $MPIEXEC -n 2 $prog "$@"; }
if test "`id -u`" = 0 && unshare -m true 2>/dev/null; then
  # 8 KiB: less than the tiny GPT's optimizer file (a 4 KiB record per bucket piece)
  unshare -m sh -c "mount --make-rprivate / 2>/dev/null
    mount -t tmpfs -o ro,size=8k gaaw-ro '$tmp/ro' && mount -t tmpfs -o size=8k gaaw-tiny '$tmp/tiny' || exit 99
    $MPIEXEC -n 2 $prog '$tmp/ro' '$tmp/tiny'"
  rc=$?
elif test "`id -u`" != 0; then
  chmod a-w "$tmp/ro"
  run "$tmp/ro" -
  rc=$?
else
  run - -
  rc=$?
fi
test $rc -eq 124 && echo "FAIL: offload_faults did not finish in 240 s (a hang)"
exit $rc
