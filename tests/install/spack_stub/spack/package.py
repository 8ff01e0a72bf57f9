"""The part of Spack's `spack.package` that gaaw's recipe uses, recording what the
recipe declares so that tests/install/test_spack_recipe.py can check it. Not Spack:
directives append to the lists below instead of building a package class."""

variants = {}      # name -> default
dependencies = []  # (name, when)
conflict_list = []  # (spec, when)
versions = []


def version(name, **kwargs):
    versions.append(name)


def variant(name, default=None, description="", values=None, multi=False, **kwargs):
    variants[name] = default


def depends_on(name, type=None, when=None, **kwargs):
    dependencies.append((name, when))


def conflicts(spec, when=None, msg=None):
    conflict_list.append((spec, when))


class AutotoolsPackage:
    pass


class CudaPackage:
    # Spack's CudaPackage: the cuda variant and the compute capabilities to build for
    variant("cuda", default=False, description="Build with CUDA")
    variant("cuda_arch", default="none", description="CUDA architectures", multi=True)
