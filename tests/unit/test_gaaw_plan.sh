#!/bin/sh
# gaaw-plan runs without mpiexec. --json on a 175B GPT on 1024 A100-80G is an array
# that python3's json reads, each object with the fields the issue names, each
# layout dividing the job (dp x pp x cp x tp = 1024, dp x microbatch x microbatches =
# 1536) within the device's memory and fastest first; the tables name the rejected
# families; --cp and --cp-kinds restrict the search; --speeds prints each replica's
# rows; --help exits 0; bad flags exit 2 naming the flag. Skips (77) without
# /usr/bin/python3.
prog=./examples/gaaw-plan
py=/usr/bin/python3
test -x $py || { echo "SKIP: no $py"; exit 77; }
fail=0
err() { echo "FAIL: $*"; fail=1; }
job="--layers 96 --heads 96 --dim 12288 --seq 2048 --vocab 51200 --global-batch 1536 --nodes 128 --devices-per-node 8 --device a100-80g"

out=`$prog $job --json --top 5`
rc=$?
test $rc -eq 0 || err "--json exited with $rc"
echo "$out" | $py -c '
import json, sys
rows = json.load(sys.stdin)
assert isinstance(rows, list) and 1 <= len(rows) <= 5, "want 1..5 layouts, got %r" % (rows,)
need = ["dp", "pp", "tp", "cp", "cp_kind", "virtual_stages", "microbatch", "schedule", "zero_stage", "recompute", "offload",
        "memory_bytes_per_rank", "step_seconds", "tokens_per_s", "tflops_per_device", "mfu"]
prev = 0
for i, r in enumerate(rows):
    missing = [k for k in need if k not in r]
    assert not missing, "layout %d lacks %s" % (i, missing)
    assert r["dp"] * r["pp"] * r["cp"] * r["tp"] == 1024, "layout %d: %r" % (i, r)
    assert (r["cp"] == 1) == (r["cp_kind"] == "-") and r["cp_kind"] in ("-", "ring", "a2a"), "cp of %d" % i
    assert r["dp"] * r["microbatch"] * r["microbatches"] == 1536, "layout %d: %r" % (i, r)
    assert 0 < r["memory_bytes_per_rank"] <= 80e9, "layout %d needs %r bytes" % (i, r["memory_bytes_per_rank"])
    assert r["step_seconds"] >= prev, "layout %d is faster than the one before" % i
    assert abs(r["tokens_per_s"] * r["step_seconds"] - 1536 * 2048) < 1e-3 * 1536 * 2048, "tokens/s of %d" % i
    assert abs(r["mfu"] - r["tflops_per_device"] / 312) < 1e-4, "mfu of %d" % i
    prev = r["step_seconds"]
print("json: %d layouts, first %s" % (len(rows), rows[0]))
' || err "the --json output is not what it should be"

table=`$prog $job --top 3`
test $? -eq 0 || err "the tables exited non-zero"
echo "$table"
echo "$table" | grep '^rejected families' >/dev/null || err "no rejected families section"
echo "$table" | grep 'divisibility: heads 96 or ffn 49152 not divisible by tp 1024' >/dev/null ||
  err "tp 1024 is not rejected for divisibility"

# --cp and --cp-kinds: only cp 2 layouts, each with the kind asked for
small_cp="--layers 2 --heads 4 --dim 256 --seq 4096 --vocab 256 --global-batch 2 --devices-per-node 4 --device h100-80g"
out=`$prog $small_cp --cp 2 --cp-kinds a2a --json --top 3`
test $? -eq 0 || err "--cp 2 --cp-kinds a2a exited non-zero"
echo "$out" | $py -c '
import json, sys
rows = json.load(sys.stdin)
assert rows and all(r["cp"] == 2 and r["cp_kind"] == "a2a" and r["dp"] * r["pp"] * r["tp"] == 2 for r in rows), rows
' || err "--cp 2 --cp-kinds a2a: not every layout is cp 2 a2a: $out"
for bad in "--cp-kinds ring,all" "--cp 0" \
           "--layers x" "--no-such-flag 1" "--device v100" "--zero-stages 0,5" "--schedules 1f1b,fast" \
           "--speeds 1023x1" "--speeds 1000x1,24x0" "--speeds 1024xa"; do
  msg=`$prog $job $bad 2>&1 >/dev/null`
  rc=$?
  flag=`echo $bad | cut -d' ' -f1`
  test $rc -eq 2 || err "$bad exited with $rc, expected 2"
  echo "$msg" | grep -- "$flag" >/dev/null || err "$bad: the message does not name $flag: $msg"
done
# --speeds: 4 ranks, two at half speed: dp 4 takes rows 5, 5, 3, 3 of 16
small="--layers 4 --heads 4 --dim 256 --seq 128 --vocab 256 --global-batch 16 --devices-per-node 4 --device h100-80g"
rows=`$prog $small --speeds 2x1,2x0.5 --tp 1 --pp 1 --zero-stages 0 --recompute none --top 1`
test $? -eq 0 || err "--speeds 2x1,2x0.5 exited non-zero"
echo "$rows" | grep "^  1     4    1    1 .*  4     1 " >/dev/null || err "--speeds: layout 1 is not dp 4 x 4 rows: $rows"
echo "$rows" | grep "dp replicas (gaaw_batch_t.batch), by speed: 0-1: 5 2-3: 3$" >/dev/null ||
  err "--speeds: the replicas' rows are not 5, 5, 3, 3: $rows"
# --arch llama: LLaMA's ffn from --dim (8/3 x 4096 -> 11008), kv heads that tp may
# exceed only by a multiple; a bad --arch exits 2 naming it
llama="--arch llama --layers 32 --heads 32 --kv-heads 8 --dim 4096 --seq 4096 --vocab 32000 --global-batch 64 --device h100-80g"
out=`$prog $llama --top 1`
test $? -eq 0 || err "--arch llama exited non-zero"
echo "$out" | grep "^GPT (llama): 32 layers, 32 heads (8 kv), dim 4096, ffn 11008," >/dev/null ||
  err "--arch llama: the header is not LLaMA-7B's with 8 kv heads: $out"
out=`$prog --arch llama --heads 8 --kv-heads 3 --dim 512 --global-batch 8 --device h100-80g --tp 2 2>&1`
echo "$out" | grep "kv_heads 3" >/dev/null || err "--kv-heads 3 at --tp 2 is not rejected by name: $out"
msg=`$prog $small --arch mistral 2>&1 >/dev/null`
test $? -eq 2 || err "--arch mistral: not 2"
echo "$msg" | grep -- "--arch must be gpt2 or llama" >/dev/null || err "--arch mistral: $msg"

help=`$prog --help`
test $? -eq 0 || err "--help did not exit 0"
echo "$help" | grep -- '--global-batch' >/dev/null || err "--help does not list --global-batch"

msg=`$prog --layers 4 2>&1 >/dev/null`
test $? -eq 2 || err "without --global-batch: not 2"
echo "$msg" | grep -- '--global-batch' >/dev/null || err "without --global-batch: $msg"
exit $fail
