#!/bin/sh
# The timeline (option trace) from the outside, with gaaw-train on 4 ranks (pp 2 x
# tp 2, 4 microbatches, 2 steps, host backend), every rank's file parsed with
# python3's json module:
#  - zb-h1: per rank F, B and W = steps x microbatches; the first stage sends that
#    many activations and receives that many gradients, the last the other way;
#    one optimizer step per step; every collective (group, its first world rank,
#    sequence number) has an event on each member of its group with the same
#    operation and bytes; on the one clock, the last stage's receive of a
#    microbatch's activation ends after the first stage's F of it began;
#  - 1f1b with --recompute full: no W, and recompute spans inside the backward; its
#    save at step 2 (--save-every 2) gives each rank one checkpoint prepare and one
#    checkpoint write span;
#  - gaaw-trace merge: one valid JSON file with 4 process rows and every event;
#    a file cut short (a run killed before gaaw_finalize) still merges, also when
#    the cut falls inside an event, right after its args;
#  - tp 2 x cp 2: the ring's compute of each step and its messages (kv, dkv); the
#    all-to-all's exchanges;
#  - errors on every rank, named: a file name without %r on 2 ranks, a directory
#    that does not exist, and one rank tracing while the other does not (MPMD).
# GAAW_TRAIN and GAAW_TRACE_TOOL override the programs (defaults in the build tree).
prog=${GAAW_TRAIN:-./examples/gaaw-train}
tool=${GAAW_TRACE_TOOL:-./examples/gaaw-trace}
if test -z "$MPIEXEC"; then
  echo "no mpiexec: skipped"
  exit 77
fi
if ! /usr/bin/python3 -c 'import json' 2>/dev/null; then
  echo "no /usr/bin/python3: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_trace.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
tiny="--backend host --tp 2 --pp 2 --microbatches 4 --steps 2 --layers 2 --heads 2 --dim 32 --seq 32 --batch 4
      --eval-every 0 --eval-batches 1 --sample 0 --seed 7"
# run NAME ARGS...: 4 ranks of gaaw-train tracing to $tmp/NAME-%r.json
run() {
  name=$1
  shift
  timeout -k 5 120 $MPIEXEC -n 4 $prog $tiny --trace "$tmp/$name-%r.json" "$@" >"$tmp/$name.out" 2>&1 ||
    { err "$name: gaaw-train failed"; cat "$tmp/$name.out"; }
}
run zb --pp-schedule zb-h1
mkdir "$tmp/ckpt"
run f1b --pp-schedule 1f1b --recompute full --save-dir "$tmp/ckpt" --save-every 2
run ring --pp 1 --microbatches 1 --cp 2
run a2a --pp 1 --microbatches 1 --cp 2 --cp-kind a2a --heads 4

/usr/bin/python3 - "$tmp" <<'EOF' || fail=1
import collections, json, sys
tmp, steps, mb, ranks = sys.argv[1], 2, 4, 4
bad = []
def check(cond, what):
    if not cond: bad.append(what)
def load(name):
    return [json.load(open("%s/%s-%d.json" % (tmp, name, r))) for r in range(ranks)]
def spans(ev, name=None):
    return [e for e in ev if e["ph"] == "X" and (name is None or e["name"] == name)]
for run, split in (("zb", True), ("f1b", False)):
    files = load(run)
    groups = collections.defaultdict(list)
    for r, ev in enumerate(files):
        stage = r // 2  # rank order tp-dp-pp: tp fastest
        n = collections.Counter(e["name"] for e in spans(ev))
        want = steps * mb
        check(n["F"] == want and n["B"] == want, "%s rank %d: %d F and %d B, not %d each" % (run, r, n["F"], n["B"], want))
        check(n["W"] == (want if split else 0), "%s rank %d: %d W" % (run, r, n["W"]))
        check(n["optimizer step"] == steps, "%s rank %d: %d optimizer steps" % (run, r, n["optimizer step"]))
        msg = collections.Counter((e["name"], e["args"]["carries"]) for e in spans(ev) if e["name"] in ("send", "recv"))
        first = {("send", "activation"): want, ("recv", "gradient"): want}
        last = {("send", "gradient"): want, ("recv", "activation"): want}
        check(dict(msg) == (first if stage == 0 else last), "%s rank %d (stage %d): messages %s" % (run, r, stage, dict(msg)))
        for e in spans(ev):
            check(e["pid"] == r and e["ts"] >= 0 and e["dur"] >= 0, "%s rank %d: event %s out of place" % (run, r, e))
            if "seq" in e["args"]:
                a = e["args"]
                groups[(a["group"], a["group_first_rank"], a["seq"])].append((r, e["name"], a["bytes"], a["group_size"]))
    for key, members in groups.items():
        size = members[0][3]
        check(len(set(m[0] for m in members)) == size == len(members) and len(set(m[1:] for m in members)) == 1,
              "%s: collective %s has events %s" % (run, key, members))
    check(len(groups) > 0, "%s: no collectives" % run)
    # one clock: stage 1's receive of mb 0's activation ends after stage 0's F of mb 0 began
    f0 = min(e["ts"] for e in spans(files[0], "F") if e["args"]["mb"] == 0)
    r0 = min(e["ts"] + e["dur"] for e in spans(files[2], "recv") if e["args"]["mb"] == 0)
    check(r0 > f0, "%s: rank 2 received microbatch 0 at %.0f us, before rank 0 began its F at %.0f" % (run, r0, f0))
    if not split:
        rec = len(spans(files[0], "recompute"))
        check(rec > 0, "f1b: no recompute spans with --recompute full")
        for r, ev in enumerate(files):   # one save, at step 2: its stall and its write
            n = collections.Counter(e["name"] for e in spans(ev))
            check(n["checkpoint prepare"] == 1 and n["checkpoint write"] == 1,
                  "f1b rank %d: %d checkpoint prepare and %d checkpoint write spans, not 1 each"
                  % (r, n["checkpoint prepare"], n["checkpoint write"]))
