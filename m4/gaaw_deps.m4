# gaaw_deps.m4: detection of gaaw's dependencies.
#
# Every --with-X option takes yes, no, check or a directory (the install prefix of X).
# "check" (the default of the optional ones) builds X's support when X is found;
# "yes" or a directory makes a missing X a configure error that says what to install.

# GAAW_ARG_WITH(name, help, default)
# Sets gaaw_with_<name> to yes|no|check and gaaw_dir_<name> to the directory, if any.
AC_DEFUN([GAAW_ARG_WITH], [
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=yes|no|check|DIR@:>@], [$2 (default: $3)])],
              [], [with_[]m4_translit([$1], [-], [_])=$3])
  gaaw_dir_[]m4_translit([$1], [-], [_])=
  AS_CASE([$with_[]m4_translit([$1], [-], [_])],
    [yes|no|check], [gaaw_with_[]m4_translit([$1], [-], [_])=$with_[]m4_translit([$1], [-], [_])],
    [gaaw_with_[]m4_translit([$1], [-], [_])=yes
     gaaw_dir_[]m4_translit([$1], [-], [_])=$with_[]m4_translit([$1], [-], [_])])
])

# GAAW_TRY_LINK(cflags, libs, includes, body) -> sets gaaw_link_ok=yes|no
AC_DEFUN([GAAW_TRY_LINK], [
  gaaw_save_CFLAGS=$CFLAGS; gaaw_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $1"; LIBS="$2 $LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([$3], [$4])], [gaaw_link_ok=yes], [gaaw_link_ok=no])
  CFLAGS=$gaaw_save_CFLAGS; LIBS=$gaaw_save_LIBS
])

