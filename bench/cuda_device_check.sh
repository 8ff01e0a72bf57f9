#!/bin/bash
# bench/cuda_device_check.sh: the GPU check. A session with a GPU runs it through the
# device kit (bench/device_kit.sh builds the kit here, its run.sh runs this script on
# the GPU machine over the prebuilt programs: GAAW_PREBUILT=1); on a machine that can
# build, it builds gaaw from this source tree in $BUILD (default /tmp/gaaw-cuda-build)
# first. It prints one line per result,
#   cuda_device_check: ITEM STATUS DETAIL...      (STATUS: PASS FAIL SKIP TIMEOUT INFO)
# on stdout and in $SUMMARY (default $OUT/summary.txt, OUT default ./cuda-check-out),
# with every log in $OUT. The items, in this order (the most telling first, so that a
# short budget still tells; an item the budget no longer fits is SKIP):
#   conformance          the CUDA conformance suite (every kernel against the host) at
#                        awkward sizes (1, 31, 33, 257, 4097; n = 4k+1..4k+3), element
#                        offsets 1 and 3, f16 attention with scores beyond f16's range,
#                        one tensor above 2^28 elements (GAAW_CONFORMANCE_BIG=1)
#   cuda_errors          last-error clearing (stub)
#   cuda_device          device discovery and backend=auto
#   zero_gpt             ZeRO 1-3 GPT steps on NCCL against the MPI backend, twice for
#                        bit-identity, allocator cache on and off
#   train_cuda           ZeRO 0 and 3 training against the host backend
#   checkpoint_cuda      checkpoints between the CUDA and host backends
#   nccl                 test_nccl_np2: f32, bf16, f16, i32; in place at offsets; a
#                        kernel right after each blocking op and wait (2 ranks with 2+
#                        GPUs; 1 rank otherwise, and the 2-rank line is SKIP)
#   nccl_timeout         a rank skipping a collective with comm_timeout=5 (2+ GPUs)
#   shared_gpu           two ranks on one GPU: NCCL falls back to MPI
#   mixed_backends       2 host and 2 CUDA ranks in one job (MPMD) against 4 host ranks
#   gemm_bf16            bf16 GEMM 8192^3 (gaaw and cublasGemmEx, bench/gemm_cuda) and
#   torch_matmul         torch.matmul, if PyTorch with CUDA is there
#   layernorm, adamw     bandwidth against the device's own copy bandwidth (bench/gemm_cuda)
#   gpt2_124m            a GPT-2 124M training step: tokens/s, MFU, and the cuBLASLt GEMM
#                        cache hit rate over the steps
#   memcheck, racecheck  the conformance suite (without the big tensor) under
#                        compute-sanitizer
# Without a GPU it prints one SKIP line and exits 77 before building anything.
# Exit status: 0 when nothing failed, 1 otherwise, 77 without a GPU.
# Environment: OUT, SUMMARY (appended to, not emptied, when given), BUILD,
# GAAW_PREBUILT (1: BUILD holds the kit's programs; nothing is built), CUDA_ARCH
# (default 90), BUDGET_S (default 590: items that no longer fit are reported SKIP),
# BUILD_LIMIT_S (360), MPIEXEC (default mpiexec), PEAK_TFLOPS (989), JOBS (make -j,
# default 16), GAAW_KIT_ORIG_LD_LIBRARY_PATH (run.sh: the machine's own library path,
# which the Python item gets back).
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$PWD/cuda-check-out}
build=${BUILD:-/tmp/gaaw-cuda-build}
arch=${CUDA_ARCH:-90}
budget=${BUDGET_S:-590}
mpiexec=${MPIEXEC:-mpiexec}
peak=${PEAK_TFLOPS:-989}
jobs=${JOBS:-16}
prebuilt=${GAAW_PREBUILT:-0}
mkdir -p "$out"
summary=${SUMMARY:-$out/summary.txt}
[ -n "${SUMMARY:-}" ] || : > "$summary"
failed=0
line() { echo "cuda_device_check: $*" | tee -a "$summary"; }
result() { # ITEM STATUS DETAIL...
  case "$2" in FAIL|TIMEOUT) failed=1 ;; esac
  line "$@"
}

# ---------------------------------------------------------------- a GPU at all?
gpus=0
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1; then
  gpus=$(grep -c '^GPU ' "$out/nvidia-smi.txt")
fi
if [ "$gpus" -lt 1 ]; then
  result gpu SKIP "no NVIDIA GPU here (nvidia-smi finds none); nothing was built or run"
  exit 77
fi
line "gpu INFO $gpus GPU(s): $(sed -n 1p "$out/nvidia-smi.txt")"

# run_item, status_of, summary_of
. "$(dirname "$0")/device_check_util.sh"

