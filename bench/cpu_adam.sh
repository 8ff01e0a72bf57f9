#!/bin/bash
# CPU Adam (bench/cpu_adam: each SIMD version, f32 and bf16) against PyTorch 1.13's
# torch.optim.AdamW (bench/cpu_adam_torch.py: f32, foreach off and on) and against the
# STREAM triad bandwidth of the same run, on ELEMENTS elements and THREADS threads on
# both sides. Each round runs gaaw once and PyTorch once per OMP_WAIT_POLICY in
# TORCH_WAITS ("default": unset; "passive"), alternating which side goes first; a
# figure is the median over ROUNDS rounds of each run's median. gaaw runs with
# OMP_WAIT_POLICY unset. The peer is PyTorch's best (foreach, wait) variant.
# OPENBLAS_* and the other variables are left as given (AdamW calls no BLAS); the
# result lines name OPENBLAS_CORETYPE.
#
# Run from the build directory:
#   [ROUNDS=3] [ELEMENTS=16777216] [THREADS=2] [REPEATS=7] [TORCH_WAITS="default passive"]
#   SRCDIR/bench/cpu_adam.sh
# One line per PyTorch variant, then one per gaaw configuration:
#   bench=cpu_adam_torch foreach=F wait=W elements=N threads=T rounds=R value=Y unit=elements/s
#   bench=cpu_adam simd=V dtype=D elements=N threads=T rounds=R value=X unit=elements/s
#   bytes_per_element=B gbytes_s=.. stream_gbytes_s=.. stream_fraction=.. goal_stream_fraction=0.8
#   incache=.. incache_stream_fraction=.. peer=torch peer_dtype=f32 peer_value=Y peer_setting=foreach=F,wait=W ratio=X/Y
#   goal_ratio=5 stream_ceiling_ratio=.. openblas_coretype=..
# then the same as a table (lines starting with '#'). bytes_per_element is what one
# update must move (bench/cpu_adam.c: f32 32, bf16 28); stream_fraction = value x
# bytes_per_element / the triad's bytes/s (3 x 8 B per element, STREAM's count),
# the median of each run's own fraction. incache is the version's elements/s on a
# piece inside the cache (bench/cpu_adam.c; the best run's, being a ceiling), and incache_stream_fraction = incache x
# bytes_per_element / the triad's bytes/s: the fraction this version could reach if
# memory cost it nothing (below 0.8, the goal is out of its reach). stream_ceiling_ratio = (the triad's bytes/s
# / bytes_per_element) / peer_value: the ratio gaaw would reach moving its bytes at
# the triad's rate. PyTorch has no bf16-weights-over-f32-master AdamW on CPU, so the
# bf16 rows are compared with its f32 figure (peer_dtype=f32). Every run's own lines
# go to stderr. Exits 1 when a version's bits differ from the scalar version's
# (bench/cpu_adam's check).
set -eu

ROUNDS=${ROUNDS:-3}
ELEMENTS=${ELEMENTS:-16777216}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-7}
TORCH_WAITS=${TORCH_WAITS:-"default passive"}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
here=$(cd "$(dirname "$0")" && pwd)
GAAW_BIN=${GAAW_BIN:-./bench/cpu_adam}
TORCH_PY=${TORCH_PY:-$here/cpu_adam_torch.py}
PYTHON=${PYTHON:-/usr/bin/python3}

if [ ! -x "$GAAW_BIN" ]; then
  echo "cpu_adam.sh: $GAAW_BIN not found; run from the build directory after make" >&2
  exit 2
fi
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "cpu_adam.sh: $PYTHON has no torch; nothing to compare against" >&2
  exit 77
fi

# shellcheck source=bench/bench_util.sh
. "$here/bench_util.sh"

