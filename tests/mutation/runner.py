"""Running one mutant: written into the workspace's copy, compiled, compared with the
original object, linked into the shared core, then the tests that cover it run until
one fails.

Outcomes:
  killed      a test failed (the first failing test is recorded)
  survived    every covering test passed (or skipped)
  uncovered   no test executes the mutated line (a survivor no test can catch)
  timeout     a covering test hung and the harness killed it (not counted as caught)
  identical   the object file is byte-identical to the original's: dropped
  stillborn   the mutant does not compile: dropped
  gone        (rerun) the code the mutant changed no longer exists: dropped
  unfinished  the run's deadline (mutate.py ci --budget) came before its last test
"""
import glob
import os
import time

from workspace import run


def object_of(build, rel):
    """The PIC object of one library source in the -O2 build."""
    d, base = os.path.split(rel)
    hits = glob.glob(os.path.join(build, d, ".libs", "libgaaw_core_la-%s.o" % base[:-2]))
    return hits[0] if hits else None


class Runner:
    def __init__(self, ws, cov_map, test_limit=60):
        self.ws = ws
        self.map = cov_map
        self.limit = test_limit
        self.env = ws.test_env(ws.build, {"GAAW_TEST_TIMEOUT": str(test_limit)})
        self.originals = {}
        self.times = {}   # path -> (atime, mtime) before the first mutant touched it
        self.kills = {}   # (file, test) -> mutants of that file the test killed so far

    def original_object(self, rel):
        if rel not in self.originals:
            obj = object_of(self.ws.build, rel)
            if obj is None:
                raise SystemExit("mutation: %s is not compiled into libgaaw_core in this build" % rel)
            with open(obj, "rb") as f:
                self.originals[rel] = (obj, f.read())
            lo = os.path.join(os.path.dirname(os.path.dirname(obj)), os.path.basename(obj)[:-2] + ".lo")
            for path in (os.path.join(self.ws.src, rel), obj, lo, os.path.join(self.ws.build, "libgaaw_core.la"),
                         os.path.join(self.ws.build, ".libs", "libgaaw_core.a")):
                if path not in self.times and os.path.exists(path):
                    st = os.stat(path)
                    self.times[path] = (st.st_atime_ns, st.st_mtime_ns)
        return self.originals[rel]

    def tests_for(self, m):
        """The tests that executed the mutant's line. A line gcov does not count (a
        statement's continuation) stands for the nearest counted line above it in its
        function; a mutant with none (a table's entry) is run by every test of its file."""
        by_test = self.map["files"].get(m.file, {})
        executable = set(self.map["executable"].get(m.file, []))
        secs = self.map["seconds"]
        line = m.line
        while line not in executable and line > m.function_line:
            line -= 1
        if line in executable:
            hit = [t for t, lines in by_test.items() if line in set(lines)]
        else:
            hit = list(by_test)
        # the tests that killed this file's mutants before go first: a mutant is then
        # usually killed by its first test; the rest fastest first
        order = lambda t: (-self.kills.get((m.file, t), 0), secs.get(t, 0), t)
        return sorted(hit, key=order)

    def build_mutant(self, m, text):
        path = os.path.join(self.ws.src, m.file)
        obj, original = self.original_object(m.file)
        with open(path, "w") as f:
            f.write(m.apply(text))
        p = run(["make", "-s", "libgaaw_core.la"], cwd=self.ws.build, check=False, timeout=300)
        if p.returncode != 0:
            return "stillborn"
        with open(obj, "rb") as f:
            if f.read() == original:
                return "identical"
        if self.ws.link_core(self.ws.build).returncode != 0:
            return "stillborn"
        return None

    def restore(self, m, text):
        with open(os.path.join(self.ws.src, m.file), "w") as f:
            f.write(text)

    def run(self, m, text, deadline=None):
        """The outcome of one mutant: dict(status, test, output, seconds, tests_run).
        Past the deadline no further test starts and a mutant not yet killed is
        `unfinished`."""
        t0 = time.time()
        tests = self.tests_for(m)
        result = {"status": None, "test": None, "output": "", "tests_run": 0}
        try:
            dropped = self.build_mutant(m, text)
            if dropped:
                result["status"] = dropped
                return result
            if not tests:
                result["status"] = "uncovered"
                return result
            for test in tests:
                # a test that would run past the deadline is not started
                if deadline and time.time() + 1.5 * self.map["seconds"].get(test, 10) > deadline:
                    result["status"] = "unfinished"
                    return result
                # the limit, or 1.5 times what the (slower) coverage build took
                limit = max(self.limit, int(1.5 * self.map["seconds"].get(test, 0)))
                env = dict(self.env, GAAW_TEST_TIMEOUT=str(limit))
                status, _, out = self.ws.run_test(self.ws.build, test, env, limit)
                result["tests_run"] += 1
                if status == "fail":
                    result.update(status="killed", test=test, output=out)
                    self.kills[(m.file, test)] = self.kills.get((m.file, test), 0) + 1
                    return result
                if status == "timeout":   # a hang: not caught, and the next test would hang too
                    result.update(status="timeout", test=test, output=out)
                    return result
            result["status"] = "survived"
            return result
        finally:
            self.restore(m, text)
            result["seconds"] = round(time.time() - t0, 1)

    def finish(self):
        """Rebuilds the original library after the last mutant, and gives the files the
        mutants touched their old times back: their contents are the originals again, so
        the next make need not relink every program."""
        run(["make", "-s", "libgaaw_core.la"], cwd=self.ws.build, check=False)
        self.ws.link_core(self.ws.build)
        for path, times in self.times.items():
            os.utime(path, ns=times)
