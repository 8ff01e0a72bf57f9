#!/bin/sh
# gaaw-train on prepared corpora (--data-path, --data-format), 2 ranks:
#  - the first 60,000 bytes of the shipped corpus as token ids written as a
#    Megatron-LM indexed dataset (uint16, a document per line) and as an llm.c
#    token file: 6 steps of each give the same losses, digit for digit, and the
#    same validation losses;
#  - a blend "0.7 MEGATRON 0.3 LLMC" trains and says each dataset's weight;
#  - resumed in another layout: the llm.c run saved at step 3 on 2 ranks (dp 2 x
#    batch 4), resumed on 1 rank with batch 8, trains steps 4-6 on the same windows:
#    their losses are the uninterrupted run's (printed digits);
#  - --data takes a path with a space; a damaged index is exit 2 with the file
#    named once, before any step.
# The files are written by python3 (struct): skipped (77) without it.
prog=${GAAW_TRAIN:-./examples/gaaw-train}
src=${GAAW_TOP_SRCDIR:-.}
test -n "$MPIEXEC" || { echo "no mpiexec: skipped"; exit 77; }
command -v python3 >/dev/null || { echo "no python3: skipped"; exit 77; }
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_train_data.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }

python3 - "$src/examples/data/corpus.txt" "$tmp" <<'PY' || { echo "FAIL: python3 could not write the files"; exit 1; }
import struct, sys
text = open(sys.argv[1], "rb").read()[:60000]
out = sys.argv[2]
docs = [d + b"\n" for d in text.split(b"\n")]
docs[-1] = docs[-1][:-1]
docs = [d for d in docs if d]
with open(out + "/corpus.bin", "wb") as f:
    f.write(b"".join(struct.pack("<%dH" % len(d), *d) for d in docs))
with open(out + "/corpus.idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(docs), len(docs) + 1))
    f.write(struct.pack("<%di" % len(docs), *[len(d) for d in docs]))
    at, ptrs = 0, []
    for d in docs:
        ptrs.append(at)
        at += 2 * len(d)
    f.write(struct.pack("<%dq" % len(docs), *ptrs))
    f.write(struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1)))
with open(out + "/corpus.llmc", "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(text), *([0] * 253)))
    f.write(struct.pack("<%dH" % len(text), *text))
PY

args="--steps 6 --layers 1 --dim 32 --heads 2 --seq 32 --batch 4 --eval-every 3 --sample 0 --warmup 2"
run() {
  timeout -k 5 120 $MPIEXEC -n 2 $prog $args "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}
run --data-path "$tmp/corpus" --data-format megatron
test $rc -eq 0 || { err "megatron: exit $rc"; cat "$tmp/err"; }
grep -q "^data: $tmp/corpus (megatron, 2-byte tokens), 60000 tokens" "$tmp/out" || err "megatron: no data line: `head -3 $tmp/out`"
grep -E '^step|^done' "$tmp/out" | sed -E 's/[|] +[0-9.]+ ms.*//; s/ in [0-9.]+ s//; s/[|][^|]*tok.s.*//' >"$tmp/megatron"
run --data-path "$tmp/corpus.llmc"
test $rc -eq 0 || { err "llmc: exit $rc"; cat "$tmp/err"; }
grep -q "(llmc, 2-byte tokens), 60000 tokens" "$tmp/out" || err "llmc (auto): no data line: `head -3 $tmp/out`"
grep -E '^step|^done' "$tmp/out" | sed -E 's/[|] +[0-9.]+ ms.*//; s/ in [0-9.]+ s//; s/[|][^|]*tok.s.*//' >"$tmp/llmc"
test `grep -c 'loss' "$tmp/megatron"` -ge 7 || err "megatron: too few loss lines: `cat $tmp/megatron`"
cmp -s "$tmp/megatron" "$tmp/llmc" || err "megatron and llm.c runs differ: `diff $tmp/megatron $tmp/llmc`"

run --data-path "$tmp/corpus.llmc" --save-dir "$tmp/ck" --save-every 3
test $rc -eq 0 || { err "llmc with saves: exit $rc"; cat "$tmp/err"; }
timeout -k 5 120 $MPIEXEC -n 1 $prog $args --batch 8 --data-path "$tmp/corpus.llmc" \
  --resume "$tmp/ck/step-00000003" >"$tmp/out" 2>"$tmp/err" || { err "resume on 1 rank failed"; cat "$tmp/err"; }
grep -E '^step +[4-6]/6 \| loss' "$tmp/out" | sed -E 's/[|] +[0-9.]+ ms.*//' >"$tmp/resumed"
grep -E '^step +[4-6]/6 \| loss' "$tmp/llmc" | sed -E 's/[|] +[0-9.]+ ms.*//' >"$tmp/straight"
test `wc -l <"$tmp/resumed"` -eq 3 || err "the resumed run printed no steps 4-6: `cat $tmp/out`"
cmp -s "$tmp/resumed" "$tmp/straight" || err "resumed on 1 rank, steps 4-6 differ: `diff $tmp/straight $tmp/resumed`"

run --data-path "0.7 $tmp/corpus 0.3 $tmp/corpus.llmc"
test $rc -eq 0 || { err "blend: exit $rc"; cat "$tmp/err"; }
grep -q "weight 0.7" "$tmp/out" && grep -q "weight 0.3" "$tmp/out" || err "blend: weights not shown: `head -4 $tmp/out`"

# --data names one file, spaces and all
head -c 20000 "$src/examples/data/corpus.txt" >"$tmp/my corpus.txt"
run --data "$tmp/my corpus.txt"
test $rc -eq 0 || { err "--data with a space in its path: exit $rc"; cat "$tmp/err"; }

printf 'X' | dd of="$tmp/corpus.idx" bs=1 seek=0 conv=notrunc 2>/dev/null
run --data-path "$tmp/corpus"
test $rc -eq 2 || err "damaged index: exit $rc, expected 2"
n=`grep -c "corpus.idx (byte offset 0): not a Megatron-LM index" "$tmp/err"`
test "$n" -eq 1 || err "damaged index: the message appears $n times: `cat $tmp/err`"
grep -q '^step ' "$tmp/out" && err "damaged index: training started"
exit $fail
