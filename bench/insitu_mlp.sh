#!/bin/bash
# An in-situ MLP surrogate (8 -> 256 -> 256 -> 8, GELU tanh, MSE, AdamW), gaaw
# (bench/insitu_mlp) against PyTorch (bench/insitu_mlp_torch.py) side by side in one
# run: training samples/s and predict latency for each batch of BATCHES (per
# process), in two modes:
#   1proc  gaaw 1 rank, 2 threads               vs PyTorch in one process
#   dp2    gaaw dp 2 (mpiexec -n 2), 1 thread   vs PyTorch DDP (gloo, 127.0.0.1),
#          per rank                                2 processes x 1 thread
# PyTorch gets its best setting: every variant of TORCH_1PROC (1proc) or TORCH_DP2
# (dp2), each "THREADS:WAIT" (torch.set_num_threads, and OMP_WAIT_POLICY unset
# (default) or passive), runs in every round, and the best median per figure is
# compared (and named in the result line). gaaw runs with `threads` = cores / ranks
# (its default) and the environment as given. OPENBLAS_NUM_THREADS is left as given
# (gaaw sets OpenBLAS to one thread and splits GEMMs over its OpenMP threads).
# Each round runs gaaw and every PyTorch variant once per (mode, batch), alternating
# which side goes first; a figure is the median over ROUNDS rounds of each run's
# median step (predict) time.
#
# Run from the build directory:
#   [ROUNDS=3] [BATCHES="64 1024 16384"] [MODES="1proc dp2"] [GAAW_ARGS=...]
#   [TORCH_1PROC="1:default 1:passive 2:default 2:passive"] [TORCH_DP2="1:default 1:passive"]
#   SRCDIR/bench/insitu_mlp.sh
# One line per (mode, batch):
#   bench=insitu_mlp mode=M np=P batch=B threads_per_rank=T rounds=R value=X unit=samples/s
#   peer=torch peer_value=Y peer_setting=threads=N,wait=W ratio=X/Y goal_ratio=G
#   predict_ms=.. peer_predict_ms=.. peer_predict_setting=.. predict_ratio=peer/gaaw
#   cpu_s_per_step=.. peer_cpu_s_per_step=.. openblas_coretype=..
# then the same as a table (lines starting with '#'). samples/s counts every rank's
# batch; goal_ratio is the issue's goal (2 at batch <= 64, 1.2 above). Steps per run:
# STEP_SAMPLES / batch, at least MIN_STEPS (predicts: the same count).
# OPENBLAS_CORETYPE defaults to Haswell (the machine's setting) when unset.
set -eu

ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-"64 1024 16384"}
MODES=${MODES:-"1proc dp2"}
TORCH_1PROC=${TORCH_1PROC:-"1:default 1:passive 2:default 2:passive"}
TORCH_DP2=${TORCH_DP2:-"1:default 1:passive"}
STEP_SAMPLES=${STEP_SAMPLES:-20000}
MIN_STEPS=${MIN_STEPS:-10}
GAAW_ARGS=${GAAW_ARGS:-}
CORES=${CORES:-2}
here=$(cd "$(dirname "$0")" && pwd)
GAAW_BIN=${GAAW_BIN:-./bench/insitu_mlp}
TORCH_PY=${TORCH_PY:-$here/insitu_mlp_torch.py}
PYTHON=${PYTHON:-/usr/bin/python3}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}

if [ ! -x "$GAAW_BIN" ]; then
  echo "insitu_mlp.sh: $GAAW_BIN not found; run from the build directory after make" >&2
  exit 2
fi
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "insitu_mlp.sh: $PYTHON has no torch; nothing to compare against" >&2
  exit 77
fi

