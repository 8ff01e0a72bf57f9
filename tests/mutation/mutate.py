#!/usr/bin/python3
"""gaaw's mutation tool (doc/testing.md): plants one-line defects into the library's
C files, one at a time, and runs the tests that cover each; a mutant no test fails on
is a survivor, a place where the tests would let that code break unnoticed.

  mutate.py list FILE...                    every mutant of the files
  mutate.py run [--sample N] [--seed S] (--family NAME... | FILE...)
                                            a seeded sample, stratified by file, per family
  mutate.py ci [--commits 20] [--max 8] [--budget 240]
                                            at most --max mutants on the lines the last
                                            --commits commits changed in the families' files,
                                            with the committed coverage map; exit 1 on a
                                            survivor in neither list
  mutate.py rerun REPORT                    the survivors of an earlier --report again
                                            (after new tests), its killed ones kept
  mutate.py map                             writes tests/mutation/coverage_map.json

Common options: --srcdir (the checkout; default the tool's own tree), --workdir (default
SRCDIR/_mutation), --test-limit seconds (60), --jobs (2), --remap (rebuild the
coverage map, which otherwise maps an added test alone and remaps all only when a
library source is added), --remap-test TEST (map one changed test again).
Needs Debian's python3-clang-14 (libclang) and gcov.
"""
import argparse
import fnmatch
import glob
import json
import math
import os
import random
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lists  # noqa: E402
import mutants as mutants_mod  # noqa: E402
from runner import Runner  # noqa: E402
from workspace import Workspace, log, makefile_vars  # noqa: E402

COUNTED = ("killed", "survived", "uncovered", "timeout")
COMMITTED_MAP = os.path.join(HERE, "coverage_map.json")


def to_ranges(lines):
    out, start, prev = [], None, None
    for n in sorted(lines):
        if start is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append("%d-%d" % (start, prev) if prev > start else "%d" % start)
        start = prev = n
    if start is not None:
        out.append("%d-%d" % (start, prev) if prev > start else "%d" % start)
    return ",".join(out)


def from_ranges(text):
    out = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def load_committed_map():
    """tests/mutation/coverage_map.json (make mutation-map): the families' files only."""
    if not os.path.exists(COMMITTED_MAP):
        sys.exit("mutation: %s is missing: make mutation-map makes it" % COMMITTED_MAP)
    with open(COMMITTED_MAP) as f:
        m = json.load(f)
    return {"seconds": m["seconds"],
            "files": {rel: {t: from_ranges(r) for t, r in tests.items()} for rel, tests in m["files"].items()},
            "executable": {rel: from_ranges(r) for rel, r in m["executable"].items()}}


