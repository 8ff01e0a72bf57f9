#!/bin/sh
# The kernels lane (option trace_kernels) and gaaw-trace summary, with gaaw-train on
# 2 ranks (dp 2, 3 steps, host backend):
#  - every kernel call is a span on the lane `kernels` inside the rank's steps; gemm
#    spans carry their shape as "MxNxK AB" with M N K > 0;
#  - gaaw-trace summary over both files prints, per rank and step, the calls of
#    each kernel and shape as the files count them, kernel rows in decreasing time,
#    and the "(all kernels)" and "(outside kernels)" rows that add up to the step;
#  - without trace_kernels there is no such lane, and summary says so (exit 1);
#    summary without files is a usage error (exit 2).
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
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_trace_kernels.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
err() { echo "FAIL: $*"; fail=1; }
tiny="--backend host --steps 3 --layers 2 --heads 2 --dim 32 --seq 32 --batch 4 --eval-every 0 --eval-batches 1
      --sample 0 --seed 7"
GAAW_TRACE_KERNELS=yes timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny --trace "$tmp/k-%r.json" >"$tmp/k.out" 2>&1 ||
  { err "gaaw-train with trace_kernels failed"; cat "$tmp/k.out"; }
timeout -k 5 120 $MPIEXEC -n 2 $prog $tiny --trace "$tmp/plain-%r.json" >"$tmp/plain.out" 2>&1 ||
  { err "gaaw-train without trace_kernels failed"; cat "$tmp/plain.out"; }
$tool summary "$tmp/k-0.json" "$tmp/k-1.json" >"$tmp/summary.txt" 2>&1 ||
  { err "gaaw-trace summary failed"; cat "$tmp/summary.txt"; }

/usr/bin/python3 - "$tmp" <<'EOF2' || fail=1
import collections, json, re, sys
tmp = sys.argv[1]
bad = []
def check(cond, what):
    if not cond: bad.append(what)
def lane(ev, name):
    return [e["tid"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == name]
counts = collections.Counter()
windows = 0
for r in range(2):
    ev = json.load(open("%s/k-%d.json" % (tmp, r)))
    tid = lane(ev, "kernels")
    check(len(tid) == 1, "rank %d: %d kernels lanes" % (r, len(tid)))
    if not tid: continue
    spans = [e for e in ev if e["ph"] == "X"]
    kern = [e for e in spans if e["tid"] == tid[0]]
    steps = sorted(e["ts"] + e["dur"] for e in spans if e["name"] == "optimizer step")
    check(len(steps) == 3, "rank %d: %d optimizer steps" % (r, len(steps)))
    check(len(kern) > 100, "rank %d: only %d kernel spans" % (r, len(kern)))
    for e in kern:
        if e["name"].startswith("gemm"):
            m = re.fullmatch(r"(\d+ x )?(\d+)x(\d+)x(\d+) [NT][NT]", e["args"].get("shape", ""))
            check(m and min(int(m.group(i)) for i in (2, 3, 4)) > 0, "rank %d: gemm shape %r" % (r, e["args"]))
        if steps and steps[0] <= e["ts"] < steps[-1]:
            counts[(e["name"], e["args"]["shape"])] += 1
    windows += len(steps) - 1
    check(not lane(json.load(open("%s/plain-%d.json" % (tmp, r))), "kernels"), "rank %d: a kernels lane without the option" % r)
rows = {}
total = step = None
for line in open(tmp + "/summary.txt"):
    m = re.match(r"# 2 rank\(s\), (\d+) step\(s\) per rank after the first: ([\d.]+) ms per step", line)
    if m: step = float(m.group(2)); check(int(m.group(1)) == 2, "summary: %s steps" % m.group(1))
    m = re.match(r"(\S+)\s+(\(.*?\)|(?:\d+ x )?\d+x\d+x\d+ [NT][NT])\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%$", line.strip())
    if m: rows[(m.group(1), m.group(2))] = (float(m.group(3)), float(m.group(4)))
    m = re.match(r"\((all|outside) kernels\)\s+(-?[\d.]+)\s+(-?[\d.]+)%", line.strip())
    if m: total = (total or 0) + float(m.group(2))
check(step is not None and step > 0, "summary: no step line")
check(len(rows) == len(counts), "summary: %d rows, the files hold %d kernels and shapes" % (len(rows), len(counts)))
for key, n in counts.items():
    got = rows.get(key)
    check(got is not None and abs(got[0] - n / windows) < 0.051, "summary: %s: %s calls per step, the files %.2f" % (key, got, n / windows))
times = [v[1] for v in rows.values()]
order = [float(l.split()[-2]) for l in open(tmp + "/summary.txt") if re.match(r"[a-z]", l) and not l.startswith("kernel")]
check(order == sorted(order, reverse=True), "summary: rows not in decreasing time")
check(total is not None and step is not None and abs(total - step) < 0.01, "summary: kernels %s + outside != step %s" % (total, step))
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
EOF2

$tool summary "$tmp/plain-0.json" >"$tmp/none.txt" 2>&1
test $? -eq 1 || err "summary of a file without the lane did not exit 1"
grep -q "has no lane 'kernels'" "$tmp/none.txt" || { err "summary without the lane: $(cat "$tmp/none.txt")"; }
$tool summary >/dev/null 2>&1
test $? -eq 2 || err "summary without files did not exit 2"
exit $fail
