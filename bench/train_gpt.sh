#!/bin/bash
# GPT training throughput, gaaw (bench/train_gpt) against PyTorch
# (bench/train_gpt_torch.py) on the same model, batch and optimizer, in three pairs:
#   1proc  gaaw tp 1 dp 1 ZeRO 0, 2 threads      vs PyTorch in one process, 2 threads
#   ddp2   gaaw dp 2 ZeRO 0, 2 ranks x 1 thread   vs PyTorch DDP (gloo), 2 processes x 1 thread
#   zero1  gaaw dp 2 ZeRO 1, 2 ranks x 1 thread   vs PyTorch DDP + ZeroRedundancyOptimizer(AdamW)
# Both sides get the same thread total (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, gaaw's
# `threads`, torch.set_num_threads) and the same environment. Each round launches
# both sides once (WARMUP untimed steps, then STEPS timed ones), alternating which
# goes first; the result line holds the medians over ROUNDS rounds.
#
# ARCH=llama benchmarks the LLaMA-class GPT instead (RoPE, RMSNorm, SwiGLU, no
# biases, untied, 2 kv heads of 4; both sides, at the same sizes).
#
# Run from the build directory:
#   [ARCH=gpt2|llama] [ROUNDS=5] [STEPS=4] [WARMUP=2] [MODES="1proc ddp2 zero1"] [THREADS=2]
#   [TORCH_WAITS="default passive"] [PEAK_SIZES="1024 2048"] SRCDIR/bench/train_gpt.sh
# One line per mode:
#   bench=train_gpt arch=A mode=M np=.. tp=1 dp=.. zero=.. threads_total=.. batch=8 seq=128 steps=..
#   rounds=.. value=X unit=tok/s peer=torch peer_value=Y ratio=X/Y cpu_s_per_step=..
#   peer_cpu_s_per_step=.. loss_last=.. peer_loss_last=.. openblas_coretype=..
#   model_gflops=.. peer_model_gflops=.. sgemm_peak_gflops=.. roofline_share=.. ceiling_tok_s=..
#   goal_tok_s=..
# tok/s counts every rank's tokens (batch 8 x seq 128 per rank) per step; cpu_s_per_step
# is the user + system time of all threads of all ranks per timed step.
# The roofline: model_gflops is tok/s x the model FLOPs per token (PaLM's count,
# printed by bench/train_gpt). Every round measures the sgemm peak just before gaaw's
# run: the best cblas_sgemm rate of bench/gemm at PEAK_SIZES (default "1024 2048",
# the sizes where it peaks) on THREADS threads. roofline_share is the median over the
# rounds of gaaw's model FLOP/s over its own round's peak, sgemm_peak_gflops the median
# peak, and ceiling_tok_s the tok/s a step would reach if all of its model FLOPs ran at
# that rate (no step can beat it). The peak is measured per round because on a shared
# VM it drifts by 10-20% within minutes (152 to 198 GFLOP/s seen on one machine in one
# hour), so one figure from the start of the run would not be the ceiling of rounds
# run minutes later. goal_tok_s is 1.3 x the peer's tok/s (the goal gaaw holds itself
# to on this path).
# The peer runs once per round under each OpenMP wait policy of TORCH_WAITS
# ("default": OMP_WAIT_POLICY unset; "passive"), and its figure is the best of their
# medians (peer_wait names it; peer_tok_s_WAIT gives each). gaaw runs in the
# environment as given (its OpenMP wait policy is its own choice, doc/benchmarks.md).
# OPENBLAS_CORETYPE defaults to Haswell (the machine's setting) when unset.
#
# PEER_BIN=OTHER_BUILD/bench/train_gpt makes the peer another gaaw build instead of
# PyTorch (peer=gaaw-peer, ratio = this build's tok/s over the other's), the same
# way, alternating: a before/after check of a change that must not slow training.
set -eu

ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-4}
WARMUP=${WARMUP:-2}
MODES=${MODES:-"1proc ddp2 zero1"}
ARCH=${ARCH:-gpt2}
THREADS=${THREADS:-2}
TORCH_WAITS=${TORCH_WAITS:-"default passive"}
here=$(cd "$(dirname "$0")" && pwd)
GAAW_BIN=${GAAW_BIN:-./bench/train_gpt}
TORCH_PY=${TORCH_PY:-$here/train_gpt_torch.py}
PYTHON=${PYTHON:-/usr/bin/python3}
PEER_BIN=${PEER_BIN:-}
peer_name=torch
[ -z "$PEER_BIN" ] || peer_name=gaaw-peer
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}

if [ ! -x "$GAAW_BIN" ]; then
  echo "train_gpt.sh: $GAAW_BIN not found; run from the build directory after make" >&2
  exit 2
fi

# shellcheck source=bench/bench_util.sh
. "$here/bench_util.sh"
# sgemm_peak: the machine's GEMM ceiling now, in GFLOP/s on THREADS threads (empty
# without bench/gemm or CBLAS).
GEMM_BIN=${GEMM_BIN:-./bench/gemm}
PEAK_SIZES=${PEAK_SIZES:-"1024 2048"}
sgemm_peak() {
  [ -x "$GEMM_BIN" ] || return 0
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS mpiexec -n 1 "$GEMM_BIN" $PEAK_SIZES |
    sed -n 's/.* peer_value=\([^ ]*\).*/\1/p' | sort -g | tail -1
}


