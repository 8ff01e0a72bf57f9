#!/bin/sh
# bench/cuda_device_check.sh: the checks for a session with a GPU. Builds gaaw from
# this source tree (autoreconf, configure, make -j16) in $BUILD (default
# /tmp/gaaw-cuda-build), runs the CUDA tests and bench/gemm_cuda, and writes the
# test logs, the summary and the benchmark lines to $OUT (default ./cuda-check-out).
# Exit status: that of the tests (the benchmark runs either way).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$PWD/cuda-check-out}
build=${BUILD:-/tmp/gaaw-cuda-build}
arch=${CUDA_ARCH:-90}
mkdir -p "$out" "$build"
exec 3>&1
log() { echo "cuda_device_check: $*" | tee -a "$out/summary.txt" >&3; }

log "source $src, build $build, CUDA archs $arch"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/nvidia-smi.txt" 2>&1
(cd "$src" && autoreconf -fi) > "$out/build.log" 2>&1 || { log "autoreconf failed (see build.log)"; exit 1; }
(cd "$build" && "$src/configure" --with-cuda --with-cuda-arch="$arch" --enable-fortran=no) >> "$out/build.log" 2>&1 \
  || { log "configure failed (see build.log)"; exit 1; }
make -C "$build" -j16 >> "$out/build.log" 2>&1 || { log "make failed (see build.log)"; exit 1; }
log "built"

tests="tests/cuda/test_cuda_device tests/cuda/test_conformance_cuda tests/backend/train_cuda"
grep -q '^#define GAAW_HAVE_NCCL 1' "$build/config.h" && tests="$tests tests/cuda/test_nccl_np2"
make -C "$build" -j16 check TESTS="$tests" > "$out/check.log" 2>&1
status=$?
for t in $tests; do
  cp "$build/$t.log" "$out/" 2>/dev/null
  log "`tail -n 1 "$build/$t.log" 2>/dev/null`"
done
log "tests exit status $status"

"$build/bench/gemm_cuda" > "$out/bench.txt" 2>&1
log "bench exit status $?"
cat "$out/bench.txt" | tee -a "$out/summary.txt"
exit $status
