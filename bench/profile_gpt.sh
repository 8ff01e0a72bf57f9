#!/bin/bash
# Where a training step of the benchmark GPT (bench/train_gpt: the reference GPT,
# batch 8 x seq 128 per rank, AdamW) spends its time, per kernel and per kind of
# work, in two layouts: 1proc (one rank, THREADS threads) and dp2 (two ranks x
# THREADS/2 threads, ZeRO 0).
#   1. kernels: the run with trace_kernels=yes, through gaaw-trace summary: ms per
#      rank and step of each kernel and shape (GEMMs by MxNxK), and the time outside
#      kernels (doc/timeline.md);
#   2. perf (when `perf record` works here): the share of CPU samples of every rank
#      and thread by kind: GEMM compute (the BLAS kernel), GEMM packing, each of
#      gaaw's host kernels, memset and memcpy, OpenMP waits and barriers (libgomp),
#      MPI, the OS kernel, and the initialisation's RNG.
# The traced run pays about a microsecond per kernel call for its spans (a few
# hundred calls per step: well under 1% of it).
#
# Run from the build directory:
#   [ARCH=gpt2|llama] [STEPS=10] [THREADS=2] [LAYOUTS="1proc dp2"] [PERF=auto|no] SRCDIR/bench/profile_gpt.sh
# (ARCH=llama profiles bench/train_gpt.sh's LLaMA-class model instead.)
set -eu
ARCH=${ARCH:-gpt2}
STEPS=${STEPS:-10}
THREADS=${THREADS:-2}
LAYOUTS=${LAYOUTS:-"1proc dp2"}
PERF=${PERF:-auto}
GAAW_BIN=${GAAW_BIN:-./bench/train_gpt}
TRACE_TOOL=${TRACE_TOOL:-./examples/gaaw-trace}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
for f in "$GAAW_BIN" "$TRACE_TOOL"; do
  [ -x "$f" ] || { echo "profile_gpt.sh: $f not found; run from the build directory after make" >&2; exit 2; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/profile_gpt.XXXXXX")
trap 'rm -rf "$tmp"' 0
if [ "$PERF" = auto ]; then
  if perf record -q -o "$tmp/probe.data" true >/dev/null 2>&1; then PERF=yes; else PERF=no; fi
fi

# category SYMBOL DSO: the kind of work a perf sample is
categories() {
  awk '
    function kind(sym, dso) {
      if (dso ~ /libgomp/) return "OpenMP waits and barriers (libgomp)"
      if (dso ~ /libmpi|libfabric|libucs|libucp|libhwloc/) return "MPI"
      if (dso ~ /kernel/) return "OS kernel (page faults, scheduling)"
      if (sym ~ /^sgemm_kernel|^dgemm_kernel/) return "GEMM compute (BLAS kernel)"
      if (sym ~ /^sgemm_.*copy|^sgemm_beta|^sgemm_[nt][nt]$|cblas_sgemm|blas_split|gemm_blocked/) return "GEMM packing and driver"
      if (sym ~ /causal_softmax|attention/) return "attention softmax"
      if (sym ~ /layernorm|rmsnorm/) return "layernorm"
      if (sym ~ /gelu|act_|swiglu|silu/) return "GELU"
      if (sym ~ /bias_/) return "bias"
      if (sym ~ /row_max|row_sum_exp|target_logit|cross_entropy/) return "cross-entropy"
      if (sym ~ /adamw|cpu_adam/) return "AdamW"
      if (sym ~ /host_fill|__memset/) return "memset and fill (zeroing)"
      if (sym ~ /__mem(cpy|move)|permute|cast/) return "memcpy, permutes, casts (copies)"
      if (sym ~ /add_f32|axpy|scale_f32/) return "residual add, axpy"
      if (sym ~ /sum_squares|sum_chunks|check_finite/) return "gradient norm, finite check"
      if (sym ~ /embedding/) return "embedding"
      if (sym ~ /rng|__ieee754_log|__cos|__sin|mix64/) return "initialisation (RNG)"
      return "other"
    }
    /^ *[0-9.]+%/ {
      pct = $1; sub(/%/, "", pct); dso = $2; sym = $4 # after the [.] or [k] column
      share[kind(sym, dso)] += pct
    }
    END { for (k in share) printf "%6.1f%%  %s\n", share[k], k }' | sort -rn
}

for layout in $LAYOUTS; do
  case $layout in
    1proc) np=1 ;;
    dp2) np=2 ;;
    *) echo "profile_gpt.sh: unknown layout '$layout'" >&2; exit 2 ;;
  esac
  per_rank=$((THREADS / np))
  [ "$per_rank" -ge 1 ] || per_rank=1
  export OMP_NUM_THREADS=$per_rank OPENBLAS_NUM_THREADS=$per_rank
  cmd=(mpiexec -n "$np" "$GAAW_BIN" --steps "$STEPS" --warmup 1 --threads "$per_rank" --arch "$ARCH")
  echo "## $layout ($ARCH): $np rank(s) x $per_rank thread(s), $STEPS steps"
  GAAW_TRACE_KERNELS=yes "${cmd[@]}" --trace="$tmp/$layout-%r.json" | grep -o "step_s=[^ ]*" | sed 's/^/# traced run: /'
  files=()
  for ((r = 0; r < np; r++)); do files+=("$tmp/$layout-$r.json"); done
  "$TRACE_TOOL" summary "${files[@]}"
  if [ "$PERF" = yes ]; then
    perf record -q -F 999 -o "$tmp/$layout.data" -- "${cmd[@]}" >/dev/null 2>&1
    echo "# perf: share of all CPU samples (every rank and thread, initialisation included)"
    perf report -i "$tmp/$layout.data" --no-children --sort dso,symbol --stdio 2>/dev/null | categories
  else
    echo "# perf: not available here (perf record failed); kernels table only"
  fi
  echo
done