# ---------------------------------------------------------------- build
build_cmd() {
  # autoreconf only when configure is missing or older than what it is made from
  if [ ! -x "$src/configure" ] ||
    [ -n "$(find "$src" -maxdepth 3 \( -name configure.ac -o -name Makefile.am -o -name '*.inc' -o -name '*.m4' \) \
             -newer "$src/configure" -print -quit)" ]; then
    (cd "$src" && autoreconf -fi) || return 1
  fi
    mkdir -p "$build" && cd "$build" &&
    "$src/configure" --with-cuda --with-cuda-arch="$arch" --enable-fortran=no &&
    make -j"$jobs" &&
    make -j"$jobs" check TESTS=
}
if [ "$prebuilt" = 1 ]; then
  [ -x "$build/tests/cuda/test_conformance_cuda" ] || { result build FAIL "GAAW_PREBUILT=1 but $build holds no test programs"; exit 1; }
  result build INFO "prebuilt in $build (the device kit: nothing built here)"
else
  run_item build 120 "${BUILD_LIMIT_S:-360}" build.log bash -c "$(declare -f build_cmd); src='$src' build='$build' arch='$arch' jobs='$jobs'; build_cmd"
  [ "$rc" -eq 200 ] && exit 1
  if [ "$rc" -ne 0 ]; then
    result build "$(status_of $rc)" "exit $rc after ${elapsed} s (see build.log)"
    exit 1
  fi
  result build PASS "${elapsed} s, CUDA archs $arch"
fi
if ! grep -q '^#define GAAW_HAVE_NCCL 1' "$build/config.h"; then
  result nccl_build FAIL "this build has no NCCL: the NCCL items cannot run"
fi
t=$build/tests/cuda
export GAAW_LOG=${GAAW_LOG:-warn}
np=1
[ "$gpus" -ge 2 ] && np=2

# ---------------------------------------------------------------- correctness
run_item conformance 30 120 conformance.log env GAAW_CONFORMANCE_BIG=1 "$t/test_conformance_cuda"
[ "$rc" -ne 200 ] && result conformance "$(status_of $rc)" "${elapsed} s: $(summary_of conformance.log)"

run_item cuda_errors 5 30 cuda_errors.log "$t/test_cuda_errors"
[ "$rc" -ne 200 ] && result cuda_errors "$(status_of $rc)" "$(summary_of cuda_errors.log)"

run_item cuda_device 5 30 cuda_device.log "$t/test_cuda_device"
[ "$rc" -ne 200 ] && result cuda_device "$(status_of $rc)" "$(summary_of cuda_device.log)"

run_item zero_gpt 60 180 zero_gpt.log "$mpiexec" -n "$np" "$t/test_cuda_gpt_np2"
[ "$rc" -ne 200 ] && result zero_gpt "$(status_of $rc)" "$np rank(s), ZeRO 1-3: $(summary_of zero_gpt.log)"

for item in train_cuda checkpoint_cuda; do
  run_item "$item" 20 90 "$item.log" "$build/tests/backend/$item"
  [ "$rc" -ne 200 ] && result "$item" "$(status_of $rc)" "${elapsed} s: $(summary_of "$item.log")"
done

run_item nccl 20 120 nccl.log "$mpiexec" -n "$np" "$t/test_nccl_np2"
[ "$rc" -ne 200 ] && result nccl "$(status_of $rc)" "$np rank(s): $(summary_of nccl.log)"
[ "$np" -lt 2 ] && result nccl_2ranks SKIP "one GPU: NCCL needs a GPU per rank for the 2-rank run"

if [ "$np" -ge 2 ]; then
  run_item nccl_timeout 30 60 nccl_timeout.log "$mpiexec" -n 2 "$t/test_nccl_timeout_np2"
  [ "$rc" -ne 200 ] && result nccl_timeout "$(status_of $rc)" \
    "$(grep -h '^nccl_timeout' "$out/nccl_timeout.log") $(summary_of nccl_timeout.log)"
else
  result nccl_timeout SKIP "one GPU: a rank skipping an NCCL collective needs two ranks on two GPUs"
fi

run_item shared_gpu 15 60 shared_gpu.log "$mpiexec" -n 2 "$t/test_nccl_shared_gpu_np2"
[ "$rc" -ne 200 ] && result shared_gpu "$(status_of $rc)" \
  "$(grep -h '^nccl_shared_gpu' "$out/shared_gpu.log") $(grep -c 'use the same GPU' "$out/shared_gpu.log") warning(s); $(summary_of shared_gpu.log)"

mixed=$build/tests/mpi/test_mixed_backends
run_item mixed_backends 20 90 mixed_backends.log "$mpiexec" -n 2 env GAAW_BACKEND=host "$mixed" mixed : \
  -n 2 env GAAW_BACKEND=cuda "$mixed" mixed
