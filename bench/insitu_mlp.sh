#!/bin/bash
# An in-situ MLP surrogate (8 -> 256 -> 256 -> 8, GELU tanh, MSE, AdamW), gaaw
# (bench/insitu_mlp) against PyTorch (bench/insitu_mlp_torch.py) side by side in one
# run: training samples/s and predict latency for each batch of BATCHES (per
# process), in two modes on the machine's cores:
#   1proc  gaaw 1 rank                 vs PyTorch in one process
#   dp2    gaaw dp 2 (mpiexec -n 2)    vs PyTorch DDP (gloo, 127.0.0.1), 2 processes
# Each side gets its best setting: every variant "THREADS:WAIT" of GAAW_1PROC and
# TORCH_1PROC (1proc), GAAW_DP2 and TORCH_DP2 (dp2) runs in every round; THREADS is
# per process (gaaw's `threads` option; torch.set_num_threads), WAIT is
# OMP_WAIT_POLICY: "default" (unset) or "passive". The best median of each side
# is compared, per figure, and its setting named in the result line. The defaults
# suit 2 cores (dp2: one thread per rank). OPENBLAS_NUM_THREADS is left as given (gaaw sets OpenBLAS
# to one thread and splits GEMMs over its OpenMP threads).
# Each round runs every variant of both sides once per (mode, batch), alternating
# which side goes first; a variant's figure is the median over ROUNDS rounds of each
# run's median step (predict) time.
#
# Run from the build directory:
#   [ROUNDS=3] [BATCHES="64 1024 16384"] [MODES="1proc dp2"] [GAAW_ARGS=...]
#   [GAAW_1PROC="2:default 1:default"] [TORCH_1PROC="1:default 1:passive 2:default 2:passive"]
#   [GAAW_DP2="1:default"] [TORCH_DP2="1:default 1:passive"] SRCDIR/bench/insitu_mlp.sh
# One line per (mode, batch):
#   bench=insitu_mlp mode=M np=P batch=B rounds=R value=X unit=samples/s setting=threads=N,wait=W
#   peer=torch peer_value=Y peer_setting=threads=N,wait=W ratio=X/Y goal_ratio=G
#   predict_ms=.. predict_setting=.. peer_predict_ms=.. peer_predict_setting=..
#   predict_ratio=peer/gaaw cpu_s_per_step=.. peer_cpu_s_per_step=.. openblas_coretype=..
# then the same as a table (lines starting with '#'). samples/s counts every rank's
# batch; goal_ratio is the issue's goal (2 at batch <= 64, 1.2 above); cpu_s_per_step
# (user + system time of all threads of all processes per step) is the best
# variant's. A run that takes over RUN_TIMEOUT (300) seconds is killed and retried
# once. Steps per run: STEP_SAMPLES / batch, at least MIN_STEPS (predicts: the
# same count). Every run's own line goes to stderr.
# OPENBLAS_CORETYPE defaults to Haswell (the machine's setting) when unset.
set -eu

ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-"64 1024 16384"}
MODES=${MODES:-"1proc dp2"}
GAAW_1PROC=${GAAW_1PROC:-"2:default 1:default"}
TORCH_1PROC=${TORCH_1PROC:-"1:default 1:passive 2:default 2:passive"}
GAAW_DP2=${GAAW_DP2:-"1:default"}
TORCH_DP2=${TORCH_DP2:-"1:default 1:passive"}
STEP_SAMPLES=${STEP_SAMPLES:-20000}
MIN_STEPS=${MIN_STEPS:-10}
GAAW_ARGS=${GAAW_ARGS:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
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

# shellcheck source=bench/bench_util.sh
. "$here/bench_util.sh"
# is $1 < $2 (or $2 empty)?
is_less() { [ -z "$2" ] || awk -v a="$1" -v b="$2" 'BEGIN {exit !(a < b)}'; }

results=()
for mode in $MODES; do
  case $mode in
    1proc) np=1 gaaw_variants=$GAAW_1PROC torch_variants=$TORCH_1PROC ;;
    dp2) np=2 gaaw_variants=$GAAW_DP2 torch_variants=$TORCH_DP2 ;;
    *) echo "insitu_mlp.sh: unknown mode '$mode'" >&2; exit 2 ;;
  esac
  for batch in $BATCHES; do
    steps=$((STEP_SAMPLES / batch))
    [ "$steps" -ge "$MIN_STEPS" ] || steps=$MIN_STEPS
    common=(--batch "$batch" --steps "$steps" --predicts "$steps")
    declare -A t_step=() t_pred=() t_cpu=()
    for ((r = 0; r < ROUNDS; r++)); do
      # alternate which side goes first, so that a drift in machine load hits both
      if ((r % 2 == 0)); then order="gaaw torch"; else order="torch gaaw"; fi
      for side in $order; do
        if [ "$side" = gaaw ]; then variants=$gaaw_variants; else variants=$torch_variants; fi
        for v in $variants; do
          threads=${v%%:*} wait=${v#*:}
          if [ "$side" = gaaw ]; then
            # shellcheck disable=SC2086
            line=$(measure insitu_mlp_gaaw with_wait "$wait" mpiexec -n "$np" "$GAAW_BIN" "${common[@]}" \
                   --threads "$threads" $GAAW_ARGS)
          else
            line=$(measure insitu_mlp_torch with_wait "$wait" "$PYTHON" "$TORCH_PY" --nproc "$np" "${common[@]}" \
                   --threads "$threads")
          fi
          key="$side/$v"
          t_step[$key]="${t_step[$key]:-} $(field step_s "$line")"
          t_pred[$key]="${t_pred[$key]:-} $(field predict_s "$line")"
          t_cpu[$key]="${t_cpu[$key]:-} $(field cpu_s_per_step "$line")"
          echo "# mode=$mode batch=$batch round=$r wait=$wait $line" >&2
        done
      done
    done
    # each side's best variant, per figure
    for side in gaaw torch; do
      if [ "$side" = gaaw ]; then variants=$gaaw_variants; else variants=$torch_variants; fi
      bs="" bp="" bc="" bv="" bpv=""
      for v in $variants; do
        # shellcheck disable=SC2086
        s=$(median ${t_step[$side/$v]}) p=$(median ${t_pred[$side/$v]}) c=$(median ${t_cpu[$side/$v]})
        if is_less "$s" "$bs"; then bs=$s bc=$c bv=$v; fi
        if is_less "$p" "$bp"; then bp=$p bpv=$v; fi
      done
      if [ "$side" = gaaw ]; then gs=$bs gp=$bp gc=$bc gv=$bv gpv=$bpv; else ts=$bs tp=$bp tc=$bc tv=$bv tpv=$bpv; fi
    done
    unset t_step t_pred t_cpu
    results+=("$(awk -v mode="$mode" -v np="$np" -v b="$batch" -v rounds="$ROUNDS" -v gs="$gs" -v gp="$gp" \
        -v gc="$gc" -v gv="$gv" -v gpv="$gpv" -v ts="$ts" -v tp="$tp" -v tc="$tc" -v tv="$tv" -v tpv="$tpv" \
        -v ct="$OPENBLAS_CORETYPE" '
      function setting(v, parts) { split(v, parts, ":"); return "threads=" parts[1] ",wait=" parts[2] }
      BEGIN {
      printf "bench=insitu_mlp mode=%s np=%d batch=%d rounds=%d value=%.1f unit=samples/s setting=%s " \
             "peer=torch peer_value=%.1f peer_setting=%s ratio=%.3f goal_ratio=%s predict_ms=%.4f " \
             "predict_setting=%s peer_predict_ms=%.4f peer_predict_setting=%s predict_ratio=%.3f " \
             "cpu_s_per_step=%.6f peer_cpu_s_per_step=%.6f openblas_coretype=%s\n",
             mode, np, b, rounds, np * b / gs, setting(gv), np * b / ts, setting(tv), ts / gs,
             b <= 64 ? "2" : "1.2", 1e3 * gp, setting(gpv), 1e3 * tp, setting(tpv), tp / gp, gc, tc, ct }')")
    echo "${results[-1]}"
  done
done

echo "# mode  np  batch | gaaw samples/s (setting)  torch samples/s (setting)  ratio goal |" \
     "gaaw predict ms (setting)  torch predict ms (setting)  torch/gaaw"
for line in "${results[@]}"; do
  printf '# %-5s %3s %6s | %10s (%s) %10s (%s) %6s %4s | %8s (%s) %8s (%s) %6s\n' "$(field mode "$line")" \
    "$(field np "$line")" "$(field batch "$line")" "$(field value "$line")" "$(field setting "$line")" \
    "$(field peer_value "$line")" "$(field peer_setting "$line")" "$(field ratio "$line")" \
    "$(field goal_ratio "$line")" "$(field predict_ms "$line")" "$(field predict_setting "$line")" \
    "$(field peer_predict_ms "$line")" "$(field peer_predict_setting "$line")" "$(field predict_ratio "$line")"
done
