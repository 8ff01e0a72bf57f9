"""Checks ports/spack/package.py against a stub of Spack (spack_stub/) and against
gaaw's own configure: the recipe declares the variants cuda, nccl, opencl and fortran
and depends on mpi, blas, jansson, xxhash and liburing; for every combination of the variants its
configure_args() maps each variant to its configure option (prefix of the dependency
when on, --without-X / --disable-X when off), and every option and variable it
passes is one that `configure --help` lists.

Usage: test_spack_recipe.py RECIPE CONFIGURE. Exit status 0 when all holds, 1 with
one line per failure otherwise."""
import importlib.util
import itertools
import os
import re
import subprocess
import sys

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


class Dep:
    def __init__(self, name):
        self.prefix = "/spack/" + name
        self.mpicc = "/spack/mpi/bin/mpicc"
        self.mpifc = "/spack/mpi/bin/mpif90"


class Variant:
    def __init__(self, value):
        self.value = value


class Spec:
    """A concrete spec with the given boolean variants; satisfies() understands the
    '+a~b' strings the recipe asks."""

    def __init__(self, on):
        self.on = on
        self.variants = {"cuda_arch": Variant(("80", "90"))}

    def satisfies(self, text):
        for sign, name in re.findall(r"([+~])(\w+)", text):
            if self.on[name] != (sign == "+"):
                return False
        return True

    def __getitem__(self, name):
        return Dep(name)


def configure_options(configure):
    """The --with-X/--without-X/--enable-X/--disable-X names and the variables that
    `configure --help` lists."""
    text = subprocess.run(["/bin/sh", configure, "--help"], capture_output=True, text=True,
                          check=True).stdout
    options = set(re.findall(r"^\s+--((?:with|without|enable|disable)-[\w-]+)", text, re.M))
    for name in list(options):  # --with-X implies --without-X, --enable-X --disable-X
        kind, _, rest = name.partition("-")
        other = {"with": "without", "without": "with", "enable": "disable", "disable": "enable"}[kind]
        options.add(other + "-" + rest)
    variables = set(re.findall(r"^\s+([A-Z][A-Z0-9_]*)\s", text, re.M))
    return options, variables


def main():
    recipe, configure = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "spack_stub"))
    import spack.package as stub

    spec_ = importlib.util.spec_from_file_location("gaaw_recipe", recipe)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    package_class = module.Gaaw
    check(issubclass(package_class, stub.AutotoolsPackage), "Gaaw is not an AutotoolsPackage")
    for name in ("cuda", "nccl", "opencl", "fortran"):
        check(name in stub.variants, "no variant %s" % name)
    depends = {name for name, _ in stub.dependencies}
    for name in ("mpi", "blas", "jansson", "xxhash", "liburing"):
        check((name, None) in stub.dependencies, "does not always depend on %s" % name)
    check(("nccl", "+nccl+cuda") in stub.dependencies, "nccl is not a dependency of +nccl+cuda")
    check("opencl" in depends and "clblast" in depends, "+opencl does not depend on opencl and clblast")
    check(("+nccl", "~cuda") in stub.conflict_list, "+nccl~cuda is not a conflict")

    options, variables = configure_options(configure)
    combos = 0
    for values in itertools.product([False, True], repeat=4):
        on = dict(zip(("cuda", "nccl", "opencl", "fortran"), values))
        if on["nccl"] and not on["cuda"]:
            continue  # the conflict above
        combos += 1
        package = package_class()
        package.spec = Spec(on)
        args = package.configure_args()
        where = "configure_args() for %s" % "".join(("+" if v else "~") + k for k, v in on.items())
        for arg in args:
            if arg.startswith("--"):
                check(arg[2:].split("=")[0] in options, "%s: %s is not a configure option" % (where, arg))
            else:
                check(arg.split("=")[0] in variables, "%s: %s is not a configure variable" % (where, arg))
        want = ["MPICC=/spack/mpi/bin/mpicc", "--with-blas=/spack/blas", "--with-jansson=/spack/jansson",
                "--with-xxhash=/spack/xxhash", "--with-liburing=/spack/liburing"]
        want += ["--with-cuda=/spack/cuda", "--with-cuda-arch=80 90"] if on["cuda"] else ["--without-cuda"]
        want += ["--with-nccl=/spack/nccl"] if on["nccl"] else ["--without-nccl"]
        want += (["--with-opencl=/spack/opencl", "--with-clblast=/spack/clblast"] if on["opencl"]
                 else ["--without-opencl", "--without-clblast"])
        want += (["--enable-fortran=yes", "FC=/spack/mpi/bin/mpif90"] if on["fortran"]
                 else ["--disable-fortran"])
        check(sorted(args) == sorted(want), "%s: %s, expected %s" % (where, args, want))
    for line in failures:
        print("FAIL: " + line)
    if not failures:
        print("spack recipe: variants %s, %d combinations of configure_args() as expected, "
              "each option known to configure" % (sorted(stub.variants), combos))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
