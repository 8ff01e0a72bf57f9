#!/bin/sh
# The installed library works for users: every program of $examples below is built
# against an installation of gaaw twice, with pkg-config (`$MPICC x.c $(pkg-config
# --cflags --libs gaaw)`, the Fortran ones with the Fortran MPI wrapper) and with
# CMake (one project: find_package(gaaw) and gaaw::gaaw), and each build runs under
# $MPIEXEC on its rank count; the installed gaaw-info runs too.
#
# Which installation: run from the build directory, as `make check` does, it installs
# into a temporary DESTDIR and checks that copy. With GAAW_INSTALLED_PCDIR set (the
# folder of an installed gaaw.pc; `make installcheck` does this) nothing is installed
# and that installation is checked, under GAAW_INSTALLED_SYSROOT if set.
#
# Environment (make check and make installcheck pass what configure found):
#   GAAW_TOP_SRCDIR  the source tree (the examples' sources)
#   MPICC, MPIEXEC   the MPI C wrapper and launcher of the MPI gaaw was built with
#   GAAW_MPIFC       the Fortran compiler that knows `use mpi`; empty: Fortran not run
#   CMAKE            cmake (default: cmake in PATH; none: the CMake builds are not run)
# Skips (77) without the C wrapper, pkg-config or mpiexec.

# The programs built and run against the installed gaaw, one per line: the source
# (from the top of the source tree) and the number of ranks it runs on.
examples='
examples/hello_gaaw.c 2
tests/install/installed_version.c 1
tests/install/installed_version.f90 1
examples/insitu/heat_surrogate.c 2
examples/insitu/heat_surrogate.f90 2
'

# absolute: the builds below run in folders of their own (make check passes a relative
# top_srcdir in VPATH builds, as make distcheck's)
srcdir=`cd "${GAAW_TOP_SRCDIR:-.}" && pwd` || exit 1
mpicc=${MPICC:-mpicc}
mpifc=$GAAW_MPIFC
cmake=${CMAKE:-cmake}
for tool in "$mpicc" pkg-config "${MPIEXEC%% *}"; do
  if test -n "$tool" && command -v "$tool" >/dev/null 2>&1; then :; else
    echo "no '$tool' (MPICC, pkg-config, MPIEXEC): skipped"
    exit 77
  fi
done

work=`mktemp -d "${TMPDIR:-/tmp}/gaaw-install.XXXXXX"` || exit 1
trap 'rm -rf "$work"' 0

if test -n "$GAAW_INSTALLED_PCDIR"; then
  pcdir=$GAAW_INSTALLED_PCDIR
  sysroot=$GAAW_INSTALLED_SYSROOT
else
  sysroot=$work/root
  # The harness's make flags (jobserver) do not apply to this make.
  if MAKEFLAGS= ${MAKE:-make} install DESTDIR="$sysroot" >"$work/install.log" 2>&1; then :; else
    cat "$work/install.log"
    echo "FAIL: make install DESTDIR=$sysroot"
    exit 1
  fi
  pcdir=`find "$sysroot" -name gaaw.pc | sed 's,/[^/]*$,,'`
fi
if test ! -f "$pcdir/gaaw.pc"; then
  echo "FAIL: no gaaw.pc in '$pcdir'"
  exit 1
fi