for mode in $MODES; do
  case $mode in
    1proc) np=1 zero=0 tmode=plain ;;
    ddp2) np=2 zero=0 tmode=ddp ;;
    zero1) np=2 zero=1 tmode=zero1 ;;
    *) echo "train_gpt.sh: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  per_rank=$((THREADS / np))
  tokens=$((np * 8 * 128))
  [ "$per_rank" -ge 1 ] || per_rank=1
  export OMP_NUM_THREADS=$per_rank OPENBLAS_NUM_THREADS=$per_rank
  gaaw_cmd=(mpiexec -n "$np" "$GAAW_BIN" --steps "$STEPS" --warmup "$WARMUP" --zero "$zero" --tp 1
            --threads "$per_rank" --arch "$ARCH")
  torch_cmd=("$PYTHON" "$TORCH_PY" --mode "$tmode" --nproc "$np" --steps "$STEPS" --warmup "$WARMUP"
             --threads "$per_rank" --arch "$ARCH")
  peer_tag=train_gpt_torch
  if [ -n "$PEER_BIN" ]; then
    torch_cmd=("${gaaw_cmd[@]}")
    torch_cmd[3]=$PEER_BIN
    peer_tag=train_gpt_gaaw
  fi
  g_step=() g_cpu=() peaks=() shares=()
  declare -A t_step=() t_cpu=()
  peer_waits=$TORCH_WAITS
  [ -z "$PEER_BIN" ] || peer_waits=default
  for ((r = 0; r < ROUNDS; r++)); do
    # alternate which side goes first, so that a drift in machine load hits both
    if ((r % 2 == 0)); then order="gaaw $peer_waits"; else order="$peer_waits gaaw"; fi
    for side in $order; do
      if [ "$side" = gaaw ]; then
        peak=$(sgemm_peak)
        line=$(measure train_gpt_gaaw "${gaaw_cmd[@]}")
        g_step+=("$(field step_s "$line")") g_cpu+=("$(field cpu_s_per_step "$line")")
        g_loss=$(field loss_last "$line") flops=$(field model_flops_per_token "$line")
        if [ -n "$peak" ]; then
          peaks+=("$peak")
          shares+=("$(awk -v t="$tokens" -v s="${g_step[-1]}" -v f="$flops" -v p="$peak" \
                      'BEGIN { printf "%.4f", t / s * f * 1e-9 / p }')")
          line+=" sgemm_peak_gflops=$peak roofline_share=${shares[-1]}"
        fi
      else
        line=$(measure "$peer_tag" with_wait "$side" "${torch_cmd[@]}")
        t_step[$side]+=" $(field step_s "$line")" t_cpu[$side]+=" $(field cpu_s_per_step "$line")"
        t_loss=$(field loss_last "$line")
      fi
      echo "# mode=$mode round=$r${side:+ side=$side} $line" >&2
    done
  done
  gs=$(median "${g_step[@]}") gc=$(median "${g_cpu[@]}")
  peak="" share=""
  [ ${#peaks[@]} -eq 0 ] || peak=$(median "${peaks[@]}") share=$(median "${shares[@]}")
  # the peer's best wait policy: the lowest median step time
  ts="" tc="" best_wait="" per_wait=""
  for w in $peer_waits; do
    # shellcheck disable=SC2086
    s_w=$(median ${t_step[$w]}) c_w=$(median ${t_cpu[$w]})
    per_wait+=" peer_tok_s_$w=$(awk -v t="$tokens" -v s="$s_w" 'BEGIN { printf "%.1f", t / s }')"
    if [ -z "$ts" ] || awk -v a="$s_w" -v b="$ts" 'BEGIN { exit !(a < b) }'; then ts=$s_w tc=$c_w best_wait=$w; fi
  done
  awk -v mode="$mode" -v np="$np" -v zero="$zero" -v thr="$((per_rank * np))" -v steps="$STEPS" \
      -v rounds="$ROUNDS" -v tok="$tokens" -v gs="$gs" -v ts="$ts" -v gc="$gc" -v tc="$tc" \
      -v gl="$g_loss" -v tl="$t_loss" -v ct="$OPENBLAS_CORETYPE" -v fl="$flops" -v peak="$peak" \
      -v peer="$peer_name" -v wait="$best_wait" -v per="$per_wait" -v share="$share" -v arch="$ARCH" 'BEGIN {
    printf "bench=train_gpt arch=%s mode=%s np=%d tp=1 dp=%d zero=%d threads_total=%d batch=8 seq=128 steps=%d rounds=%d " \
           "value=%.1f unit=tok/s peer=%s peer_value=%.1f ratio=%.3f cpu_s_per_step=%.3f " \
           "peer_cpu_s_per_step=%.3f loss_last=%s peer_loss_last=%s openblas_coretype=%s " \
           "model_gflops=%.1f peer_model_gflops=%.1f sgemm_peak_gflops=%s roofline_share=%s ceiling_tok_s=%s " \
           "goal_tok_s=%.1f " \
           "peer_wait=%s%s\n",
           arch, mode, np, np, zero, thr, steps, rounds, tok / gs, peer, tok / ts, ts / gs, gc, tc, gl, tl, ct,
           tok / gs * fl * 1e-9, tok / ts * fl * 1e-9, peak == "" ? "na" : peak, share == "" ? "na" : share,
           peak == "" ? "na" : sprintf("%.1f", peak * 1e9 / fl), 1.3 * tok / ts, wait, per }'
done
