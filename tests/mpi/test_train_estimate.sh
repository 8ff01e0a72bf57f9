#!/bin/sh
# gaaw-train's memory estimate and --device-memory-limit, from the outside (it
# launches mpiexec itself), on 2 ranks (dp 2, ZeRO 1, host backend), 3 steps of a
# small GPT whose model state outweighs its activations (2 layers, dim 128, seq 16,
# one row per microbatch; 64 KiB ZeRO buckets, as a larger model has many):
#  (a) without a limit: rank 0 prints the "memory: estimated device peak X MiB" line
#      before the first step, and X is within 2% of the device peak the run reports
#      (device_peak_bytes of the last metrics line: the largest rank's
#      gaaw_memory_total peak);
#  (b) a limit below that estimate (5.25 MiB against about 6.2): exit 2 before any step
#      (no step line, no metrics line), one message on stderr that names the
#      estimate of (a), the limit in bytes, and --offload-optimizer host among the
#      changes that fit, with its estimate under the limit by the allocator's 1/8;
#  (c) the same limit with --offload-optimizer host: exit 0, its estimate line shows
#      the figure the refusal named for it (computed, not canned), and its measured
#      device peak stays under the limit;
#  (d) a limit between the estimate and the estimate plus 1/8: a warning on stderr,
#      and no refusal (exit 0, or 1 if the allocator's rounding does not fit).
# GAAW_TRAIN overrides the program (default ./examples/gaaw-train in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_estimate.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
small="--backend host --zero 1 --steps 3 --layers 2 --heads 2 --dim 128 --seq 16 --batch 1 --zero-bucket-bytes 65536
       --lr 0.005 --warmup 2 --eval-every 0 --eval-batches 1 --sample 0 --seed 7"
limit=5505024 # 5.25 MiB
# train NAME ARGS...: 2 ranks of gaaw-train with the small options and ARGS; metrics in
# $tmp/NAME.jsonl, stdout in $tmp/NAME.out, stderr in $tmp/NAME.err, status in $rc.
train() {
  name=$1
  shift
  : >"$tmp/$name.jsonl"
  timeout -k 5 120 $MPIEXEC -n 2 $prog $small "$@" --metrics "$tmp/$name.jsonl" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
}
# estimate NAME: the MiB of run NAME's estimate line
estimate() { sed -n 's/^memory: estimated device peak \([0-9.]*\) MiB per rank .*/\1/p' "$tmp/$1.out"; }
# peak NAME: device_peak_bytes of run NAME's last step
peak() { sed -n 's/.*"device_peak_bytes":\([0-9]*\).*/\1/p' "$tmp/$1.jsonl" | tail -1; }

# (a) the estimate against the measured peak
train none
if test $rc -ne 0; then
  err "(a) no limit: exit $rc"
  cat "$tmp/none.err"
else
  cat "$tmp/none.out"
  line=`grep -n '^memory: estimated device peak' "$tmp/none.out" | cut -d: -f1`
  step=`grep -n '^step  *1/' "$tmp/none.out" | head -1 | cut -d: -f1`
  test -n "$line" && test -n "$step" && test "$line" -lt "$step" ||
    err "(a) no estimate line before the first step (line '$line', first step '$step')"
  est=`estimate none`
  measured=`peak none`
  awk -v e="$est" -v m="$measured" 'BEGIN { e *= 1048576; d = e - m; if (d < 0) d = -d
                                            exit !(e > 0 && m > 0 && d <= 0.02 * m + 0.005 * 1048576) }' ||
    err "(a) the estimate $est MiB is not within 2% of the measured device peak $measured bytes"
  echo "(a) estimate $est MiB, measured device peak $measured bytes"
  awk -v e="$est" -v l=$limit 'BEGIN { exit !(e * 1048576 > l) }' ||
    err "(a) the estimate $est MiB is not above the 5.25 MiB limit (b) needs: change the model"
fi

# (b) the refusal
train refused --device-memory-limit 5376K
cat "$tmp/refused.err"
test $rc -eq 2 || err "(b) a limit below the estimate: exit $rc, expected 2"
grep '^step ' "$tmp/refused.out" >/dev/null && err "(b) training started: `grep '^step ' "$tmp/refused.out" | head -1`"
test -s "$tmp/refused.jsonl" && err "(b) metrics written: `head -1 "$tmp/refused.jsonl"`"
n=`grep -c 'exceeds --device-memory-limit' "$tmp/refused.err"`
test "$n" -eq 1 || err "(b) the refusal appears $n times on stderr, expected once"
grep "the estimated device peak, $est MiB per rank .* exceeds --device-memory-limit 5.25 MiB ($limit bytes)" \
  "$tmp/refused.err" >/dev/null || err "(b) the message does not name the estimate $est MiB and the limit $limit bytes"
# the changes that fit: the indented lines after "These fit it"
fits=`awk '/These fit it/ { on = 1; next } on && /^  --/ { print; next } { on = 0 }' "$tmp/refused.err"`
alt=`echo "$fits" | sed -n 's/^  --offload-optimizer host: \([0-9.]*\) MiB.*/\1/p'`
test -n "$alt" || err "(b) --offload-optimizer host is not among the changes that fit: '$fits'"
test -z "$fits" || echo "$fits" | while read flags; do
  mib=`echo "$flags" | sed -n 's/.*: \([0-9.]*\) MiB.*/\1/p'`
  awk -v e="$mib" -v l=$limit 'BEGIN { exit !(e != "" && e * 1048576 * 9 / 8 <= l + 0.01 * 1048576) }' ||
    { echo "FAIL: (b) '$flags' is named as fitting, but its estimate and 1/8 exceed the limit"; exit 1; }
done || fail=1

# (c) the change named trains under the same limit
train offload --device-memory-limit 5376K --offload-optimizer host
if test $rc -ne 0; then
  err "(c) --offload-optimizer host under the limit: exit $rc"
  cat "$tmp/offload.err"
else
  grep '^memory: ' "$tmp/offload.out"
  test "`estimate offload`" = "$alt" || err "(c) the estimate line says `estimate offload` MiB, the refusal said $alt"
  grep '^memory: .* | host [0-9.]* MiB | limit 5.25 MiB$' "$tmp/offload.out" >/dev/null ||
    err "(c) the estimate line does not give the host bytes and the limit"
  n=`grep -c '^{"step":' "$tmp/offload.jsonl"`
  test "$n" -eq 3 || err "(c) $n steps in the metrics, expected 3"
  p=`peak offload`
  test -n "$p" && test "$p" -le $limit || err "(c) the measured device peak $p bytes is not under the limit $limit"
  echo "(c) device peak $p bytes, limit $limit"
fi

# (d) a limit within the allocator's rounding of the estimate: a warning, no refusal
close=`awk -v e="$est" 'BEGIN { printf "%d", e * 1048576 * 1.03 / 1024 + 1 }'`
train close --device-memory-limit ${close}K
test $rc -eq 0 || test $rc -eq 1 || err "(d) a limit 3% above the estimate: exit $rc, expected 0 or 1"
grep 'warning: the estimated device peak .* is within 1/8 of --device-memory-limit' "$tmp/close.err" >/dev/null ||
  err "(d) a limit 3% above the estimate (${close}K): no warning: `cat "$tmp/close.err"`"
exit $fail