# ---------------------------------------------------------------- MPI (required)
AC_DEFUN([GAAW_CHECK_MPI], [
  GAAW_ARG_WITH([mpi], [MPI library: mpicc wrapper or pkg-config; MPI is required], [yes])
  AS_IF([test "x$gaaw_with_mpi" = xno],
        [AC_MSG_ERROR([gaaw requires MPI; --with-mpi=no is not possible. Install MPICH (Debian: apt-get install mpich libmpich-dev) or Open MPI.])])
  AC_MSG_CHECKING([for MPI compile and link flags])
  gaaw_mpicc=
  AS_IF([test -n "$gaaw_dir_mpi"],
    [AS_IF([test -x "$gaaw_dir_mpi/bin/mpicc"], [gaaw_mpicc="$gaaw_dir_mpi/bin/mpicc"],
           [MPI_CFLAGS="${MPI_CFLAGS:--I$gaaw_dir_mpi/include}"; MPI_LIBS="${MPI_LIBS:--L$gaaw_dir_mpi/lib -lmpi}"])])
  dnl MPICC names the wrapper of the chosen MPI (mpicc.openmpi next to MPICH): it wins
  dnl over pkg-config, whose `mpi` is whichever MPI the system made the default.
  AS_IF([test -z "$MPI_LIBS" && test -z "$gaaw_mpicc" && test -n "$MPICC"], [
    gaaw_mpicc=`command -v "$MPICC" 2>/dev/null`
    AS_IF([test -z "$gaaw_mpicc"], [AC_MSG_ERROR([MPICC=$MPICC is not an executable (a path, or a name in PATH)])])])
  AS_IF([test -z "$MPI_LIBS" && test -z "$gaaw_mpicc"], [
    for gaaw_pc in mpi mpich ompi-c; do
      AS_IF([$PKG_CONFIG --exists $gaaw_pc 2>/dev/null], [
        MPI_CFLAGS=`$PKG_CONFIG --cflags $gaaw_pc`; MPI_LIBS=`$PKG_CONFIG --libs $gaaw_pc`; break])
    done])
  AS_IF([test -z "$MPI_LIBS" && test -z "$gaaw_mpicc"], [AC_PATH_PROG([gaaw_mpicc], [mpicc])])
  AS_IF([test -n "$gaaw_mpicc"], [
    dnl MPICH answers -show, Open MPI --showme; keep the flags, drop the compiler name.
    gaaw_show=`$gaaw_mpicc -show 2>/dev/null || $gaaw_mpicc --showme 2>/dev/null`
    for gaaw_w in $gaaw_show; do
      AS_CASE([$gaaw_w], [-I*|-D*|-pthread], [MPI_CFLAGS="$MPI_CFLAGS $gaaw_w"],
                         [-L*|-l*|-Wl,*], [MPI_LIBS="$MPI_LIBS $gaaw_w"])
    done])
  AC_MSG_RESULT([$MPI_CFLAGS $MPI_LIBS])
  GAAW_TRY_LINK([$MPI_CFLAGS], [$MPI_LIBS], [[#include <mpi.h>]], [[MPI_Init(0, 0); MPI_Finalize();]])
  AS_IF([test "x$gaaw_link_ok" != xyes],
        [AC_MSG_ERROR([cannot compile and link an MPI program (MPI_CFLAGS='$MPI_CFLAGS' MPI_LIBS='$MPI_LIBS'). Install MPICH (Debian: apt-get install mpich libmpich-dev), or pass --with-mpi=DIR or MPI_CFLAGS/MPI_LIBS.])])
  AC_ARG_VAR([MPI_CFLAGS], [C compiler flags for MPI])
  AC_ARG_VAR([MPI_LIBS], [linker flags for MPI])
  AC_ARG_VAR([MPICC], [the MPI C wrapper whose flags to use (for example mpicc.openmpi); also what the install tests and gaawConfig.cmake compile MPI programs with])
  AC_ARG_VAR([MPIEXEC], [MPI launcher used by the tests (default: the one beside MPICC)])
  dnl The launcher of the same MPI: beside the wrapper, with its suffix
  dnl (mpicc.openmpi -> mpiexec.openmpi), else mpiexec in PATH.
  gaaw_mpiexec_beside=
  AS_CASE([`basename "$gaaw_mpicc" 2>/dev/null`], [mpicc*],
    [gaaw_mpiexec_beside=`dirname "$gaaw_mpicc"`/mpiexec`basename "$gaaw_mpicc" | sed 's/^mpicc//'`])
  AS_IF([test -z "$MPIEXEC"], [
    AS_IF([test -n "$gaaw_dir_mpi" && test -x "$gaaw_dir_mpi/bin/mpiexec"], [MPIEXEC="$gaaw_dir_mpi/bin/mpiexec"],
          [test -n "$gaaw_mpiexec_beside" && test -x "$gaaw_mpiexec_beside"], [MPIEXEC=$gaaw_mpiexec_beside],
          [AC_PATH_PROGS([MPIEXEC], [mpiexec mpirun], [])])])
  dnl Programs built against the installed gaaw (make installcheck, gaawConfig.cmake's
  dnl hint to FindMPI) use the wrapper of the same MPI.
  AS_IF([test -n "$gaaw_mpicc"], [MPICC=$gaaw_mpicc], [AC_PATH_PROG([MPICC], [mpicc], [])])
  AS_IF([test -z "$MPIEXEC"], [AC_MSG_WARN([no mpiexec found: MPI tests will be skipped])])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([MPICC])
])

# ---------------------------------------------------------------- BLAS
AC_DEFUN([GAAW_CHECK_BLAS], [
  GAAW_ARG_WITH([blas], [CBLAS library (OpenBLAS, BLIS, MKL); without one a blocked C GEMM is used], [check])
  BLAS_CFLAGS=; BLAS_LIBS=; gaaw_have_blas=no
  AS_IF([test "x$gaaw_with_blas" != xno], [
    AS_IF([test -n "$gaaw_dir_blas"], [
      for gaaw_lib in openblas blis mkl_rt cblas blas; do
        GAAW_TRY_LINK([-I$gaaw_dir_blas/include], [-L$gaaw_dir_blas/lib -l$gaaw_lib],
                      [[#include <cblas.h>]], [[cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, 0, 1, 0, 1, 0.0f, 0, 1);]])
        AS_IF([test "x$gaaw_link_ok" = xyes], [
          BLAS_CFLAGS="-I$gaaw_dir_blas/include"; BLAS_LIBS="-L$gaaw_dir_blas/lib -Wl,-rpath,$gaaw_dir_blas/lib -l$gaaw_lib"
          gaaw_have_blas=yes; break])
      done],
     [for gaaw_pc in openblas blis mkl-sdl; do
        AS_IF([$PKG_CONFIG --exists $gaaw_pc 2>/dev/null], [
          gaaw_c=`$PKG_CONFIG --cflags $gaaw_pc`; gaaw_l=`$PKG_CONFIG --libs $gaaw_pc`
          GAAW_TRY_LINK([$gaaw_c], [$gaaw_l], [[#include <cblas.h>]], [[cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, 0, 1, 0, 1, 0.0f, 0, 1);]])
          AS_IF([test "x$gaaw_link_ok" = xyes], [BLAS_CFLAGS=$gaaw_c; BLAS_LIBS=$gaaw_l; gaaw_have_blas=yes; break])])
      done
      AS_IF([test "x$gaaw_have_blas" = xno], [
        for gaaw_lib in openblas blis cblas blas; do
          GAAW_TRY_LINK([], [-l$gaaw_lib], [[#include <cblas.h>]], [[cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, 0, 1, 0, 1, 0.0f, 0, 1);]])
          AS_IF([test "x$gaaw_link_ok" = xyes], [BLAS_LIBS=-l$gaaw_lib; gaaw_have_blas=yes; break])
        done])])
    AS_IF([test "x$gaaw_have_blas" = xno && test "x$gaaw_with_blas" = xyes],
          [AC_MSG_ERROR([--with-blas was given but no CBLAS (cblas.h + cblas_sgemm) links. Install OpenBLAS (Debian: apt-get install libopenblas-dev) or pass --with-blas=DIR.])])
  ])
  AC_MSG_CHECKING([for CBLAS])
  AC_MSG_RESULT([$gaaw_have_blas $BLAS_LIBS])
  AS_IF([test "x$gaaw_have_blas" = xyes],
        [AC_DEFINE([GAAW_HAVE_CBLAS], [1], [CBLAS is available])
         gaaw_blas_summary="yes  $BLAS_LIBS"],
        [gaaw_blas_summary="no (blocked C GEMM fallback)"])
  AM_CONDITIONAL([HAVE_CBLAS], [test "x$gaaw_have_blas" = xyes])
  AC_SUBST([BLAS_CFLAGS])
  AC_SUBST([BLAS_LIBS])
])

# GAAW_CHECK_SIMPLE_LIB(name, NAME, header, lib, call, pkg, install-hint)
# Shared by OpenCL and CLBlast: header + library, optionally from DIR.
AC_DEFUN([GAAW_CHECK_SIMPLE_LIB], [
  GAAW_ARG_WITH([$1], [build the $1 support], [check])
  $2_CFLAGS=; $2_LIBS=; gaaw_have_$1=no
  AS_IF([test "x$gaaw_with_$1" != xno], [
    AS_IF([test -n "$gaaw_dir_$1"],
          [gaaw_c="-I$gaaw_dir_$1/include"; gaaw_l="-L$gaaw_dir_$1/lib -Wl,-rpath,$gaaw_dir_$1/lib -l$4"],
          [AS_IF([$PKG_CONFIG --exists $6 2>/dev/null],
                 [gaaw_c=`$PKG_CONFIG --cflags $6`; gaaw_l=`$PKG_CONFIG --libs $6`],
                 [gaaw_c=; gaaw_l=-l$4])])
    GAAW_TRY_LINK([$gaaw_c], [$gaaw_l], [[#define CL_TARGET_OPENCL_VERSION 300
#include <$3>]], [[$5;]])
    AS_IF([test "x$gaaw_link_ok" = xyes], [$2_CFLAGS=$gaaw_c; $2_LIBS=$gaaw_l; gaaw_have_$1=yes],
          [AS_IF([test "x$gaaw_with_$1" = xyes], [AC_MSG_ERROR([--with-$1 was given but $3 / -l$4 do not link. $7])])])
  ])
  AC_MSG_CHECKING([for $1])
  AC_MSG_RESULT([$gaaw_have_$1])
  AS_IF([test "x$gaaw_have_$1" = xyes], [AC_DEFINE([GAAW_HAVE_$2], [1], [$1 is available])
                                          gaaw_$1_summary="yes  $$2_LIBS"],
        [gaaw_$1_summary=no])
  AM_CONDITIONAL([HAVE_$2], [test "x$gaaw_have_$1" = xyes])
  AC_SUBST([$2_CFLAGS])
  AC_SUBST([$2_LIBS])
])

AC_DEFUN([GAAW_CHECK_OPENCL], [
  GAAW_CHECK_SIMPLE_LIB([opencl], [OPENCL], [CL/cl.h], [OpenCL], [cl_uint n; clGetPlatformIDs(0, 0, &n)], [OpenCL],
                        [Install an OpenCL loader and headers (Debian: apt-get install ocl-icd-opencl-dev opencl-headers pocl-opencl-icd).])
])

AC_DEFUN([GAAW_CHECK_CLBLAST], [
  GAAW_CHECK_SIMPLE_LIB([clblast], [CLBLAST], [clblast_c.h], [clblast], [CLBlastClearCache()], [clblast],
                        [Install CLBlast (Debian: apt-get install libclblast-dev).])
])

# io_uring for offload_optimizer=nvme's asynchronous file I/O; without it the nvme
# store reads and writes with pread/pwrite, one piece at a time.
AC_DEFUN([GAAW_CHECK_LIBURING], [
  GAAW_CHECK_SIMPLE_LIB([liburing], [LIBURING], [liburing.h], [uring], [struct io_uring r; io_uring_queue_init(1, &r, 0)],
                        [liburing], [Install liburing (Debian: apt-get install liburing-dev).])
])

# GAAW_CHECK_REQUIRED_LIB(name, NAME, header, lib, call, pkg, install-hint)
# A library gaaw cannot build without: from DIR, pkg-config, or the default paths;
# missing, configure stops and says what to install.
AC_DEFUN([GAAW_CHECK_REQUIRED_LIB], [
  GAAW_ARG_WITH([$1], [$1 (required)], [yes])
  AS_IF([test "x$gaaw_with_$1" = xno], [AC_MSG_ERROR([gaaw requires $1; --with-$1=no is not possible. $7])])
  AS_IF([test -n "$gaaw_dir_$1"],
        [gaaw_c="-I$gaaw_dir_$1/include"; gaaw_l="-L$gaaw_dir_$1/lib -Wl,-rpath,$gaaw_dir_$1/lib -l$4"],
        [AS_IF([$PKG_CONFIG --exists $6 2>/dev/null],
               [gaaw_c=`$PKG_CONFIG --cflags $6`; gaaw_l=`$PKG_CONFIG --libs $6`],
               [gaaw_c=; gaaw_l=-l$4])])
  GAAW_TRY_LINK([$gaaw_c], [$gaaw_l], [[#include <$3>]], [[$5;]])
  AC_MSG_CHECKING([for $1])
  AC_MSG_RESULT([$gaaw_link_ok $gaaw_l])
  AS_IF([test "x$gaaw_link_ok" != xyes], [AC_MSG_ERROR([$3 / -l$4 do not link (gaaw requires $1). $7 Or pass --with-$1=DIR.])])
  $2_CFLAGS=$gaaw_c; $2_LIBS=$gaaw_l
  gaaw_$1_summary="yes  $gaaw_l"
  AC_SUBST([$2_CFLAGS])
  AC_SUBST([$2_LIBS])
])

# Checkpoint metadata is JSON (Jansson), checkpoint data is checksummed (XXH3-64).
AC_DEFUN([GAAW_CHECK_JANSSON], [
  GAAW_CHECK_REQUIRED_LIB([jansson], [JANSSON], [jansson.h], [jansson], [json_decref(json_object())], [jansson],
                          [Install Jansson (Debian: apt-get install libjansson-dev).])
])
AC_DEFUN([GAAW_CHECK_XXHASH], [
  GAAW_CHECK_REQUIRED_LIB([xxhash], [XXHASH], [xxhash.h], [xxhash], [(void)XXH3_64bits("", 0)], [libxxhash],
                          [Install xxHash (Debian: apt-get install libxxhash-dev).])
])

# ---------------------------------------------------------------- CUDA and NCCL
AC_DEFUN([GAAW_CHECK_CUDA], [
  GAAW_ARG_WITH([cuda], [CUDA toolkit (nvcc, cudart, cuBLAS/cuBLASLt)], [check])
  AC_ARG_WITH([cuda-arch], [AS_HELP_STRING([--with-cuda-arch=LIST], [CUDA compute capabilities to build machine code for, and PTX for the last (default: "80 90")])],
              [gaaw_cuda_arch=$withval], [gaaw_cuda_arch="80 90"])
  CUDA_CFLAGS=; CUDA_LIBS=; NVCC=; gaaw_have_cuda=no
  AS_IF([test "x$gaaw_with_cuda" != xno], [
    gaaw_cuda_home=$gaaw_dir_cuda
    AS_IF([test -z "$gaaw_cuda_home"], [
      AS_IF([test -x /usr/local/cuda/bin/nvcc], [gaaw_cuda_home=/usr/local/cuda],
            [gaaw_nvcc=`command -v nvcc 2>/dev/null`
             AS_IF([test -n "$gaaw_nvcc"], [gaaw_cuda_home=`dirname \`dirname $gaaw_nvcc\``])])])
    AS_IF([test -n "$gaaw_cuda_home" && test -x "$gaaw_cuda_home/bin/nvcc"], [
      gaaw_cuda_libdir=$gaaw_cuda_home/lib64
      AS_IF([test -d "$gaaw_cuda_libdir"], [], [gaaw_cuda_libdir=$gaaw_cuda_home/lib])
      GAAW_TRY_LINK([-I$gaaw_cuda_home/include], [-L$gaaw_cuda_libdir -lcublasLt -lcublas -lcudart],
                    [[#include <cuda_runtime.h>
#include <cublasLt.h>]], [[int n; cudaGetDeviceCount(&n); cublasLtHandle_t h; cublasLtCreate(&h);]])
      AS_IF([test "x$gaaw_link_ok" = xyes], [
        gaaw_have_cuda=yes; NVCC=$gaaw_cuda_home/bin/nvcc
        CUDA_CFLAGS="-I$gaaw_cuda_home/include"
        CUDA_LIBS="-L$gaaw_cuda_libdir -Wl,-rpath,$gaaw_cuda_libdir -lcublasLt -lcublas -lcudart"])])
    AS_IF([test "x$gaaw_have_cuda" = xno && test "x$gaaw_with_cuda" = xyes],
          [AC_MSG_ERROR([--with-cuda was given but no working CUDA toolkit (bin/nvcc, cuda_runtime.h, cublasLt) was found${gaaw_cuda_home:+ under $gaaw_cuda_home}. Install the CUDA toolkit or pass --with-cuda=DIR.])])
  ])
  AC_MSG_CHECKING([for CUDA])
  AC_MSG_RESULT([$gaaw_have_cuda])
  dnl Machine code for each capability, and PTX for the last one, so that a newer GPU
  dnl than any named still runs (its driver compiles the PTX at first use).
  gaaw_cuda_gencode=; gaaw_a=
  for gaaw_a in $gaaw_cuda_arch; do gaaw_cuda_gencode="$gaaw_cuda_gencode -gencode arch=compute_$gaaw_a,code=sm_$gaaw_a"; done
  AS_IF([test -n "$gaaw_a"], [gaaw_cuda_gencode="$gaaw_cuda_gencode -gencode arch=compute_$gaaw_a,code=compute_$gaaw_a"])
  AS_IF([test "x$gaaw_have_cuda" = xyes],
        [AC_DEFINE([GAAW_HAVE_CUDA], [1], [CUDA is available])
         gaaw_cuda_summary="yes  $NVCC (the backend runs where a GPU is found)"],
        [gaaw_cuda_summary=no; gaaw_cuda_arch="-"])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$gaaw_have_cuda" = xyes])
  AC_SUBST([NVCC])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUDA_GENCODE], [$gaaw_cuda_gencode])
])

AC_DEFUN([GAAW_CHECK_NCCL], [
  GAAW_ARG_WITH([nccl], [NCCL for collectives among CUDA ranks], [check])
  NCCL_CFLAGS=; NCCL_LIBS=; gaaw_have_nccl=no
  AS_IF([test "x$gaaw_with_nccl" != xno && test "x$gaaw_have_cuda" = xyes], [
    gaaw_nccl_home=${gaaw_dir_nccl:-$gaaw_cuda_home}
    gaaw_nccl_libdir=$gaaw_nccl_home/lib64
    AS_IF([test -d "$gaaw_nccl_libdir"], [], [gaaw_nccl_libdir=$gaaw_nccl_home/lib])
    GAAW_TRY_LINK([-I$gaaw_nccl_home/include $CUDA_CFLAGS], [-L$gaaw_nccl_libdir -lnccl $CUDA_LIBS],
                  [[#include <nccl.h>]], [[int v; ncclGetVersion(&v);]])
    AS_IF([test "x$gaaw_link_ok" = xyes], [gaaw_have_nccl=yes
           NCCL_CFLAGS="-I$gaaw_nccl_home/include"; NCCL_LIBS="-L$gaaw_nccl_libdir -Wl,-rpath,$gaaw_nccl_libdir -lnccl"])])
  AS_IF([test "x$gaaw_have_nccl" = xno && test "x$gaaw_with_nccl" = xyes],
        [AC_MSG_ERROR([--with-nccl was given but nccl.h / -lnccl were not found (NCCL needs CUDA too). Install NCCL or pass --with-nccl=DIR.])])
  AC_MSG_CHECKING([for NCCL])
  AC_MSG_RESULT([$gaaw_have_nccl])
  AS_IF([test "x$gaaw_have_nccl" = xyes],
        [AC_DEFINE([GAAW_HAVE_NCCL], [1], [NCCL is available])
         gaaw_nccl_summary="yes  $NCCL_LIBS"],
        [gaaw_nccl_summary=no])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$gaaw_have_nccl" = xyes])
  AC_SUBST([NCCL_CFLAGS])
  AC_SUBST([NCCL_LIBS])
])

# ---------------------------------------------------------------- Fortran
AC_DEFUN([GAAW_CHECK_FORTRAN], [
  AC_ARG_ENABLE([fortran], [AS_HELP_STRING([--enable-fortran@<:@=yes|no|check@:>@], [build the Fortran module gaaw (default: check)])],
                [], [enable_fortran=check])
  gaaw_have_fortran=no
  dnl AC_PROG_FC runs in configure.ac before LT_INIT (libtool's Fortran support).
  AS_IF([test "x$enable_fortran" != xno], [
    AS_IF([test -n "$FC"], [
      AC_LANG_PUSH([Fortran])
      AC_FC_SRCEXT([f90])
      AC_COMPILE_IFELSE([AC_LANG_SOURCE([[
      module gaaw_probe
        use, intrinsic :: iso_c_binding
        implicit none
        type :: t
          type(c_ptr) :: p = c_null_ptr
        end type t
      end module gaaw_probe]])], [gaaw_have_fortran=yes], [])
      AC_LANG_POP([Fortran])
      rm -f gaaw_probe.mod])
    AS_IF([test "x$gaaw_have_fortran" = xno && test "x$enable_fortran" = xyes],
          [AC_MSG_ERROR([--enable-fortran was given but no Fortran 2003 compiler with iso_c_binding works. Install one (Debian: apt-get install gfortran).])])
  ])
  MPI_FCFLAGS=; MPI_FCLIBS=; gaaw_fc_mpi=no; gaaw_fortran_summary=no
  AS_IF([test "x$gaaw_have_fortran" = xyes], [
    dnl The Fortran runtime: libgaaw and the Fortran tests are linked by the C
    dnl compiler (whose OpenMP runtime the C objects need) with these libraries.
    AC_FC_LIBRARY_LDFLAGS
    dnl Does the Fortran compiler know `use mpi` (needed only by the Fortran tests)?
    AC_LANG_PUSH([Fortran])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [[      use mpi
      integer :: ierr
      call MPI_Init(ierr)
      call MPI_Finalize(ierr)]])], [gaaw_fc_mpi=yes], [])
    dnl If not (a compiler other than the one MPI was built with, such as flang-new
    dnl next to Debian's gfortran-built MPICH: mpi.mod is compiler-specific), the
    dnl tests' `use mpi` gets a module made of the compiler-neutral mpif.h, found
    dnl beside mpi.h, with the MPI's Fortran binding library (MPICH's mpifort or
    dnl mpichfort, Open MPI's mpi_mpifh).
    AS_IF([test "x$gaaw_fc_mpi" = xno], [
      gaaw_save_FCFLAGS=$FCFLAGS; gaaw_save_LIBS=$LIBS
      for gaaw_lib in mpifort mpichfort mpi_mpifh; do
        FCFLAGS="$gaaw_save_FCFLAGS `echo " $MPI_CFLAGS" | sed 's/ -[[^I]][[^ ]]*//g'`"
        LIBS="-l$gaaw_lib $MPI_LIBS $gaaw_save_LIBS"
        AC_LINK_IFELSE([AC_LANG_PROGRAM([], [[      implicit none
      include 'mpif.h'
      integer :: ierr
      call MPI_Init(ierr)
      call MPI_Finalize(ierr)]])], [gaaw_fc_mpi=mpif.h
          MPI_FCFLAGS=`echo " $MPI_CFLAGS" | sed 's/ -[[^I]][[^ ]]*//g'`; MPI_FCLIBS="-l$gaaw_lib"; break], [])
      done
      FCFLAGS=$gaaw_save_FCFLAGS; LIBS=$gaaw_save_LIBS])
    AC_LANG_POP([Fortran])
    AS_CASE([$gaaw_fc_mpi],
      [yes], [gaaw_fortran_summary="yes  $FC (tests: use mpi)"],
      [mpif.h], [gaaw_fortran_summary="yes  $FC (tests: use mpi through a module made of mpif.h, $MPI_FCLIBS)"],
      [gaaw_fortran_summary="yes  $FC (no MPI for Fortran: the Fortran tests are not built)"])])
  AC_SUBST([MPI_FCFLAGS])
  AC_SUBST([MPI_FCLIBS])
  AM_CONDITIONAL([ENABLE_FORTRAN], [test "x$gaaw_have_fortran" = xyes])
  AM_CONDITIONAL([FORTRAN_MPI], [test "x$gaaw_fc_mpi" != xno])
  AM_CONDITIONAL([FORTRAN_MPIF_H], [test "x$gaaw_fc_mpi" = xmpif.h])
])

# ---------------------------------------------------------------- gnuplot (optional)
# gaaw-plot draws with it at run time. --with-gnuplot=PATH names the program, yes makes
# a missing one an error, no compiles in none; the default searches PATH. Its absolute
# path is compiled into gaaw-plot (GNUPLOT, empty when none); without one gaaw-plot
# still builds and says at run time how to get gnuplot.
AC_DEFUN([GAAW_CHECK_GNUPLOT], [
  AC_ARG_WITH([gnuplot], [AS_HELP_STRING([--with-gnuplot@<:@=yes|no|check|PATH@:>@],
              [gnuplot, which gaaw-plot runs to draw gaaw-train's metrics (default: check, the first on PATH)])],
              [], [with_gnuplot=check])
  AC_ARG_VAR([GNUPLOT], [gnuplot program for gaaw-plot (absolute path)])
  AS_CASE([$with_gnuplot],
    [no], [GNUPLOT=],
    [yes|check], [AC_PATH_PROG([GNUPLOT], [gnuplot], [])
      AS_IF([test -z "$GNUPLOT" && test "x$with_gnuplot" = xyes],
            [AC_MSG_ERROR([--with-gnuplot: no gnuplot on PATH. Install it (Debian: apt-get install gnuplot-nox) or pass --with-gnuplot=PATH.])])],
    [AC_MSG_CHECKING([for gnuplot])
     AS_CASE([$with_gnuplot], [/*], [], [AC_MSG_ERROR([--with-gnuplot=$with_gnuplot: give an absolute path])])
     AS_IF([test -x "$with_gnuplot" && test ! -d "$with_gnuplot"], [GNUPLOT=$with_gnuplot],
           [AC_MSG_ERROR([--with-gnuplot=$with_gnuplot is not an executable])])
     AC_MSG_RESULT([$GNUPLOT])])
  AS_IF([test -n "$GNUPLOT"], [gaaw_gnuplot_summary="yes  $GNUPLOT (gaaw-plot; GAAW_GNUPLOT overrides)"],
        [gaaw_gnuplot_summary="no (gaaw-plot is built and asks for gnuplot when run)"])
])

# SentencePiece (a C++ library) for gaaw-prep's tokenizer (LLaMA 1/2, Mistral
# models); without it gaaw-prep writes bytes only. Found by pkg-config or in DIR,
# checked by linking a C++ program.
AC_DEFUN([GAAW_CHECK_SENTENCEPIECE], [
  GAAW_ARG_WITH([sentencepiece], [gaaw-prep's SentencePiece tokenizer], [check])
  SENTENCEPIECE_CFLAGS=; SENTENCEPIECE_LIBS=; gaaw_have_sentencepiece=no
  AS_IF([test "x$gaaw_with_sentencepiece" != xno], [
    AS_IF([test -n "$gaaw_dir_sentencepiece"],
          [gaaw_c="-I$gaaw_dir_sentencepiece/include"
           gaaw_l="-L$gaaw_dir_sentencepiece/lib -Wl,-rpath,$gaaw_dir_sentencepiece/lib -lsentencepiece"],
          [AS_IF([$PKG_CONFIG --exists sentencepiece 2>/dev/null],
                 [gaaw_c=`$PKG_CONFIG --cflags sentencepiece`; gaaw_l=`$PKG_CONFIG --libs sentencepiece`],
                 [gaaw_c=; gaaw_l=-lsentencepiece])])
    AC_LANG_PUSH([C++])
    gaaw_save_CXXFLAGS=$CXXFLAGS; gaaw_save_LIBS=$LIBS
    CXXFLAGS="$CXXFLAGS $gaaw_c"; LIBS="$gaaw_l $LIBS"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <sentencepiece_processor.h>]],
                                    [[sentencepiece::SentencePieceProcessor p; return p.GetPieceSize();]])],
                   [gaaw_have_sentencepiece=yes], [gaaw_have_sentencepiece=no])
    CXXFLAGS=$gaaw_save_CXXFLAGS; LIBS=$gaaw_save_LIBS
    AC_LANG_POP([C++])
    AS_IF([test "x$gaaw_have_sentencepiece" = xyes],
          [SENTENCEPIECE_CFLAGS=$gaaw_c; SENTENCEPIECE_LIBS=$gaaw_l],
          [AS_IF([test "x$gaaw_with_sentencepiece" = xyes],
                 [AC_MSG_ERROR([--with-sentencepiece was given but sentencepiece_processor.h / -lsentencepiece do not link (C++). Install SentencePiece (Debian: apt-get install libsentencepiece-dev).])])])
  ])
  AC_MSG_CHECKING([for sentencepiece])
  AC_MSG_RESULT([$gaaw_have_sentencepiece])
  AS_IF([test "x$gaaw_have_sentencepiece" = xyes],
        [AC_DEFINE([GAAW_HAVE_SENTENCEPIECE], [1], [SentencePiece is available to gaaw-prep])
         gaaw_sentencepiece_summary="yes  $SENTENCEPIECE_LIBS"],
        [gaaw_sentencepiece_summary="no (gaaw-prep writes bytes only)"])
  AM_CONDITIONAL([HAVE_SENTENCEPIECE], [test "x$gaaw_have_sentencepiece" = xyes])
  AC_SUBST([SENTENCEPIECE_CFLAGS])
  AC_SUBST([SENTENCEPIECE_LIBS])
])
