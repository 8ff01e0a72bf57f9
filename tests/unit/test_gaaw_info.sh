#!/bin/sh
# gaaw-info runs without mpiexec; lists every tunable of backends/runtime/tunables.h
# (read here independently) with its GAAW_<NAME> variable; shows an option the
# environment changed; --help gives usage and 0; an unknown option usage and 2.
# --schedule prints a pipeline schedule's timeline (one row per rank), its bubble and
# each rank's peak in flight (DESIGN.md section 10's numbers); an invalid one exits 2
# naming the numbers.
prog=./examples/gaaw-info
list=${GAAW_TOP_SRCDIR:-.}/backends/runtime/tunables.h
fail=0
err() { echo "FAIL: $*"; fail=1; }

out=`GAAW_TP=4 $prog 2>&1`
rc=$?
echo "$out" | sed -n 1,12p
test $rc -eq 0 || err "gaaw-info exited with $rc"
echo "$out" | grep '^gaaw [0-9]*\.[0-9]*\.[0-9]*' >/dev/null || err "no version line"
echo "$out" | grep '^  host  *1 device$' >/dev/null || err "the host backend and its device are not listed"
# the host device's description follows its backend line
echo "$out" | grep -A1 '^  host  *1 device$' | grep '^    \[0\] .* | [0-9.]* GiB | [1-9][0-9]* compute units | fp16 \(yes\|no\) | bf16 \(yes\|no\)$' >/dev/null ||
  err "the host device is not described (name, memory, compute units, fp16, bf16)"
echo "$out" | grep '^  tp .*env GAAW_TP  (now 4, from env)$' >/dev/null || err "GAAW_TP=4 is not shown as tp's current value"

names=`sed -n 's/^ *X(\([a-z_0-9]*\), *\(INT\|DOUBLE\|STRING\|BOOL\),.*/\1/p' "$list"`
test -n "$names" || err "no tunables read from $list"
for name in $names; do
  env=GAAW_`echo $name | tr a-z A-Z`
  echo "$out" | grep "^  $name  *[a-z]*  *default .* env $env\( \|$\)" >/dev/null || err "tunable $name ($env) not listed"
done

help=`$prog --help 2>/dev/null`
rc=$?
test $rc -eq 0 || err "--help exited with $rc"
echo "$help" | grep '^usage: gaaw-info' >/dev/null || err "--help does not print usage on stdout"

bad=`$prog --no-such-option 2>&1 >/dev/null`
rc=$?
test $rc -eq 2 || err "--no-such-option exited with $rc, expected 2"
echo "$bad" | grep "unknown option '--no-such-option'" >/dev/null || err "--no-such-option is not named on stderr"
echo "$bad" | grep '^usage: gaaw-info' >/dev/null || err "--no-such-option gives no usage on stderr"
# 1F1B on 4 stages, 8 microbatches: bubble (p-1)/(m+p-1) = 3/11, peaks min(p - r, m)
out=`$prog --schedule 1f1b --pp 4 --microbatches 8 2>&1`
rc=$?
echo "$out" | sed -n 1,8p
test $rc -eq 0 || err "--schedule 1f1b exited with $rc"
echo "$out" | grep '^rank 0 |F0  F1  F2  F3  \.  ' >/dev/null || err "rank 0 does not start with four forwards"
echo "$out" | grep '^rank 3 |\.   \.   \.   F0  BW0 ~   F1 ' >/dev/null || err "rank 3's row is not 1F1B's"
test `echo "$out" | grep -c '^rank [0-9] |'` -eq 4 || err "not one row per rank"
echo "$out" | grep '^bubble  *0\.2727 = idle 36 / (pp 4 x makespan 33)' >/dev/null || err "1f1b bubble is not 3/11"
echo "$out" | grep '^peak in flight  4 3 2 1 ' >/dev/null || err "1f1b peaks are not 4 3 2 1"

# ZB-H1 splits the backward; interleaved names the chunk; --opt=value works too
out=`$prog --schedule=zb-h1 --pp=4 --microbatches=8 2>&1`
echo "$out" | grep '^rank 3 |\.  \.  \.  F0 B0 F1 B1 ' >/dev/null || err "zb-h1's last rank does not run F B in turn"
echo "$out" | grep '^bubble  *0\.1111 = idle 12 ' >/dev/null || err "zb-h1 idle is not a third of 1f1b's 36"
echo "$out" | grep '^peak in flight  4 4 4 4 ' >/dev/null || err "zb-h1 peaks are not p on every rank"
out=`$prog --schedule interleaved --pp 2 --microbatches 4 --virtual-stages 2 2>&1`
echo "$out" | grep '^rank 1 |.* F0\.1 ' >/dev/null || err "interleaved cells do not name the chunk"
echo "$out" | grep '^bubble  *0\.1111 ' >/dev/null || err "interleaved bubble is not (p-1)/(v m + p-1) = 1/9"

# refusals: m not a multiple of p for interleaved; a missing --microbatches
bad=`$prog --schedule interleaved --pp 4 --microbatches 6 --virtual-stages 2 2>&1 >/dev/null`
rc=$?
test $rc -eq 2 || err "interleaved pp 4 m 6 exited with $rc, expected 2"
echo "$bad" | grep 'microbatches (6) to be a multiple of pp (4)' >/dev/null || err "the refusal does not name m and p: $bad"
bad=`$prog --schedule 1f1b --pp 4 2>&1 >/dev/null`
test $? -eq 2 || err "--schedule without --microbatches did not exit 2"
bad=`$prog --schedule 1f1b --pp x --microbatches 2 2>&1 >/dev/null`
test $? -eq 2 || err "--pp x did not exit 2"
echo "$bad" | grep "pp wants a whole number >= 1, got 'x'" >/dev/null || err "--pp x is not named: $bad"
exit $fail