# Runs a side and prints its result line; a launch that yields none (a crash) is
# retried once, loudly.
measure() {
  local tag=$1 out
  shift
  for attempt in 1 2; do
    if out=$("$@" | grep "^$tag "); then
      echo "$out"
      return 0
    fi
    echo "insitu_mlp.sh: '$*' gave no $tag line (attempt $attempt)" >&2
  done
  return 1
}
# key=value lookup in a result line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
# median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
# one PyTorch variant "THREADS:WAIT"
torch_run() {
  local threads=${1%%:*} wait=${1#*:}
  shift
  if [ "$wait" = default ]; then
    env -u OMP_WAIT_POLICY "$PYTHON" "$TORCH_PY" --threads "$threads" "$@"
  else
    OMP_WAIT_POLICY=$wait "$PYTHON" "$TORCH_PY" --threads "$threads" "$@"
  fi
}

results=()
for mode in $MODES; do
  case $mode in
    1proc) np=1 variants=$TORCH_1PROC ;;
    dp2) np=2 variants=$TORCH_DP2 ;;
    *) echo "insitu_mlp.sh: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  per_rank=$((CORES / np))
  [ "$per_rank" -ge 1 ] || per_rank=1
  for batch in $BATCHES; do
    steps=$((STEP_SAMPLES / batch))
    [ "$steps" -ge "$MIN_STEPS" ] || steps=$MIN_STEPS
    common=(--batch "$batch" --steps "$steps" --predicts "$steps")
    # shellcheck disable=SC2086
    gaaw_cmd=(mpiexec -n "$np" "$GAAW_BIN" "${common[@]}" --threads "$per_rank" $GAAW_ARGS)
    declare -A t_step=() t_pred=() t_cpu=()
    g_step=() g_pred=() g_cpu=()
    for ((r = 0; r < ROUNDS; r++)); do
      # alternate which side goes first, so that a drift in machine load hits both
      if ((r % 2 == 0)); then order="gaaw torch"; else order="torch gaaw"; fi
      for side in $order; do
        if [ "$side" = gaaw ]; then
          line=$(measure insitu_mlp_gaaw "${gaaw_cmd[@]}")
          g_step+=("$(field step_s "$line")") g_pred+=("$(field predict_s "$line")")
          g_cpu+=("$(field cpu_s_per_step "$line")")
          echo "# mode=$mode batch=$batch round=$r $line" >&2
        else
          for v in $variants; do
            line=$(measure insitu_mlp_torch torch_run "$v" --nproc "$np" "${common[@]}")
            t_step[$v]="${t_step[$v]:-} $(field step_s "$line")" t_pred[$v]="${t_pred[$v]:-} $(field predict_s "$line")"
            t_cpu[$v]="${t_cpu[$v]:-} $(field cpu_s_per_step "$line")"
            echo "# mode=$mode batch=$batch round=$r wait=${v#*:} $line" >&2
          done
        fi
      done
    done
    gs=$(median "${g_step[@]}") gp=$(median "${g_pred[@]}") gc=$(median "${g_cpu[@]}")
    ts="" tp="" tc="" tv="" tpv=""
    for v in $variants; do
      # shellcheck disable=SC2086
      s=$(median ${t_step[$v]}) p=$(median ${t_pred[$v]}) c=$(median ${t_cpu[$v]})
      if [ -z "$ts" ] || awk -v a="$s" -v b="$ts" 'BEGIN {exit !(a < b)}'; then ts=$s tc=$c tv=$v; fi
      if [ -z "$tp" ] || awk -v a="$p" -v b="$tp" 'BEGIN {exit !(a < b)}'; then tp=$p tpv=$v; fi
    done
    unset t_step t_pred t_cpu
    results+=("$(awk -v mode="$mode" -v np="$np" -v b="$batch" -v thr="$per_rank" -v rounds="$ROUNDS" \
        -v gs="$gs" -v gp="$gp" -v gc="$gc" -v ts="$ts" -v tp="$tp" -v tc="$tc" -v tv="$tv" -v tpv="$tpv" \
        -v ct="$OPENBLAS_CORETYPE" 'BEGIN {
      split(tv, a, ":"); split(tpv, p, ":")
      printf "bench=insitu_mlp mode=%s np=%d batch=%d threads_per_rank=%d rounds=%d value=%.1f unit=samples/s " \
             "peer=torch peer_value=%.1f peer_setting=threads=%s,wait=%s ratio=%.3f goal_ratio=%s " \
             "predict_ms=%.4f peer_predict_ms=%.4f peer_predict_setting=threads=%s,wait=%s predict_ratio=%.3f " \
             "cpu_s_per_step=%.6f peer_cpu_s_per_step=%.6f openblas_coretype=%s\n",
             mode, np, b, thr, rounds, np * b / gs, np * b / ts, a[1], a[2], ts / gs, b <= 64 ? "2" : "1.2",
             1e3 * gp, 1e3 * tp, p[1], p[2], tp / gp, gc, tc, ct }')")
    echo "${results[-1]}"
  done
done

echo "# mode  np  batch | gaaw samples/s  torch samples/s (setting)  ratio goal | gaaw predict ms  torch predict ms (setting)  ratio"
for line in "${results[@]}"; do
  printf '# %-5s %3s %6s | %14s %16s (%s) %6s %4s | %15s %16s (%s) %6s\n' "$(field mode "$line")" \
    "$(field np "$line")" "$(field batch "$line")" "$(field value "$line")" "$(field peer_value "$line")" \
    "$(field peer_setting "$line")" "$(field ratio "$line")" "$(field goal_ratio "$line")" \
    "$(field predict_ms "$line")" "$(field peer_predict_ms "$line")" "$(field peer_predict_setting "$line")" \
    "$(field predict_ratio "$line")"
done
