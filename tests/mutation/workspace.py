"""The mutation workspace: a copy of the source tree (mutants are written there, never
into the checkout), two builds of it without CUDA, OpenCL and Fortran, and the map of
which test covers which line.

  WORK/src       the copy (refreshed from the checkout at each run)
  WORK/build     -O2 without -g (so an equivalent edit leaves the object byte-identical);
                 every program links the library as one shared object, WORK/build/mutcore,
                 so a mutant costs one compile and one link, not a relink of every test
  WORK/cov       -O1 --coverage: each test run once with its own GCOV_PREFIX
  WORK/map.json  {file: {test: [lines it executed]}}, {test: seconds}; a test added is
                 mapped alone, a source file added remaps every test
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

CONFIGURE_ARGS = ["--without-cuda", "--without-opencl", "--disable-fortran", "--disable-static"]
CORE_ARCHIVE = ".libs/libgaaw_core.a"
MUTCORE_DIR = "mutcore"
MUTCORE_SO = "libgaaw_mut.so"
NOT_LIBRARY = ("tests/", "examples/", "bench/", "ports/", "device-kit/")   # C files outside libgaaw


def log(msg):
    print("mutation: " + msg, flush=True)


def run(cmd, cwd=None, env=None, timeout=None, check=True):
    p = subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    if check and p.returncode != 0:
        sys.exit("mutation: %s failed (exit %d):\n%s" % (" ".join(cmd), p.returncode, p.stdout[-4000:]))
    return p


def makefile_vars(build):
    """The configure-substituted variables of a build's Makefile (NAME = value)."""
    out = {}
    with open(os.path.join(build, "Makefile")) as f:
        for line in f:
            m = re.match(r"^([A-Z_][A-Z0-9_]*) = (.*)$", line.rstrip("\n"))
            if m:
                out[m.group(1)] = m.group(2)
    return out


