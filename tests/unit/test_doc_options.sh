#!/bin/sh
# doc/options.md is generated: the committed page is exactly what the built
# `gaaw-info --markdown` prints, whatever the GAAW_* environment (the page shows
# defaults, not the values set now). On a difference, prints the diff and how to
# regenerate the page. Also checks that every row of the options table has five
# cells (a '|' inside a cell must be escaped) and names every tunable of
# backends/runtime/tunables.h (read here independently) with its GAAW_<NAME>, and
# that gaaw-info --help mentions --markdown.
prog=./examples/gaaw-info
top=${GAAW_TOP_SRCDIR:-.}
page=$top/doc/options.md
list=$top/backends/runtime/tunables.h
fail=0
err() { echo "FAIL: $*"; fail=1; }

test -f "$page" || { echo "FAIL: $page is missing (is doc/options.md in EXTRA_DIST?)"; exit 1; }
out=`mktemp "${TMPDIR:-/tmp}/gaaw-options.XXXXXX"` || exit 99
trap 'rm -f "$out"' 0
GAAW_TP=4 GAAW_LOG=error GAAW_PP_SCHEDULE=gpipe $prog --markdown >"$out"
rc=$?
test $rc -eq 0 || err "gaaw-info --markdown exited with $rc"
if ! diff -u "$page" "$out"; then
  err "doc/options.md differs from what gaaw-info --markdown prints (diff above: - committed, + generated);" \
    "run 'make update-doc' in the build directory and commit doc/options.md"
fi

$prog --help | grep -- '--markdown' >/dev/null || err "gaaw-info --help does not mention --markdown"

# every table row: | option | environment variable | type | default | meaning |
rows=$(grep -c '^| `' "$out")
bad=$(grep '^| `' "$out" | sed 's/\\|//g' | awk -F'|' 'NF != 7')
test -z "$bad" || err "table rows without exactly 5 cells (an unescaped '|'?): $bad"
names=`sed -n 's/^ *X(\([a-z_0-9]*\), *\(INT\|DOUBLE\|STRING\|BOOL\),.*/\1/p' "$list"`
test -n "$names" || err "no tunables read from $list"
count=0
for name in $names; do
  count=`expr $count + 1`
  env=GAAW_`echo $name | tr a-z A-Z`
  grep "^| \`$name\` | \`$env\` | [a-z]* | \`" "$out" >/dev/null || err "tunable $name ($env) is not a row of the page"
done
test "$rows" -eq "$count" || err "the page has $rows option rows, tunables.h declares $count"
test $fail -eq 0 && echo "doc/options.md: $rows options, as gaaw-info --markdown prints them"
exit $fail
