#!/bin/sh
# The files of parallel/ call one another one way only (parallel/model_impl.h lists
# who owns what): no two files call each other, directly or round a loop of files,
# and the generic model core names no function or table of a model kind (the GPT's
# gpt*.c, the sequential models' sequential.c, seq_*.c, mlp.c, regression_loss.c,
# model_spec.c): a kind reaches the core through its layer ops and its kind table.
#
# Read from the built objects, not the sources: file A depends on file B when A's
# object uses (nm: U) a symbol that B's object defines (T, D, R or B). tsort finds
# a loop when there is one; the test first checks that it does find one in the
# same edges with one edge reversed, so that it cannot pass by reading nothing.
# Runs in the build tree (make check's working directory).
dir=./parallel/.libs
test -d "$dir" || dir=./parallel
objs=`ls "$dir"/libgaaw_core_la-*.o 2>/dev/null`
n=`echo "$objs" | grep -c .`
if test "$n" -lt 20; then
  echo "FAIL: found $n objects of parallel/ in $dir (expected over 20): is this the build tree?"
  exit 1
fi
tmp=`mktemp -d` || exit 1
trap 'rm -rf "$tmp"' EXIT
for o in $objs; do
  f=`basename "$o" .o | sed 's/^libgaaw_core_la-//'`.c
  nm --defined-only "$o" | awk -v f="$f" 'NF == 3 && $2 ~ /^[TDRB]$/ { print $3, f }' >>"$tmp/defs"
  nm --undefined-only "$o" | awk -v f="$f" '{ print $NF, f }' >>"$tmp/uses"
done
sort -k1,1 "$tmp/defs" >"$tmp/defs.s"
sort -k1,1 "$tmp/uses" >"$tmp/uses.s"
# "user definer symbol" for every use of another file's symbol
join "$tmp/uses.s" "$tmp/defs.s" | awk '$2 != $3 { print $2, $3, $1 }' | sort -u >"$tmp/calls"
awk '{ print $1, $2 }' "$tmp/calls" | sort -u >"$tmp/edges"
edges=`grep -c . "$tmp/edges"`
if test "$edges" -lt 40; then
  echo "FAIL: only $edges dependencies between the files of parallel/ (expected over 40)"
  exit 1
fi
fail=0

# the check can fail: one edge reversed makes a loop that tsort must report
{ cat "$tmp/edges"; head -n 1 "$tmp/edges" | awk '{ print $2, $1 }'; } | tsort >/dev/null 2>"$tmp/self"
if ! grep -q loop "$tmp/self"; then
  echo "FAIL: tsort reported no loop in the dependencies with one edge reversed; the check below proves nothing"
  fail=1
fi

if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/loops"; then
  echo "FAIL: the files of parallel/ call each other in a circle; tsort says:"
  sed 's/^/  /' "$tmp/loops"
  echo "  the calls between those files (caller, callee, symbol):"
  members=`sed -n 's/^tsort: //p' "$tmp/loops" | grep -v ':' | sort -u | tr '\n' ' '`
  awk -v m=" $members" 'index(m, " " $1 " ") && index(m, " " $2 " ")' "$tmp/calls" | sed 's/^/    /'
  fail=1
fi

core='model_tensors.c model_names.c model_frame.c model_build.c model_hooks.c model_batch.c model_pass.c
      model_step.c model_infer.c model_access.c model_arrays.c model_state.c pipeline.c weight_grads.c'
kinds='^(gpt|gpt_block|gpt_batch|sequential|seq_layers|seq_linear|seq_batch|mlp|regression_loss|model_spec)\.c$'
for f in $core; do
  grep -q " $f\$" "$tmp/defs" || { echo "FAIL: no object of $f (the core's list here is out of date)"; fail=1; }
  bad=`awk -v f="$f" '$1 == f { print $2, $3 }' "$tmp/calls" | awk -v k="$kinds" '$1 ~ k'`
  if test -n "$bad"; then
    echo "FAIL: $f (the generic core) calls a model kind by name:"
    echo "$bad" | sed 's/^/  /'
    fail=1
  fi
done
test $fail -eq 0 && echo "$n files of parallel/, $edges dependencies between them, one way only; the core names no model kind"
exit $fail
