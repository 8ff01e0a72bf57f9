# Spack recipe for gaaw: copy this file to
# <your repo>/packages/gaaw/package.py (`spack repo create`, `spack repo add`), then
# `spack install gaaw +fortran ^mpich ^openblas`.
#
# gaaw has no public download yet: `url` below names the release tarball that
# `make dist` writes; put it where your site keeps sources (or use a Spack mirror)
# and add its sha256 to version(), or install with `spack install --no-checksum`.
from spack.package import *


class Gaaw(AutotoolsPackage, CudaPackage):
    """Tensor, pipeline and ZeRO data parallelism for neural-network training in C
    and Fortran codes, over MPI, with host (BLAS), OpenCL and CUDA backends."""

    url = "file:///opt/sources/gaaw-0.1.0.tar.gz"

    version("0.1.0")

    # Variant cuda (and cuda_arch) come from CudaPackage.
    variant("nccl", default=True, description="NCCL communicator for GPU groups (needs +cuda)")
    variant("opencl", default=False, description="OpenCL backend with CLBlast GEMM")
    variant("fortran", default=True, description="Fortran module gaaw (gaaw.mod)")

    depends_on("c", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("pkgconfig", type="build")
    depends_on("mpi")
    depends_on("blas")
    depends_on("jansson")
    depends_on("xxhash")
    depends_on("liburing")
    depends_on("nccl", when="+nccl+cuda")
    depends_on("opencl", when="+opencl")
    depends_on("clblast", when="+opencl")

    conflicts("+nccl", when="~cuda", msg="NCCL is used only by the CUDA backend")

    def configure_args(self):
        spec = self.spec
        # The MPI that Spack chose, by its wrapper (wins over the system's pkg-config
        # `mpi`), and the launcher beside it for make check.
        args = ["MPICC={0}".format(spec["mpi"].mpicc)]
        # gaaw takes a CBLAS by the prefix of its library (DIR/lib, DIR/include/cblas.h).
        args.append("--with-blas={0}".format(spec["blas"].prefix))
        # checkpoint metadata (JSON) and checksums (XXH3), both required
        args.append("--with-jansson={0}".format(spec["jansson"].prefix))
        args.append("--with-xxhash={0}".format(spec["xxhash"].prefix))
        # io_uring for offload_optimizer=nvme (else pread/pwrite)
        args.append("--with-liburing={0}".format(spec["liburing"].prefix))
        if spec.satisfies("+fortran"):
            # the wrapper, so that the Fortran tests' `use mpi` is the same MPI
            args += ["--enable-fortran=yes", "FC={0}".format(spec["mpi"].mpifc)]
        else:
            args.append("--disable-fortran")
        if spec.satisfies("+cuda"):
            args.append("--with-cuda={0}".format(spec["cuda"].prefix))
            archs = [a for a in spec.variants["cuda_arch"].value if a != "none"]
            if archs:
                args.append("--with-cuda-arch={0}".format(" ".join(archs)))
        else:
            args.append("--without-cuda")
        if spec.satisfies("+nccl"):
            args.append("--with-nccl={0}".format(spec["nccl"].prefix))
        else:
            args.append("--without-nccl")
        if spec.satisfies("+opencl"):
            args += ["--with-opencl={0}".format(spec["opencl"].prefix),
                     "--with-clblast={0}".format(spec["clblast"].prefix)]
        else:
            args += ["--without-opencl", "--without-clblast"]
        return args