# Point the file's prefix at the copy under the sysroot (the DESTDIR install);
# libdir, includedir and fmoddir derive from it.
prefix=`PKG_CONFIG_PATH="$pcdir" pkg-config --variable=prefix gaaw`
pc() { PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$sysroot$prefix" "$@" gaaw; }
flags=`pc --cflags --libs` || { echo "FAIL: pkg-config --cflags --libs gaaw"; exit 1; }
version=`pc --modversion`
libdir=`pc --variable=libdir`
fmoddir=`pc --variable=fmoddir`
echo "pkg-config: $flags"
echo "libdir: $libdir  fmoddir: $fmoddir"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
fail=0

# The installed gaaw-info runs, and says whether the library has the Fortran module.
bindir=`pc --variable=exec_prefix`/bin
info=`"$bindir/gaaw-info"` || { echo "FAIL: $bindir/gaaw-info"; fail=1; }
if echo "$info" | grep '^  fortran  *yes$' >/dev/null && test ! -f "$fmoddir/gaaw.mod"; then
  echo "FAIL: the library has the Fortran module but $fmoddir/gaaw.mod is not installed"
  fail=1
fi
fortran=yes
if test -z "$mpifc" || test ! -f "$fmoddir/gaaw.mod"; then
  echo "no Fortran compiler with 'use mpi' or no installed gaaw.mod: the Fortran programs are not built"
  fortran=no
fi

# each_example FUNCTION: calls FUNCTION SOURCE RANKS NAME for every program of
# $examples that this installation can build (the Fortran ones need $fortran).
each_example() {
  set -- "$1" $examples
  each_fn=$1
  shift
  while test $# -ge 2; do
    case $1 in *.f90 | *.F90) test $fortran = yes || { shift 2; continue; } ;; esac
    $each_fn "$1" "$2" `basename "$1" | sed 's/\./_/'`
    shift 2
  done
}

# run HOW NAME RANKS: runs the program $work/HOW/NAME on RANKS ranks.
run() {
  if $MPIEXEC -n "$3" "$work/$1/$2" >"$work/run.log" 2>&1; then
    echo "ok: $1 $2 on $3 ranks: `tail -n 1 "$work/run.log"`"
  else
    cat "$work/run.log"
    echo "FAIL: $1 $2 on $3 ranks"
    fail=1
  fi
}

# With pkg-config, as the README shows.
build_with_pkg_config() {
  # C programs that call libm link it themselves, as users' codes do
  case $1 in *.c) compiler=$mpicc libm=-lm ;; *) compiler=$mpifc libm= ;; esac
  if (cd "$work/pkg-config" && $compiler -o "$3" "$srcdir/$1" $flags $libm) >"$work/build.log" 2>&1; then
    run pkg-config "$3" "$2"
  else
    cat "$work/build.log"
    echo "FAIL: $compiler $1 \`pkg-config --cflags --libs gaaw\`"
    fail=1
  fi
}
mkdir "$work/pkg-config" "$work/cmake" || exit 1
each_example build_with_pkg_config

# With CMake: one project holding every program, which first checks that a version
# gaaw is not is refused.
if command -v "$cmake" >/dev/null 2>&1; then :; else
  echo "no cmake: the CMake builds are not run"
  exit $fail
fi
languages=C
fc_arg=
if test $fortran = yes; then
  languages="C Fortran"
  fc_arg="-DCMAKE_Fortran_COMPILER=$mpifc"
fi
cmake_target() {
  echo "add_executable($3 \"$srcdir/$1\")"
  case $1 in
  *.c) echo "target_link_libraries($3 PRIVATE gaaw::gaaw m)" ;;
  *) echo "target_link_libraries($3 PRIVATE gaaw::gaaw)" ;;
  esac
}
cat >"$work/cmake/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.13)
project(gaaw_installed LANGUAGES $languages)
find_package(gaaw 99.0 QUIET)
if(gaaw_FOUND)
  message(FATAL_ERROR "find_package(gaaw 99.0) accepted gaaw \${gaaw_VERSION}")
endif()
find_package(gaaw $version EXACT REQUIRED)
`each_example cmake_target`
EOF
run_cmake_build() { run cmake/build "$3" "$2"; }
if (cd "$work/cmake" && "$cmake" -S . -B build -DCMAKE_PREFIX_PATH="$sysroot$prefix" $fc_arg &&
    "$cmake" --build build) >"$work/cmake.log" 2>&1; then
  echo "cmake: `grep -i 'found gaaw\|found MPI' "$work/cmake.log" | tr '\n' ' '`"
  each_example run_cmake_build
else
  cat "$work/cmake.log"
  echo "FAIL: the CMake project (find_package(gaaw), gaaw::gaaw) in $work/cmake"
  fail=1
fi
exit $fail