declare -A g_value=() g_fraction=() g_incache=() g_bytes=() t_value=()
stream=""
keys=()
differs=0
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then order="gaaw torch"; else order="torch gaaw"; fi
  for side in $order; do
    if [ "$side" = gaaw ]; then
      out=$(measure 'cpu_adam\(_stream\)\?' with_wait default "$GAAW_BIN" --elements "$ELEMENTS" \
            --threads "$THREADS" --repeats "$REPEATS")
      echo "$out" | sed "s/^/# round=$r /" >&2
      while read -r line; do
        case $line in
          cpu_adam_stream*) stream="$stream $(field value "$line")" ;;
          cpu_adam*)
            key="$(field simd "$line")/$(field dtype "$line")"
            [ -n "${g_bytes[$key]:-}" ] || keys+=("$key")
            g_bytes[$key]=$(field bytes_per_element "$line")
            g_value[$key]="${g_value[$key]:-} $(field value "$line")"
            g_fraction[$key]="${g_fraction[$key]:-} $(field stream_fraction "$line")"
            g_incache[$key]="${g_incache[$key]:-} $(field incache "$line")"
            if [ "$(field same_bits "$line")" != 1 ]; then
              echo "cpu_adam.sh: $key does not give the scalar version's bits" >&2
              differs=1
            fi
            ;;
        esac
      done <<<"$out"
    else
      for wait in $TORCH_WAITS; do
        out=$(measure cpu_adam_torch with_wait "$wait" "$PYTHON" "$TORCH_PY" --elements "$ELEMENTS" \
              --threads "$THREADS" --repeats "$REPEATS")
        echo "$out" | sed "s/^/# round=$r wait=$wait /" >&2
        while read -r line; do
          key="$(field foreach "$line")/$wait"
          t_value[$key]="${t_value[$key]:-} $(field value "$line")"
        done <<<"$out"
      done
    fi
  done
done

coretype=${OPENBLAS_CORETYPE:-unset}
# shellcheck disable=SC2086
stream_gbs=$(median $stream)
# PyTorch's variants, and the best
best="" best_key=""
for wait in $TORCH_WAITS; do
  for foreach in 0 1; do
    # shellcheck disable=SC2086
    v=$(median ${t_value[$foreach/$wait]} | awk '{printf "%.4g", $1}')
    echo "bench=cpu_adam_torch foreach=$foreach wait=$wait elements=$ELEMENTS threads=$THREADS rounds=$ROUNDS" \
         "value=$v unit=elements/s openblas_coretype=$coretype"
    if [ -z "$best" ] || awk -v a="$v" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$v best_key=$foreach/$wait; fi
  done
done
peer_setting="foreach=${best_key%/*},wait=${best_key#*/}"

results=()
for key in "${keys[@]}"; do
  # shellcheck disable=SC2086
  v=$(median ${g_value[$key]}) f=$(median ${g_fraction[$key]})
  c=$(printf '%s\n' ${g_incache[$key]} | sort -g | tail -1) # a ceiling: the best run's
  results+=("$(awk -v simd="${key%/*}" -v dtype="${key#*/}" -v n="$ELEMENTS" -v t="$THREADS" -v rounds="$ROUNDS" \
      -v v="$v" -v b="${g_bytes[$key]}" -v s="$stream_gbs" -v f="$f" -v c="$c" -v p="$best" -v ps="$peer_setting" \
      -v ct="$coretype" 'BEGIN {
    printf "bench=cpu_adam simd=%s dtype=%s elements=%d threads=%d rounds=%d value=%.4g unit=elements/s " \
           "bytes_per_element=%d gbytes_s=%.2f stream_gbytes_s=%.2f stream_fraction=%.3f goal_stream_fraction=0.8 " \
           "incache=%.4g incache_stream_fraction=%.3f peer=torch peer_dtype=f32 peer_value=%.4g peer_setting=%s ratio=%.2f goal_ratio=5 " \
           "stream_ceiling_ratio=%.2f openblas_coretype=%s\n",
           simd, dtype, n, t, rounds, v, b, 1e-9 * v * b, s, f, c, 1e-9 * c * b / s, p, ps, v / p, 1e9 * s / b / p,
           ct }')")
  echo "${results[-1]}"
done

echo "# simd   dtype | gaaw elements/s  GB/s (B/elem)  of STREAM | in cache (of STREAM) |" \
     "torch best (setting)  ratio | STREAM-rate ceiling ratio"
for line in "${results[@]}"; do
  printf '# %-6s %-5s | %10s %6s (%s) %6s | %10s (%s) | %10s (%s) %5s | %5s\n' "$(field simd "$line")" \
    "$(field dtype "$line")" "$(field value "$line")" "$(field gbytes_s "$line")" \
    "$(field bytes_per_element "$line")" "$(field stream_fraction "$line")" "$(field incache "$line")" \
    "$(field incache_stream_fraction "$line")" \
    "$(field peer_value "$line")" "$(field peer_setting "$line")" "$(field ratio "$line")" \
    "$(field stream_ceiling_ratio "$line")"
done
echo "# STREAM triad (f64, 24 B/elem counted): $stream_gbs GB/s; threads $THREADS; elements $ELEMENTS;" \
     "OPENBLAS_CORETYPE=$coretype"
exit "$differs"