def families(srcdir):
    out = []
    with open(os.path.join(HERE, "families.txt")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, *patterns = line.split()
                files = sorted({os.path.relpath(p, srcdir) for pat in patterns
                                for p in glob.glob(os.path.join(srcdir, pat))})
                out.append((name, files))
    return out


def family_of(fams, rel):
    for name, files in fams:
        if rel in files:
            return name
    return "other"


def clang_args(ws):
    v = makefile_vars(ws.build)
    args = ["-std=gnu11", "-DHAVE_CONFIG_H", "-I" + os.path.join(ws.src, "include"),
            "-I" + os.path.join(ws.build, "include"), "-I" + ws.src, "-I" + ws.build]
    for name in ("MPI_CFLAGS", "JANSSON_CFLAGS", "XXHASH_CFLAGS", "LIBURING_CFLAGS", "BLAS_CFLAGS"):
        args += [a for a in v.get(name, "").split() if a.startswith(("-I", "-D"))]
    return args


def all_mutants(ws, files):
    args = clang_args(ws)
    out = {}
    for rel in files:
        out[rel] = mutants_mod.generate(rel, os.path.join(ws.src, rel), args)
    return out


def stratified_order(by_file, seed):
    """One seeded order over the files' mutants in which every prefix is close to
    proportional to the files' mutant counts (largest remainder): the sample is the
    first N that neither compile identically nor fail to compile."""
    rng = random.Random(seed)
    pools = {}
    for rel in sorted(by_file):
        ms = list(by_file[rel])
        rng.shuffle(ms)
        pools[rel] = ms
    total = sum(len(p) for p in pools.values())
    taken = {rel: 0 for rel in pools}
    order = []
    for n in range(1, total + 1):
        # the file furthest below its share of n
        rel = max((r for r in pools if taken[r] < len(pools[r])),
                  key=lambda r: (n * len(pools[r]) / total - taken[r], r))
        order.append(pools[rel][taken[rel]])
        taken[rel] += 1
    return order


def wilson(k, n, z=1.96):
    if n == 0:
        return 0.0, 0.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


class Session:
    def __init__(self, opts):
        self.opts = opts
        self.srcdir = os.path.abspath(opts.srcdir)
        self.ws = Workspace(self.srcdir, opts.workdir or os.path.join(self.srcdir, "_mutation"), opts.jobs)
        self.lists = lists.Lists(HERE)
        self.fams = families(self.srcdir)

    def prepare(self, need_tests=True):
        os.makedirs(self.ws.work, exist_ok=True)
        changed = self.ws.sync()
        if changed:
            log("%d files copied into the workspace" % len(changed))
        if not need_tests:
            self.ws.configure(self.ws.build, "-O2")
            return
        self.ws.build_tree(self.ws.build, "-O2")
        self.map = self.ws.load_map(self.opts.remap, self.opts.remap_test or ())
        self.runner = Runner(self.ws, self.map, self.opts.test_limit)

    def prepare_for(self, candidates):
        """CI: the committed map (tests/mutation/coverage_map.json) and only the programs
        that the candidates' tests run; no coverage build."""
        os.makedirs(self.ws.work, exist_ok=True)
        self.ws.sync()
        self.ws.configure(self.ws.build, "-O2")
        self.map = load_committed_map()
        self.runner = Runner(self.ws, self.map, self.opts.test_limit)
        tests = set()
        for m in candidates:
            tests.update(self.runner.tests_for(m))
        known = set(self.ws.tests(self.ws.build))
        stale = sorted(t for t in self.map["seconds"] if t not in known)
        if stale:
            log("the committed map names tests that are gone (%s): make mutation-map" % ", ".join(stale[:5]))
        self.ws.build_tree(self.ws.build, "-O2", self.ws.programs_for(self.ws.build, tests & known))

    def evaluate(self, order, want, label, deadline=None):
        """Runs mutants of order until `want` of them count (or order ends, or the
        deadline passes: a mutant cut short is `unfinished`)."""
        results = []
        counted = 0
        for m in order:
            if counted >= want or (deadline and time.time() > deadline):
                break
            with open(os.path.join(self.ws.src, m.file)) as f:
                text = f.read()
            r = self.runner.run(m, text, deadline)
            r["key"], r["describe"], r["family"] = m.key(), m.describe(), label
            r["verdict"] = self.lists.verdict(m.key())
            results.append(r)
            if r["status"] in COUNTED:
                counted += 1
                extra = " by " + r["test"] if r["status"] == "killed" else ""
                if r["status"] in ("survived", "uncovered", "timeout"):
                    extra += " [%s]" % r["verdict"] if r["verdict"] else " [in neither list]"
                log("%s %d/%d %s: %s%s (%.0f s)" % (label, counted, want, r["status"], m.describe(), extra, r["seconds"]))
        return results

    def report(self, results, out):
        lines = ["family      mutants killed survived uncovered timeout equivalent accepted  score   95% interval"]
        by_fam = {}
        for r in results:
            by_fam.setdefault(r["family"], []).append(r)
        ok = True
        for fam, rs in by_fam.items():
            c = [r for r in rs if r["status"] in COUNTED]
            killed = sum(r["status"] == "killed" for r in c)
            equiv = sum(r["status"] != "killed" and r["verdict"] == "equivalent" for r in c)
            acc = sum(r["status"] != "killed" and r["verdict"] == "accepted" for r in c)
            counts = {s: sum(r["status"] == s for r in c) for s in COUNTED}
            denom = len(c) - equiv
            score = killed / denom if denom else 0.0
            lo, hi = wilson(killed, denom)
            lines.append("%-11s %7d %6d %8d %9d %7d %10d %8d  %5.1f%%  %5.1f-%5.1f%%" % (
                fam, len(c), killed, counts["survived"], counts["uncovered"], counts["timeout"],
                equiv, acc, 100 * score, 100 * lo, 100 * hi))
        lines.append("")
        for r in results:
            if r["status"] in ("survived", "uncovered", "timeout"):
                tag = r["verdict"] or "IN NEITHER LIST"
                if not r["verdict"] and r["status"] != "timeout":
                    ok = False
                lines.append("%-9s %-15s %s\n          key: %s" % (r["status"], tag, r["describe"], r["key"].replace("\t", " | ")))
        text = "\n".join(lines)
        print(text)
        if out:
            with open(out, "w") as f:
                f.write(text + "\n")
            with open(out + ".json", "w") as f:
                json.dump(results, f, indent=1)
        return ok

    def finish(self):
        self.runner.finish()


def cmd_list(s, opts):
    s.prepare(need_tests=False)
    for rel, ms in all_mutants(s.ws, opts.files).items():
        for m in ms:
            print("%s\n    key: %s" % (m.describe(), m.key().replace("\t", " | ")))


def load_results(path):
    """The results an earlier --report wrote (REPORT.json)."""
    with open(path + ".json") as f:
        return json.load(f)


def cmd_rerun(s, opts):
    """After: the mutants of an earlier report that were not killed and are in neither
    list, run again (with today's tests), its other results kept and judged by today's
    lists; the report is the whole sample's. A mutant whose code no longer exists
    (the line it mutated was rewritten) is "gone": it leaves the sample, as one that
    compiles identically does."""
    earlier = load_results(opts.earlier)
    # a survivor now in a list keeps its result (listing it changed nothing it runs),
    # unless --all (after the tests it runs changed)
    again = {r["key"] for r in earlier if r["status"] in COUNTED and r["status"] != "killed"
             and (opts.all or not s.lists.verdict(r["key"]))}
    files = sorted({k.split("\t")[0] for k in again})
    s.prepare()
    by_key = {m.key(): m for ms in all_mutants(s.ws, files).values() for m in ms}
    missing = sorted(again - set(by_key))
    if missing:
        log("%d mutant(s) of %s no longer exist (their code changed): %s" % (len(missing), opts.earlier, "; ".join(missing[:3])))
    results = []
    for r in earlier:
        if r["key"] in by_key and r["key"] in again:
            new = s.evaluate([by_key[r["key"]]], 1, r["family"])
            results += new
        elif r["key"] in again:
            results.append(dict(r, status="gone", verdict=None))
        else:
            r["verdict"] = s.lists.verdict(r["key"])
            results.append(r)
    s.finish()
    s.report(results, opts.report)
    return 0


def cmd_run(s, opts):
    s.prepare()
    if opts.family:
        names = {n for n, _ in s.fams}
        for f in opts.family:
            if f not in names:
                sys.exit("mutation: no family %s (tests/mutation/families.txt has %s)" % (f, ", ".join(sorted(names))))
        groups = [(n, files) for n, files in s.fams if n in opts.family]
    else:
        groups = [("files", opts.files)]
    results = []
    t0 = time.time()
    for name, files in groups:
        by_file = all_mutants(s.ws, files)
        order = stratified_order(by_file, opts.seed)
        want = opts.sample or len(order)
        log("%s: %d mutants in %d files; sample %d (seed %d)" % (name, len(order), len(files), want, opts.seed))
        results += s.evaluate(order, want, name)
    s.finish()
    log("%d mutants in %.0f s" % (len(results), time.time() - t0))
    s.report(results, opts.report)
    return 0


def cmd_map(s, opts):
    """Writes tests/mutation/coverage_map.json: the workspace's map, the families'
    files only, lines as ranges (what the CI stage reads instead of a coverage run)."""
    s.prepare()
    files = sorted({f for _, fs in s.fams for f in fs})
    out = {"seconds": s.map["seconds"],
           "files": {rel: {t: to_ranges(l) for t, l in sorted(s.map["files"].get(rel, {}).items())} for rel in files},
           "executable": {rel: to_ranges(s.map["executable"].get(rel, [])) for rel in files}}
    with open(COMMITTED_MAP, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
        f.write("\n")
    log("wrote %s (%d tests, %d files)" % (COMMITTED_MAP, len(out["seconds"]), len(files)))
    return 0


def changed_lines(srcdir, commits, files):
    """{file: set of lines} that the last `commits` commits changed (in today's file)."""
    out = {}
    base = subprocess.run(["git", "rev-list", "--max-count=1", "--skip=%d" % commits, "HEAD"], cwd=srcdir,
                          stdout=subprocess.PIPE, text=True).stdout.strip()
    if not base:
        base = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=srcdir,
                              stdout=subprocess.PIPE, text=True).stdout.split()[0]
    diff = subprocess.run(["git", "diff", "-U0", base, "--"] + files, cwd=srcdir,
                          stdout=subprocess.PIPE, text=True).stdout
    cur = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            cur = line[6:] if line.startswith("+++ b/") else None
        m = re.match(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
        if m and cur:
            start, n = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            out.setdefault(cur, set()).update(range(start, start + n))
    return out


def cmd_ci(s, opts):
    deadline = time.time() + opts.budget
    files = sorted({f for _, fs in s.fams for f in fs})
    lines = changed_lines(s.srcdir, opts.commits, files)
    if not lines:
        log("the last %d commits changed no line of the families' files: nothing to run" % opts.commits)
        return 0
    s.prepare(need_tests=False)
    by_file = {rel: [m for m in ms if m.line in lines.get(rel, ())]
               for rel, ms in all_mutants(s.ws, sorted(lines)).items()}
    order = stratified_order({k: v for k, v in by_file.items() if v}, opts.seed)
    log("%d mutants on the lines the last %d commits changed; running up to %d (seed %d, %d s)"
        % (len(order), opts.commits, opts.max, opts.seed, opts.budget))
    # room for the ones that compile identically or not at all
    s.prepare_for(order[:3 * opts.max])
    results = []
    for m in order[:3 * opts.max]:
        if sum(r["status"] in COUNTED for r in results) >= opts.max or time.time() > deadline:
            break
        results += s.evaluate([m], 1, family_of(s.fams, m.file), deadline)
    s.finish()
    unfinished = sum(r["status"] == "unfinished" for r in results)
    if unfinished:
        log("%d mutant(s) unfinished when the %d s budget ran out (reported, not failed)" % (unfinished, opts.budget))
    ok = s.report(results, opts.report)
    if not ok:
        print("mutation: FAIL: a survivor above is in neither tests/mutation/equivalent.txt nor accepted.txt:"
              " add a test that kills it, or list it with its reason")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--srcdir", default=os.path.dirname(os.path.dirname(HERE)))
    p.add_argument("--workdir")
    p.add_argument("--test-limit", type=int, default=60)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--remap", action="store_true", help="rebuild the coverage map (after a test gained cases)")
    p.add_argument("--remap-test", action="append", help="map this test again (its text changed)")
    p.add_argument("--report", help="also write the report and the results (JSON) to this file")
    sub = p.add_subparsers(dest="cmd", required=True)
    pl = sub.add_parser("list")
    pl.add_argument("files", nargs="+")
    pr = sub.add_parser("run")
    pr.add_argument("--sample", type=int, default=0)
    pr.add_argument("--seed", type=int, default=1)
    pr.add_argument("--family", action="append")
    pr.add_argument("files", nargs="*")
    pc = sub.add_parser("ci")
    pc.add_argument("--commits", type=int, default=20)
    pc.add_argument("--max", type=int, default=8)
    pc.add_argument("--seed", type=int, default=1)
    pc.add_argument("--budget", type=int, default=240, help="seconds for the whole stage (240)")
    sub.add_parser("map")
    pa = sub.add_parser("rerun")
    pa.add_argument("earlier", help="an earlier run's --report file (its .json beside it)")
    pa.add_argument("--all", action="store_true", help="the survivors in a list too")
    opts = p.parse_args()
    if opts.cmd == "run" and not opts.family and not opts.files:
        p.error("run: name --family or files")
    s = Session(opts)
    return {"list": cmd_list, "run": cmd_run, "ci": cmd_ci, "map": cmd_map, "rerun": cmd_rerun}[opts.cmd](s, opts)


if __name__ == "__main__":
    sys.exit(main())
