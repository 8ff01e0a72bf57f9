#!/bin/sh
# Ranks started with different arguments (MPMD: mpiexec -n 1 prog a : -n 1 prog b)
# all stop at once with one message that names the field and each rank's value;
# none crashes, none trains. One run per model-config field and per optimizer
# field, and two with a different option of gaaw_init.
prog=${GAAW_AGREE_PROG:-./tests/mpi/agree_mpmd}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_agree_mpmd.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
# differ STAGE FIELD A B [COMMON...]: rank 0 gets FIELD=A, rank 1 FIELD=B; the
# message quotes the values with $q (a text option's are in '').
q=
differ() {
  stage=$1 field=$2 a=$3 b=$4
  shift 4
  timeout -k 5 60 $MPIEXEC -n 1 $prog "$field=$a" "$@" : -n 1 $prog "$field=$b" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  want="$field: $q$a$q on rank 0, $q$b$q on rank 1"
  for r in 0 1; do
    line=`grep "^rank $r: " "$tmp/out"`
    case $line in
      *"failed in $stage after"*"$want"*) ;;
      *) echo "FAIL: $field differs: rank $r said '$line', expected a failure in $stage naming '$want'"
         cat "$tmp/err"; fail=1 ;;
    esac
  done
  test $rc -ne 0 -a $rc -ne 124 || { echo "FAIL: $field differs: mpiexec exit $rc"; fail=1; }
  if grep -q 'trained' "$tmp/out"; then echo "FAIL: $field differs: a rank trained"; fail=1; fi
  echo "ok: $field: `sed -n 's/^rank 0: failed in [^:]*: //p' "$tmp/out" | cut -c1-160`"
}
differ gaaw_model_create_gpt dim 16 32
differ gaaw_model_create_gpt heads 2 4
differ gaaw_model_create_gpt layers 2 3
differ gaaw_model_create_gpt max_seq 8 16
differ gaaw_model_create_gpt vocab 40 48
differ gaaw_model_create_gpt dtype f32 bf16
differ gaaw_model_create_gpt seed 1 2
differ gaaw_model_create_gpt norm layernorm rmsnorm
differ gaaw_model_create_gpt activation gelu swiglu
differ gaaw_model_create_gpt tied_embeddings 1 0
differ gaaw_model_create_gpt dtype f16 bf16 tp=2
differ gaaw_optimizer_create zero_stage 1 2
differ gaaw_optimizer_create lr 0.001 0.002
differ gaaw_optimizer_create kind adamw sgd
differ gaaw_init comm_timeout 60 30
q="'"
differ gaaw_init peak_tflops 1 measure
q=
# a batch: seq the same everywhere, rows the same inside a tp or pp group (they may
# differ between dp replicas: below)
differ training seq 8 4
differ training batch 2 1 tp=2
timeout -k 5 60 $MPIEXEC -n 1 $prog batch=2 pp=2 : -n 1 $prog batch=1 pp=2 >"$tmp/out" 2>"$tmp/err"
for r in 0 1; do
  grep -q "^rank $r: failed in training after.*batch must be the same on every rank of one dp rank.*dp rank 0 has ranks with batch 1 and 2" "$tmp/out" ||
    { echo "FAIL: batch differs in a pp group: rank $r said '`grep "^rank $r: " "$tmp/out"`'"; cat "$tmp/err"; fail=1; }
done
echo "ok: batch in a pp group: `sed -n 's/^rank 0: failed in [^:]*: //p' "$tmp/out" | cut -c1-160`"
timeout -k 5 60 $MPIEXEC -n 1 $prog batch=2 : -n 1 $prog batch=1 >"$tmp/out" 2>"$tmp/err"
test `grep -c trained "$tmp/out"` -eq 2 || { echo "FAIL: rows differing over dp did not train: `cat $tmp/out $tmp/err`"; fail=1; }
# the same arguments train
timeout -k 5 60 $MPIEXEC -n 2 $prog dim=16 >"$tmp/out" 2>"$tmp/err"
test `grep -c trained "$tmp/out"` -eq 2 || { echo "FAIL: equal arguments did not train: `cat $tmp/out $tmp/err`"; fail=1; }
exit $fail
