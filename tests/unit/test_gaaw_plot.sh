#!/bin/sh
# gaaw-plot draws metrics files (tests/unit/gaaw_plot_a.jsonl with val_loss and a null
# loss; gaaw_plot_b.jsonl without val_loss, with tflops and mfu and an unknown key):
#  - refusals, with exit 2 and a message naming the file (and the line): no such
#    file, a line that is not JSON, a line without "step", a field that is not a
#    number, no -o, an output directory that is a regular file; --help exits 0;
#  - a GAAW_GNUPLOT that is not a program: exit 1, saying how to install gnuplot,
#    and --check too (which with a gnuplot exits 0 and names it);
#  - with gnuplot (skipped, 77, without one): one file gives loss, lr, grad_norm,
#    throughput and memory as SVG and PNG (no tflops or mfu plot: the file has
#    neither), each SVG naming its series; two files overlay, one series per file
#    and field titled by the file's base name, b's tflops and mfu plotted, no
#    validation series for b.
prog=./examples/gaaw-plot
src=${GAAW_TOP_SRCDIR:-.}/tests/unit
a=$src/gaaw_plot_a.jsonl
b=$src/gaaw_plot_b.jsonl
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_gaaw_plot.XXXXXX` || exit 99
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
# plot ARGS...: stdout in $tmp/out, stderr in $tmp/err, status in $rc
plot() {
  "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
# refused STATUS WHAT PATTERN ARGS...: exit STATUS and PATTERN on stderr
refused() {
  status=$1 what=$2 pattern=$3
  shift 3
  plot "$@"
  test $rc -eq $status || err "$what: exit $rc, expected $status: `cat $tmp/err`"
  grep -- "$pattern" "$tmp/err" >/dev/null || err "$what: no '$pattern' on stderr: `cat $tmp/err`"
}

plot --help
test $rc -eq 0 || err "--help exited with $rc"
grep '^usage: gaaw-plot -o DIR FILE' "$tmp/out" >/dev/null || err "--help prints no usage"
refused 2 "missing file" "cannot read the metrics file '$tmp/none.jsonl'" -o "$tmp/p" "$a" "$tmp/none.jsonl"
head -2 "$a" >"$tmp/bad.jsonl"
echo '{"step":3,"loss":' >>"$tmp/bad.jsonl"
refused 2 "bad JSON line" "$tmp/bad.jsonl:3: not JSON" -o "$tmp/p" "$tmp/bad.jsonl"
echo '{"loss":2}' >"$tmp/nostep.jsonl"
refused 2 "no step" "$tmp/nostep.jsonl:1: not a metrics line: no \"step\"" -o "$tmp/p" "$tmp/nostep.jsonl"
printf '\n{"step":1,"lr":"fast"}\n' >"$tmp/text.jsonl"
refused 2 "a string for lr" "$tmp/text.jsonl:2: not a metrics line: \"lr\" is not a number" -o "$tmp/p" "$tmp/text.jsonl"
refused 2 "no -o" "no output directory (-o DIR)" "$a"
refused 2 "no file" "no metrics file" -o "$tmp/p"
test -d "$tmp/p" && err "a refused run created the output directory"
GAAW_GNUPLOT="$tmp/no-gnuplot" refused 1 "GAAW_GNUPLOT missing" "apt-get install gnuplot-nox" -o "$tmp/p" "$a"
GAAW_GNUPLOT="$tmp/no-gnuplot" refused 1 "--check, GAAW_GNUPLOT missing" "GAAW_GNUPLOT='$tmp/no-gnuplot'" --check
GAAW_GNUPLOT=/bin/sh plot --check
test $rc -eq 0 || err "--check with GAAW_GNUPLOT=/bin/sh: exit $rc"
grep '^gaaw-plot: gnuplot is /bin/sh$' "$tmp/out" >/dev/null || err "--check does not name GAAW_GNUPLOT's program"
: >"$tmp/file"
GAAW_GNUPLOT=/bin/true refused 2 "DIR a file" "the output directory '$tmp/file' is not a directory" -o "$tmp/file" "$a"

# one file (with a gnuplot)
if ! "$prog" --check; then
  test $fail -eq 0 && exit 77
  exit $fail
fi
plot -o "$tmp/one" "$a"
test $rc -eq 0 || err "one file: exit $rc: `cat $tmp/err`"
for p in loss lr grad_norm throughput memory; do
  test -s "$tmp/one/$p.svg" || err "one file: no $p.svg"
  test "`head -c 4 "$tmp/one/$p.png" 2>/dev/null | od -An -c | tr -d ' '`" = '211PNG' || err "one file: $p.png is no PNG"
  grep "$tmp/one/$p.svg $tmp/one/$p.png" "$tmp/out" >/dev/null || err "one file: $p is not listed on stdout"
done
for p in tflops mfu; do
  test -f "$tmp/one/$p.svg" && err "one file: $p.svg drawn without $p in the file"
done
# has_series PLOT TITLE: the SVG names the series (its key)
has_series() { grep -- ">$2<" "$dir/$1.svg" >/dev/null || err "$dir/$1.svg does not name the series '$2'"; }
dir=$tmp/one
has_series loss "gaaw_plot_a.jsonl train"
has_series loss "gaaw_plot_a.jsonl validation"
has_series lr gaaw_plot_a.jsonl
has_series memory "gaaw_plot_a.jsonl optimizer state"

# two files overlaid
plot -o "$tmp/two/sub" "$a" "$b"
test $rc -eq 0 || err "two files: exit $rc: `cat $tmp/err`"
dir=$tmp/two/sub
for f in a b; do
  has_series loss "gaaw_plot_$f.jsonl train"
  for p in lr grad_norm throughput; do has_series $p gaaw_plot_$f.jsonl; done
  has_series memory "gaaw_plot_$f.jsonl activation peak"
done
has_series loss "gaaw_plot_a.jsonl validation"
grep 'gaaw_plot_b.jsonl validation' "$dir/loss.svg" >/dev/null && err "two files: a validation series for b, which has none"
has_series tflops gaaw_plot_b.jsonl
has_series mfu gaaw_plot_b.jsonl
grep gaaw_plot_a.jsonl "$dir/mfu.svg" >/dev/null && err "two files: an mfu series for a, which has none"
test $fail -eq 0 && echo "gaaw-plot: `ls $dir | wc -l` files in $dir: `ls $dir | tr '\n' ' '`"
exit $fail
