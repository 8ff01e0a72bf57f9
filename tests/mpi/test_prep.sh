#!/bin/sh
# gaaw-prep, then gaaw-train on what it wrote:
#  - a SentencePiece model trained here by Debian's spm_train (vocabulary 300,
#    LLaMA's special ids: unk 0, BOS 1, EOS 2) on the shipped corpus; 40 of the
#    corpus's lines as JSON lines (one document each) through gaaw-prep
#    --append-eod: the dataset holds, document by document, BOS, exactly the ids
#    spm_encode gives for that text, and EOS (read back by python3);
#  - --verify passes at --vocab 300 and names the offending token at --vocab 100
#    (without the sidecar, which refuses 100 at open);
#  - gaaw-train trains 3 steps on it at --vocab 300 (2 ranks), and refuses --vocab
#    200 before any step, naming the sidecar PREFIX.gaaw.json;
#  - --bytes on a plain file: one document of its bytes, no BOS or EOS; inputs
#    without text are exit 1 and leave no dataset.
# Skips (77) without spm_train, python3, or a gaaw-prep built with SentencePiece.
prep=${GAAW_PREP:-./examples/gaaw-prep}
train=${GAAW_TRAIN:-./examples/gaaw-train}
src=${GAAW_TOP_SRCDIR:-.}
test -n "$MPIEXEC" || { echo "no mpiexec: skipped"; exit 77; }
for tool in spm_train spm_encode python3; do
  command -v $tool >/dev/null || { echo "no $tool: skipped"; exit 77; }
done
$prep --help | grep -q "not built" && { echo "gaaw-prep was built without SentencePiece: skipped"; exit 77; }
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_prep.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }

spm_train --input="$src/examples/data/corpus.txt" --model_prefix="$tmp/spm" --vocab_size=300 \
  --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --minloglevel=2 >"$tmp/spm.log" 2>&1 ||
  { echo "FAIL: spm_train failed"; cat "$tmp/spm.log"; exit 1; }

# 40 documents: lines 1-40 of the corpus that are not blank, one JSON line each
grep -v '^ *$' "$src/examples/data/corpus.txt" | head -40 >"$tmp/docs.txt"
python3 -c '
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], "w") as out:
    for line in f:
        out.write(json.dumps({"text": line.rstrip("\n"), "id": 7}) + "\n")
' "$tmp/docs.txt" "$tmp/docs.jsonl"
spm_encode --model="$tmp/spm.model" --output_format=id <"$tmp/docs.txt" >"$tmp/want.ids"

$prep --input "$tmp/docs.jsonl" --output-prefix "$tmp/ds" --tokenizer-model "$tmp/spm.model" --append-eod \
  >"$tmp/out" 2>"$tmp/err" || { err "gaaw-prep failed"; cat "$tmp/err"; }
grep -q "40 documents" "$tmp/out" || err "gaaw-prep did not report 40 documents: `cat $tmp/out`"
python3 - "$tmp/ds" "$tmp/want.ids" <<'PY' || err "the dataset is not spm_encode's ids with BOS and EOS"
import struct, sys
prefix, want = sys.argv[1], sys.argv[2]
idx = open(prefix + ".idx", "rb").read()
assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
version, code, n, ndocs = struct.unpack_from("<QBQQ", idx, 9)
assert version == 1 and code == 8 and ndocs == n + 1, (version, code, n, ndocs)
lengths = struct.unpack_from("<%di" % n, idx, 34)
pointers = struct.unpack_from("<%dq" % n, idx, 34 + 4 * n)
tokens = struct.unpack("<%dH" % (sum(lengths)), open(prefix + ".bin", "rb").read())
lines = [[int(x) for x in l.split()] for l in open(want)]
assert len(lines) == n == 40, (len(lines), n)
for d, ids in enumerate(lines):
    got = list(tokens[pointers[d] // 2:pointers[d] // 2 + lengths[d]])
    assert got == [1] + ids + [2], ("document", d, got[:8], ids[:8])
PY
grep -q '"vocab_size": 300' "$tmp/ds.gaaw.json" || err "the sidecar lacks vocab_size 300: `cat $tmp/ds.gaaw.json`"

$prep --verify "$tmp/ds" --vocab 300 >"$tmp/out" 2>&1 || err "--verify at 300 failed: `cat $tmp/out`"
# (the sidecar would refuse --vocab 100 at open: moved aside, the scan finds a token)
mv "$tmp/ds.gaaw.json" "$tmp/side.json"
$prep --verify "$tmp/ds" --vocab 100 >"$tmp/out" 2>&1 && err "--verify at 100 passed"
grep -q "ds.bin: token [0-9]* at byte offset [0-9]* is outside the vocabulary of 100" "$tmp/out" ||
  err "--verify at 100 does not name the token: `cat $tmp/out`"
mv "$tmp/side.json" "$tmp/ds.gaaw.json"

args="--steps 3 --layers 1 --dim 32 --heads 2 --seq 16 --batch 2 --eval-every 0 --sample 0"
timeout -k 5 120 $MPIEXEC -n 2 $train $args --data-path "$tmp/ds" --vocab 300 >"$tmp/out" 2>&1 ||
  err "gaaw-train on the dataset failed: `tail -5 $tmp/out`"
grep -q '(megatron, 2-byte tokens)' "$tmp/out" || err "gaaw-train did not read it as Megatron's: `head -3 $tmp/out`"
timeout -k 5 120 $MPIEXEC -n 2 $train $args --data-path "$tmp/ds" --vocab 200 >"$tmp/out" 2>"$tmp/err"
rc=$?
test $rc -eq 2 || err "--vocab 200: exit $rc, expected 2"
n=`grep -c "ds.gaaw.json: the dataset's tokenizer has 300 ids" "$tmp/err"`
test "$n" -eq 1 || err "--vocab 200: the sidecar is named $n times: `cat $tmp/err`"

# inputs without text: an error, not an empty dataset
printf '\n{"text": ""}\n' >"$tmp/empty.jsonl"
$prep --input "$tmp/empty.jsonl" --output-prefix "$tmp/empty" --bytes >"$tmp/out" 2>&1 && err "empty input passed"
grep -q "the inputs hold no text" "$tmp/out" || err "empty input: `cat $tmp/out`"
test -f "$tmp/empty.idx" && err "empty input left an index"

printf 'plain bytes\n' >"$tmp/plain.txt"
$prep --input "$tmp/plain.txt" --output-prefix "$tmp/bytes" --bytes >"$tmp/out" 2>&1 || err "--bytes failed: `cat $tmp/out`"
python3 -c '
import struct, sys
b = open(sys.argv[1] + ".bin", "rb").read()
assert list(struct.unpack("<%dH" % (len(b) // 2), b)) == list(b"plain bytes\n"), b
' "$tmp/bytes" || err "--bytes did not write the file's bytes"
exit $fail
