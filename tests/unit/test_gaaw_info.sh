#!/bin/sh
# gaaw-info runs without mpiexec; lists every tunable of backends/runtime/tunables.h
# (read here independently) with its GAAW_<NAME> variable; shows an option the
# environment changed; --help gives usage and 0; an unknown option usage and 2.
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
exit $fail