[ "$rc" -ne 200 ] && result mixed_backends "$(status_of $rc)" "2 host + 2 CUDA ranks: $(summary_of mixed_backends.log)"

# ---------------------------------------------------------------- speed
run_item gemm_bench 30 150 gemm_cuda.log "$build/bench/gemm_cuda" 8192
if [ "$rc" -ne 200 ]; then
  if [ "$rc" -eq 0 ]; then
    while read -r l; do
      case "$l" in
        bench=gemm_cuda*) line "gemm_bf16 INFO $l" ;;
        bench=*layernorm*) line "layernorm INFO $l" ;;
        bench=*adamw*) line "adamw INFO $l" ;;
        bench=*) line "bench INFO $l" ;;
      esac
    done < <(grep '^bench=' "$out/gemm_cuda.log")
  else
    result gemm_bench "$(status_of $rc)" "exit $rc (see gemm_cuda.log)"
  fi
fi

torch_matmul() {
  python3 - <<'EOF'
import sys, time
try:
    import torch
except Exception as e:
    print("skip: no PyTorch (%s)" % e); sys.exit(3)
if not torch.cuda.is_available():
    print("skip: PyTorch without CUDA"); sys.exit(3)
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3): a @ b
torch.cuda.synchronize()
times = []
for _ in range(7):
    t0 = time.perf_counter()
    for _ in range(10): a @ b
    torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) / 10)
times.sort()
print("torch_matmul bf16 m=n=k=%d value=%.1f unit=TFLOP/s torch=%s" % (n, 2 * n**3 / times[3] / 1e12, torch.__version__))
EOF
}
# Python with the machine's own library path (run.sh puts the kit's first, for gaaw's
# programs only).
py_env=(env)
if [ -n "${GAAW_KIT_ORIG_LD_LIBRARY_PATH+x}" ]; then
  py_env=(env -u LD_LIBRARY_PATH)
  [ -n "$GAAW_KIT_ORIG_LD_LIBRARY_PATH" ] && py_env=(env LD_LIBRARY_PATH="$GAAW_KIT_ORIG_LD_LIBRARY_PATH")
fi
run_item torch_matmul 20 90 torch_matmul.log "${py_env[@]}" bash -c "$(declare -f torch_matmul); torch_matmul"
if [ "$rc" -eq 3 ]; then
  result torch_matmul SKIP "$(tail -n 1 "$out/torch_matmul.log")"
elif [ "$rc" -ne 200 ]; then
  gaaw_tf=$(grep -o '^bench=gemm_cuda.* value=[0-9.]*' "$out/gemm_cuda.log" | grep -o 'value=[0-9.]*' | head -n 1 | cut -d= -f2)
  torch_tf=$(grep -o 'value=[0-9.]*' "$out/torch_matmul.log" | cut -d= -f2)
  ratio=$(awk -v g="${gaaw_tf:-0}" -v p="${torch_tf:-0}" 'BEGIN { if (p > 0) printf "%.3f", g / p; else print "n/a" }')
  result torch_matmul "$( [ "$rc" -eq 0 ] && echo INFO || status_of $rc)" \
    "$(tail -n 1 "$out/torch_matmul.log") gaaw_value=${gaaw_tf:-n/a} ratio=$ratio"
fi

run_item gpt2_124m 60 180 gpt2_124m.log "$mpiexec" -n 1 "$t/test_cuda_gpt_np2" --bench --batch 8 --steps 8 \
  --peak-tflops "$peak"
if [ "$rc" -eq 0 ]; then
  line "gpt2_124m INFO $(grep -h '^gpt2_124m' "$out/gpt2_124m.log")"
elif [ "$rc" -ne 200 ]; then
  result gpt2_124m "$(status_of $rc)" "exit $rc (see gpt2_124m.log)"
fi

# ---------------------------------------------------------------- sanitizers (last: the slowest)
# The libtool wrappers run the real programs from .libs; the sanitizer must see those.
real() { if [ -x "$t/.libs/$1" ]; then echo "$t/.libs/$1"; else echo "$t/$1"; fi; }
export LD_LIBRARY_PATH="$build/.libs:${LD_LIBRARY_PATH:-}"
sanitizer=$(command -v compute-sanitizer)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer=$c
done
if [ -n "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    run_item "$tool" 60 150 "$tool.log" "$sanitizer" --tool "$tool" --error-exitcode 99 "$(real test_conformance_cuda)"
    [ "$rc" -ne 200 ] &&
      result "$tool" "$(status_of $rc)" "${elapsed} s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$tool.log" | tail -n 1)"
  done
else
  result memcheck FAIL "compute-sanitizer not found (PATH, /usr/local/cuda): the item did not run"
  result racecheck FAIL "compute-sanitizer not found (PATH, /usr/local/cuda): the item did not run"
fi

line "done INFO ${SECONDS} s of a ${budget} s budget; logs in $out"
exit $failed