class Workspace:
    def __init__(self, srcdir, workdir, jobs=2):
        self.checkout = os.path.abspath(srcdir)
        self.work = os.path.abspath(workdir)
        self.src = os.path.join(self.work, "src")
        self.build = os.path.join(self.work, "build")
        self.cov = os.path.join(self.work, "cov")
        self.map_path = os.path.join(self.work, "map.json")
        self.jobs = jobs

    # --- the copy ---------------------------------------------------------------------
    def tree_files(self):
        """The checkout's files: git's tracked and untracked-but-not-ignored ones, and the
        generated build system (configure, Makefile.in, ...) when the checkout has it."""
        p = run(["git", "ls-files", "-co", "--exclude-standard"], cwd=self.checkout)
        files = [f for f in p.stdout.splitlines() if f]
        for gen in ("configure", "Makefile.in", "aclocal.m4", "config.h.in"):
            if os.path.exists(os.path.join(self.checkout, gen)):
                files.append(gen)
        for d in ("build-aux", "m4"):
            for root, _, names in os.walk(os.path.join(self.checkout, d)):
                files += [os.path.relpath(os.path.join(root, n), self.checkout) for n in names]
        return sorted(set(f for f in files if os.path.isfile(os.path.join(self.checkout, f))))

    def sync(self):
        """Copies changed files into WORK/src, keeping timestamps of unchanged ones (so the
        builds stay incremental). Returns the names that changed."""
        changed = []
        for rel in self.tree_files():
            a, b = os.path.join(self.checkout, rel), os.path.join(self.src, rel)
            with open(a, "rb") as f:
                data = f.read()
            if os.path.exists(b):
                with open(b, "rb") as f:
                    if f.read() == data:
                        continue
            os.makedirs(os.path.dirname(b), exist_ok=True)
            shutil.copy2(a, b)
            changed.append(rel)
        if not os.path.exists(os.path.join(self.src, "configure")):
            log("autoreconf in the copy (the checkout has no configure)")
            run(["autoreconf", "-fi"], cwd=self.src)
        return changed

    # --- the builds -------------------------------------------------------------------
    def configure(self, build, cflags):
        if os.path.exists(os.path.join(build, "Makefile")):
            return
        os.makedirs(build, exist_ok=True)
        log("configuring %s (CFLAGS=%s)" % (build, cflags))
        run([os.path.join(self.src, "configure")] + CONFIGURE_ARGS +
            ["CFLAGS=" + cflags, "LDFLAGS=" + ("--coverage" if "coverage" in cflags else "")], cwd=build)

    def program_overrides(self, build):
        """make variables that link every program and test to WORK/build/mutcore."""
        d = os.path.join(build, MUTCORE_DIR)
        libs = "-L%s -lgaaw_mut -Wl,-rpath,%s $(BLAS_LIBS) $(JANSSON_LIBS) $(XXHASH_LIBS) " \
               "$(LIBURING_LIBS) $(MPI_LIBS) $(OPENMP_CFLAGS) -lm $(OPENMP_RUNTIME_LIBS)" % (d, d)
        return ["GAAW_TEST_LIBS=" + libs + " libgaaw_ompwait.la", "GAAW_PROGRAM_LIBS=" + libs]

    def link_core(self, build):
        v = makefile_vars(build)
        d = os.path.join(build, MUTCORE_DIR)
        os.makedirs(d, exist_ok=True)
        cmd = [v["CC"], "-shared", "-o", os.path.join(d, MUTCORE_SO), "-Wl,-soname," + MUTCORE_SO,
               "-Wl,--whole-archive", os.path.join(build, CORE_ARCHIVE), "-Wl,--no-whole-archive"]
        for name in ("BLAS_LIBS", "JANSSON_LIBS", "XXHASH_LIBS", "LIBURING_LIBS", "MPI_LIBS",
                     "OPENMP_CFLAGS", "OPENMP_RUNTIME_LIBS", "LDFLAGS"):
            cmd += v.get(name, "").split()
        # the OpenMP wait policy's own library (Makefile.am says why it is apart)
        libs = os.path.join(build, ".libs")
        cmd += ["-L" + libs, "-lgaaw_ompwait", "-Wl,-rpath," + libs, "-lm"]
        return run(cmd, check=False)

    def build_tree(self, build, cflags, programs=None):
        """The library, its shared core, and the programs (default: every program and
        test, as make check builds them; TESTS= runs none), linked to the core."""
        self.configure(build, cflags)
        run(["make", "-j%d" % self.jobs, "libgaaw_core.la", "libgaaw_ompwait.la"], cwd=build)
        p = self.link_core(build)
        if p.returncode != 0:
            sys.exit("mutation: linking %s failed:\n%s" % (MUTCORE_SO, p.stdout[-3000:]))
        targets = ["check", "TESTS="] if programs is None else sorted(programs)
        if targets:
            run(["make", "-j%d" % self.jobs] + targets + self.program_overrides(build), cwd=build)

    def programs_for(self, build, tests):
        """The make targets that the tests run: a compiled test itself; for a script, the
        programs and test libraries its text names (./examples/gaaw-train, ...)."""
        known = set(run(["make", "-s", "mutation-list-programs"], cwd=build).stdout.split())
        out = set()
        for t in tests:
            if t in known:
                out.add(t)
                continue
            with open(os.path.join(self.src, t), errors="replace") as f:
                text = f.read()
            for name in re.findall(r"(?:tests|examples|bench)/[A-Za-z0-9_/.-]+", text):
                name = name.rstrip(".")
                if name in known:
                    out.add(name)
                elif name.endswith(".libs/libgaaw_fault.so"):
                    out.add("tests/harness/libgaaw_fault.la")
        return out

    def tests(self, build):
        p = run(["make", "-s", "mutation-list-tests"], cwd=build)
        return p.stdout.split()

    def test_env(self, build, extra=None):
        v = makefile_vars(build)
        env = dict(os.environ)
        env.update({"GAAW_TOP_SRCDIR": self.src, "MPIEXEC": v.get("MPIEXEC", ""),
                    "GAAW_COMM_TIMEOUT": "10", "GAAW_TEST_TIMEOUT": "60"})
        env.update(extra or {})
        return env

    def run_test(self, build, test, env, limit):
        """One test through the project's harness; (status, seconds, output tail) where
        status is pass, skip, fail or timeout."""
        t0 = time.time()
        # a compiled test is in the build, a script in the source tree (as make check's
        # VPATH finds it)
        path = test if os.path.exists(os.path.join(build, test)) else os.path.join(self.src, test)
        try:
            p = subprocess.run([os.path.join(build, "tests/harness/run-test"), path], cwd=build,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", timeout=limit + 30)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc = 124
        secs = time.time() - t0
        if rc == 0:
            return "pass", secs, ""
        if rc == 77:
            return "skip", secs, ""
        if rc in (124, 137) or "timed out after" in out:
            return "timeout", secs, out[-1500:]
        return "fail", secs, out[-1500:]

    # --- the coverage map -------------------------------------------------------------
    def sources_stamp(self):
        """The names of the library's sources: adding or removing one remaps every test
        (an existing test may run the new file)."""
        h = hashlib.sha256()
        for rel in self.tree_files():
            if rel.endswith(".c") and not rel.startswith(NOT_LIBRARY):
                h.update(rel.encode() + b"\0")
        return h.hexdigest()

    def load_map(self, remap=False, refresh=()):
        """The map: rebuilt whole when a source file is added or removed (or with
        remap); a test added is run alone and merged in, a test removed dropped. A
        test whose text changed keeps its old lines until --remap, or until it is
        named in refresh (--remap-test), which maps it alone again."""
        self.build_tree(self.cov, "-O1 --coverage")
        tests = self.tests(self.cov)
        sources = self.sources_stamp()
        m = None
        if os.path.exists(self.map_path) and not remap:
            with open(self.map_path) as f:
                m = json.load(f)
            if m.get("sources") != sources:
                log("a source file was added or removed: remapping every test")
                m = None
        if m is None:
            m = self.build_map(tests)
        else:
            for t in refresh:
                m["seconds"].pop(t, None)
                for by_test in m["files"].values():
                    by_test.pop(t, None)
            new = [t for t in tests if t not in m["seconds"]]
            gone = [t for t in list(m["seconds"]) if t not in tests]
            if not new and not gone:
                return m
            log("coverage map: %d test(s) added, %d removed" % (len(new), len(gone)))
            for t in gone:
                del m["seconds"][t]
                for by_test in m["files"].values():
                    by_test.pop(t, None)
            if new:
                part = self.build_map(new)
                m["seconds"].update(part["seconds"])
                for rel, by_test in part["files"].items():
                    m["files"].setdefault(rel, {}).update(by_test)
        m["sources"] = sources
        with open(self.map_path + ".tmp", "w") as f:
            json.dump(m, f)
        os.replace(self.map_path + ".tmp", self.map_path)
        return m

    def build_map(self, tests):
        prefix_root = os.path.join(self.work, "gcda")
        for test in tests:
            shutil.rmtree(os.path.join(prefix_root, test.replace("/", "__")), ignore_errors=True)
        env0 = self.test_env(self.cov, {"GAAW_TEST_TIMEOUT": "600", "GAAW_COMM_TIMEOUT": "300"})
        log("coverage map: running %d tests once each under gcov" % len(tests))

        def one(test):
            env = dict(env0)
            env["GCOV_PREFIX"] = os.path.join(prefix_root, test.replace("/", "__"))
            status, secs, _ = self.run_test(self.cov, test, env, 600)
            return test, status, secs

        seconds, files = {}, {}
        with ThreadPoolExecutor(self.jobs) as pool:
            for test, status, secs in pool.map(one, tests):
                seconds[test] = round(secs, 2)
                if status in ("fail", "timeout"):
                    log("warning: %s %s in the coverage build" % (test, status))
        for test in tests:
            for rel, lines in self.covered_lines(os.path.join(prefix_root, test.replace("/", "__"))).items():
                files.setdefault(rel, {})[test] = lines
        return {"seconds": seconds, "files": files, "executable": self.executable_lines()}

    def gcov_json(self, objdir, gcda):
        p = run(["gcov", "--json-format", "--stdout", "-o", objdir, gcda], cwd=objdir, check=False)
        docs = []
        for line in p.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    docs.append(json.loads(line))
                except ValueError:
                    pass
        return docs

    def source_rel(self, name, cwd):
        path = os.path.normpath(os.path.join(cwd or "", name))
        if path.startswith(self.src + os.sep):
            return os.path.relpath(path, self.src)
        return None

    def covered_lines(self, prefix):
        """{source file: [lines executed]} from one test's gcda files under prefix."""
        out = {}
        root = prefix + self.cov
        for dirpath, _, names in os.walk(root):
            for n in names:
                if not n.endswith(".gcda"):
                    continue
                objdir = os.path.join(self.cov, os.path.relpath(dirpath, root))
                gcno = os.path.join(objdir, n[:-5] + ".gcno")
                if not os.path.exists(gcno):
                    continue
                link = os.path.join(dirpath, n[:-5] + ".gcno")
                if not os.path.exists(link):
                    os.symlink(gcno, link)
                for doc in self.gcov_json(dirpath, os.path.join(dirpath, n)):
                    cwd = doc.get("current_working_directory")
                    for f in doc.get("files", []):
                        rel = self.source_rel(f["file"], cwd)
                        if rel is None:
                            continue
                        lines = sorted(l["line_number"] for l in f["lines"] if l["count"] > 0)
                        if lines:
                            out.setdefault(rel, set()).update(lines)
        return {k: sorted(v) for k, v in out.items()}

    def executable_lines(self):
        """{source file: [lines gcov counts]}: a line outside it (a declaration, a table)
        is run by every test of its file, a line inside it only by the tests that ran it."""
        out = {}
        for dirpath, _, names in os.walk(self.cov):
            if os.path.basename(dirpath) != ".libs":
                continue
            for n in names:
                if not n.endswith(".gcno"):
                    continue
                for doc in self.gcov_json(dirpath, os.path.join(dirpath, n)):
                    for f in doc.get("files", []):
                        rel = self.source_rel(f["file"], doc.get("current_working_directory"))
                        if rel:
                            out.setdefault(rel, set()).update(l["line_number"] for l in f["lines"])
        return {k: sorted(v) for k, v in out.items()}