# context parallelism (tp 2 x cp 2, 2 layers, 2 steps, and a forward of the
# validation loss before the first step and after the last): the ring's compute of
# each step (cp of them a layer, forward and backward) and its messages, each naming
# what it carries; the all-to-all's exchanges (forward: there and back; backward: q,
# k, v and the output's gradient with the output there, the gradients back)
layers, cp, forwards = 2, 2, steps + 2
for r, ev in enumerate(load("ring")):
    n = collections.Counter(e["name"] for e in spans(ev) if e["name"].startswith("attention"))
    check(n["attention"] == forwards * layers * cp and n["attention backward"] == steps * layers * cp,
          "ring rank %d: %d attention and %d attention backward spans, not %d and %d"
          % (r, n["attention"], n["attention backward"], forwards * layers * cp, steps * layers * cp))
    msg = collections.Counter((e["name"], e["args"]["carries"]) for e in spans(ev) if e["name"] in ("send", "recv"))
    kv = (forwards + steps) * layers * (cp - 1)
    want = {("send", "kv"): kv, ("recv", "kv"): kv, ("send", "dkv"): steps * layers * cp,
            ("recv", "dkv"): steps * layers * cp}
    check(dict(msg) == want, "ring rank %d: messages %s, not %s" % (r, dict(msg), want))
for r, ev in enumerate(load("a2a")):
    n = collections.Counter(e["name"] for e in spans(ev))
    check(n["all-to-all"] == (forwards + 2 * steps) * layers and n["all-to-all back"] == (forwards + steps) * layers,
          "a2a rank %d: %d all-to-all and %d all-to-all back spans" % (r, n["all-to-all"], n["all-to-all back"]))
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF

# merge: 4 process rows, every event
$tool merge -o "$tmp/merged.json" "$tmp"/zb-0.json "$tmp"/zb-1.json "$tmp"/zb-2.json "$tmp"/zb-3.json ||
  err "gaaw-trace merge failed"
/usr/bin/python3 - "$tmp" <<'EOF' || fail=1
import json, sys
tmp = sys.argv[1]
merged = json.load(open(tmp + "/merged.json"))["traceEvents"]
rows = sorted(e["pid"] for e in merged if e["name"] == "process_name")
total = sum(len(json.load(open("%s/zb-%d.json" % (tmp, r)))) for r in range(4))
ok = rows == [0, 1, 2, 3] and len(merged) == total
if not ok: print("FAIL: merged: process rows %s, %d events of %d" % (rows, len(merged), total))
sys.exit(0 if ok else 1)
EOF
head -c 20000 "$tmp/zb-1.json" >"$tmp/cut-1.json"
$tool merge -o "$tmp/cut.json" "$tmp/zb-0.json" "$tmp/cut-1.json" 2>"$tmp/cut.err" ||
  { err "a file cut short does not merge"; cat "$tmp/cut.err"; }
grep -q "was not closed" "$tmp/cut.err" || err "merge does not say the cut file was not closed"
# cut between an event's args and the event's own closing brace
off=`grep -b -o '}},' "$tmp/zb-1.json" | sed -n 5p | cut -d: -f1`
head -c $((off + 1)) "$tmp/zb-1.json" >"$tmp/cut2-1.json"
$tool merge -o "$tmp/cut2.json" "$tmp/zb-0.json" "$tmp/cut2-1.json" 2>"$tmp/cut2.err" ||
  { err "a file cut inside an event (after its args) does not merge"; cat "$tmp/cut2.err"; }
$tool merge -o "$tmp/twice.json" "$tmp/zb-0.json" "$tmp/zb-0.json" 2>"$tmp/twice.err" && err "merge took rank 0 twice"
grep -q "holds rank 0, as an earlier file did" "$tmp/twice.err" || err "merge of rank 0 twice: $(cat "$tmp/twice.err")"

# errors: the same named error on every rank, at once
# expect NAME TEXT ARGS...: 2 ranks fail (exit 2 or 1), each printing TEXT
expect() {
  name=$1 text=$2
  shift 2
  timeout -k 5 60 $MPIEXEC "$@" >"$tmp/$name.out" 2>&1 && err "$name: succeeded"
  n=`grep -c "$text" "$tmp/$name.out"`
  test "$n" -ge 1 || { err "$name: no '$text'"; cat "$tmp/$name.out"; }
}
small="--backend host --steps 1 --layers 1 --heads 2 --dim 32 --seq 32 --batch 2 --eval-every 0 --sample 0"
expect no-rank "needs %r" -n 2 $prog $small --trace "$tmp/same.json"
expect no-dir "GAAW_ERR_IO" -n 2 $prog $small --trace "$tmp/none/t-%r.json"
expect mpmd "trace (on or off)" -n 1 $prog $small --trace "$tmp/m-%r.json" : -n 1 $prog $small
exit $fail
