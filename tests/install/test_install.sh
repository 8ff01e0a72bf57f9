#!/bin/sh
# The installed library works for users: every program of $examples below is built
# against an installation of gaaw twice, with pkg-config (`$MPICC x.c $(pkg-config
# --cflags --libs gaaw)`, the Fortran ones with the Fortran MPI wrapper) and with
# CMake (one project: find_package(gaaw) and gaaw::gaaw), and each build runs under
# $MPIEXEC on its rank count, the CMake ones also after `cmake --install`; the
# installed gaaw-info and gaaw-plot run too. README.md's C training loop (its ```c block)
# and doc/fortran.md's Fortran one (between <!-- fortran-loop --> and
# <!-- /fortran-loop -->) are built and run the same way, as readme_loop.c and .f90 on
# 2 ranks, so that the pages cannot show a call that does not exist. Last, doc/insitu.md's commands for users' own programs
# (its block between <!-- insitu-commands --> and <!-- /insitu-commands -->) run as
# written, in a folder where _install is the installation checked here.
#
# Nothing sets LD_LIBRARY_PATH: the programs find libgaaw.so by the run path that
# gaaw.pc and gaaw::gaaw hand out, and each program's RUNPATH is checked to name
# gaaw's libdir (with readelf). The exceptions are said when they apply: a libdir the
# dynamic loader searches itself gets no run path, so its staged copy (below) is
# found through LD_LIBRARY_PATH; and the staged gaaw-info, linked by libtool for the
# final libdir, runs with it.
#
# Which installation: run from the build directory, as `make check` does, it installs
# into a temporary DESTDIR and checks that copy. With GAAW_INSTALLED_PCDIR set (the
# folder of an installed gaaw.pc; `make installcheck` does this) nothing is installed
# and that installation is checked, under GAAW_INSTALLED_SYSROOT if set.
#
# A staged copy (DESTDIR) still names the final prefix in gaaw.pc and in its run
# path; the test checks that, then builds against the copy with pkg-config's prefix
# moved to it (--define-variable=prefix=ROOT/PREFIX; libdir and the run path follow)
# and CMake's package relocated to it (gaawConfig.cmake does that itself), so what
# runs is the copy, by its run path. `make install prefix=DIR` is no way round this:
# after configure it installs a gaaw.pc, gaawConfig.cmake, libgaaw.la and gaaw-info
# that all still name the configured prefix.
#
# Environment (make check and make installcheck pass what configure found):
#   GAAW_TOP_SRCDIR  the source tree (the examples' sources)
#   MPICC, MPIEXEC   the MPI C wrapper and launcher of the MPI gaaw was built with
#   GAAW_MPIFC       the Fortran compiler that knows `use mpi`; empty: Fortran not run
#   CMAKE            cmake (default: cmake in PATH; none: the CMake builds are not run)
#   GAAW_RPATH       yes or no: whether configure gave gaaw.pc and gaaw::gaaw a run path
#                    (unset: whatever gaaw.pc says is taken as meant)
# doc/insitu.md's commands run only with Fortran, cmake and libdir PREFIX/lib (they use
# all three); their mpicc, mpif90 and mpiexec are $MPICC, $GAAW_MPIFC and $MPIEXEC.
# Skips (77) without the C wrapper, pkg-config or mpiexec.

# The programs built and run against the installed gaaw, one per line: the source
# (from the top of the source tree) and the number of ranks it runs on (with the
# arguments of args_of below). Each in-situ predictor comes after the trainer whose
# surrogate it loads.
examples='
examples/hello_gaaw.c 2
tests/install/installed_version.c 1
tests/install/installed_version.f90 1
examples/insitu/heat_surrogate.c 2
examples/insitu/heat_predict.c 1
examples/insitu/heat_surrogate.f90 2
examples/insitu/heat_predict.f90 1
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

# README.md's C training loop (its ```c block) and doc/fortran.md's Fortran one (its
# block between <!-- fortran-loop --> and <!-- /fortran-loop -->) join the programs
# (absolute paths)
mkdir "$work/readme_src" || exit 1
out=$work/readme_src/readme_loop.c
awk -v fence='```c' '$0 == fence { f = 1; next } /^[`][`][`]/ { f = 0 } f' "$srcdir/README.md" >"$out"
test -s "$out" || { echo "FAIL: README.md has no c block (a training loop)"; exit 1; }
examples="$examples
$out 2"
out=$work/readme_src/readme_loop.f90
awk '/^<!-- fortran-loop -->/ { m = 1; next } /^<!-- \/fortran-loop -->/ { m = 0 }
  m && /^[`][`][`]/ { next } m' "$srcdir/doc/fortran.md" >"$out"
test -s "$out" || { echo "FAIL: doc/fortran.md has no training loop between <!-- fortran-loop --> and <!-- /fortran-loop -->"; exit 1; }
examples="$examples
$out 2"

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
# libdir, includedir, fmoddir and the run path derive from it.
prefix=`PKG_CONFIG_PATH="$pcdir" pkg-config --variable=prefix gaaw`
pc() { PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$sysroot$prefix" "$@" gaaw; }
flags=`pc --cflags --libs` || { echo "FAIL: pkg-config --cflags --libs gaaw"; exit 1; }
version=`pc --modversion`
libdir=`pc --variable=libdir`
fmoddir=`pc --variable=fmoddir`
echo "pkg-config: $flags"
echo "libdir: $libdir  fmoddir: $fmoddir"
fail=0

# The run path, as the installed gaaw.pc hands it out: the final libdir, never the
# staging root. None for a static-only gaaw or a libdir the dynamic loader searches
# itself (configure's summary says which).
final_libdir=`PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir gaaw`
final_libs=`PKG_CONFIG_PATH="$pcdir" pkg-config --libs gaaw`
shared=no
ls "$libdir"/libgaaw.so* >/dev/null 2>&1 && shared=yes
case " $final_libs " in
*" -Wl,-rpath,$final_libdir "*) rpath=yes ;;
*-rpath*)
  echo "FAIL: gaaw.pc's Libs has a run path that is not its libdir $final_libdir: $final_libs"
  exit 1 ;;
*) rpath=no ;;
esac
echo "shared library: $shared  run path in gaaw.pc: $rpath"
case $GAAW_RPATH in
yes | no)
  if test $rpath != "$GAAW_RPATH"; then
    echo "FAIL: configure's run path is '$GAAW_RPATH' but gaaw.pc's Libs say '$rpath': $final_libs"
    exit 1
  fi ;;
*) echo "GAAW_RPATH unset: taking gaaw.pc's word on the run path" ;;
esac
if test $shared = yes && test $rpath = no && test -n "$sysroot"; then
  echo "no run path ($final_libdir is the dynamic loader's own): the staged copy is found through LD_LIBRARY_PATH"
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
readelf=no
if test $rpath = yes; then
  if command -v readelf >/dev/null 2>&1; then readelf=yes
  else echo "no readelf: the programs' run paths are not read, only used"; fi
fi
libdir_phys=`cd "$libdir" && pwd -P`

# The installed gaaw-info runs, and says whether the library has the Fortran module.
# (libtool linked it for the final libdir: a staged copy runs with LD_LIBRARY_PATH)
bindir=`pc --variable=exec_prefix`/bin
if test -n "$sysroot"; then
  info=`LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bindir/gaaw-info"`
else
  info=`"$bindir/gaaw-info"`
fi || { echo "FAIL: $bindir/gaaw-info"; fail=1; }
# gaaw-plot is installed beside it (it needs Jansson only, no libgaaw)
"$bindir/gaaw-plot" --help | grep '^usage: gaaw-plot' >/dev/null || { echo "FAIL: $bindir/gaaw-plot --help"; fail=1; }
# and gaaw-prep, the corpus tool
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bindir/gaaw-prep" --help | grep '^usage: gaaw-prep' >/dev/null || { echo "FAIL: $bindir/gaaw-prep --help"; fail=1; }
if echo "$info" | grep '^  fortran  *yes$' >/dev/null && test ! -f "$fmoddir/gaaw.mod"; then
  echo "FAIL: the library has the Fortran module but $fmoddir/gaaw.mod is not installed"
  fail=1
fi
fortran=yes
if test -z "$mpifc" || test ! -f "$fmoddir/gaaw.mod"; then
  echo "no Fortran compiler with 'use mpi' or no installed gaaw.mod: the Fortran programs are not built"
  fortran=no
fi

# source_of SOURCE: its path (a path of $examples is from the top of the source tree,
# unless it is absolute).
source_of() { case $1 in /*) echo "$1" ;; *) echo "$srcdir/$1" ;; esac; }

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

# has_run_path PROGRAM: true when PROGRAM's RUNPATH (or RPATH) names gaaw's libdir,
# or when there is nothing to read (no run path expected, or no readelf); else says
# what the run path is.
has_run_path() {
  test $readelf = yes || return 0
  rp=`readelf -d "$1" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\].*/\1/p'`
  save_ifs=$IFS
  IFS=':
'
  for d in $rp; do
    if test -n "$d" && test "`cd "$d" 2>/dev/null && pwd -P`" = "$libdir_phys"; then
      IFS=$save_ifs
      return 0
    fi
  done
  IFS=$save_ifs
  echo "FAIL: the run path of $1 ('$rp') does not name $libdir"
  return 1
}

# args_of HOW NAME: the arguments of the program $work/HOW/NAME: an in-situ trainer
# saves its surrogate in $work/HOW.ck (the Fortran one in HOW.ck_f), and the
# predictor of its language built the same way loads it; the others take none.
args_of() {
  case $2 in
  heat_surrogate_c) echo "--save-dir $work/$1.ck" ;;
  heat_predict_c) echo "$work/$1.ck" ;;
  heat_surrogate_f90) echo "--save-dir $work/$1.ck_f" ;;
  heat_predict_f90) echo "$work/$1.ck_f" ;;
  esac
}

# run HOW NAME RANKS: checks the run path of the program $work/HOW/NAME and runs it
# on RANKS ranks.
run() {
  has_run_path "$work/$1/$2" || { fail=1; return; }
  if $MPIEXEC -n "$3" "$work/$1/$2" `args_of "$1" "$2"` >"$work/run.log" 2>&1; then
    echo "ok: $1 $2 on $3 ranks: `tail -n 1 "$work/run.log"`"
  else
    cat "$work/run.log"
    echo "FAIL: $1 $2 on $3 ranks"
    fail=1
  fi
}

# With pkg-config, as doc/insitu.md shows.
build_with_pkg_config() {
  # C programs that call libm link it themselves, as users' codes do
  case $1 in *.c) compiler=$mpicc libm=-lm ;; *) compiler=$mpifc libm= ;; esac
  if (cd "$work/pkg-config" && $compiler -o "$3" "`source_of "$1"`" $flags $libm) >"$work/build.log" 2>&1; then
    run pkg-config "$3" "$2"
  else
    cat "$work/build.log"
    echo "FAIL: $compiler $1 \`pkg-config --cflags --libs gaaw\`"
    fail=1
  fi
}
mkdir "$work/pkg-config" "$work/cmake" "$work/readme" || exit 1
each_example build_with_pkg_config

# With CMake: one project holding every program, which first checks that a version
# gaaw is not is refused. Each program runs from the build tree and installed (where
# CMake's own run path is gone).
if command -v "$cmake" >/dev/null 2>&1; then
  languages=C
  fc_arg=
  if test $fortran = yes; then
    languages="C Fortran"
    fc_arg="-DCMAKE_Fortran_COMPILER=$mpifc"
  fi
  cmake_target() {
    echo "add_executable($3 \"`source_of "$1"`\")"
    case $1 in
    *.c) echo "target_link_libraries($3 PRIVATE gaaw::gaaw m)" ;;
    *) echo "target_link_libraries($3 PRIVATE gaaw::gaaw)" ;;
    esac
    echo "install(TARGETS $3 DESTINATION bin)"
  }
  cat >"$work/cmake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.13)
project(gaaw_installed LANGUAGES $languages)
find_package(gaaw 99.0 QUIET)
if(gaaw_FOUND)
  message(FATAL_ERROR "find_package(gaaw 99.0) accepted gaaw \${gaaw_VERSION}")
endif()
find_package(gaaw $version EXACT REQUIRED)
`each_example cmake_target`
CMAKE
  run_cmake_build() { run cmake/build "$3" "$2"; run cmake/installed/bin "$3" "$2"; }
  if (cd "$work/cmake" && "$cmake" -S . -B build -DCMAKE_PREFIX_PATH="$sysroot$prefix" $fc_arg &&
      "$cmake" --build build && "$cmake" --install build --prefix "$work/cmake/installed") \
      >"$work/cmake.log" 2>&1; then
    echo "cmake: `grep -i 'found gaaw\|found MPI' "$work/cmake.log" | tr '\n' ' '`"
    each_example run_cmake_build
  else
    cat "$work/cmake.log"
    echo "FAIL: the CMake project (find_package(gaaw), gaaw::gaaw) in $work/cmake"
    fail=1
  fi
else
  echo "no cmake: the CMake builds are not run"
fi

# doc/insitu.md's commands for users' own programs, as written, in $work/readme: there
# _install is this installation, examples/ the source tree's, and bin/ (first in
# PATH) holds mpicc, mpif90 and mpiexec standing for the MPI gaaw was built with and,
# for a staged copy, a pkg-config that moves gaaw.pc's prefix to the copy as above.
# (the fence's backquotes rule out `...` here)
readme_commands=$(awk '/^<!-- insitu-commands -->/ { m = 1; next }
  /^<!-- \/insitu-commands -->/ { m = 0 }
  m && /^```/ { f = !f; next }
  m && f' "$srcdir/doc/insitu.md")
if test -z "$readme_commands"; then
  echo "FAIL: no commands between <!-- insitu-commands --> and <!-- /insitu-commands --> in $srcdir/doc/insitu.md"
  exit 1
fi
readme_skip=
command -v "$cmake" >/dev/null 2>&1 || readme_skip="no cmake"
test $fortran = yes || readme_skip="no Fortran"
test "`cd "$pcdir" && pwd -P`" = "`cd "$sysroot$prefix/lib/pkgconfig" 2>/dev/null && pwd -P`" ||
  readme_skip="gaaw.pc is not in PREFIX/lib/pkgconfig"
if test -n "$readme_skip"; then
  echo "doc/insitu.md's commands are not run: $readme_skip"
  exit $fail
fi
# stand_in NAME COMMAND...: $work/readme/bin/NAME runs COMMAND with its arguments.
stand_in() {
  stand_in_name=$1
  shift
  stand_in_path=`command -v "$1"` || { echo "FAIL: no '$1' for doc/insitu.md's $stand_in_name"; exit 1; }
  shift
  mkdir -p "$work/readme/bin"
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$stand_in_path" "$*" >"$work/readme/bin/$stand_in_name"
  chmod +x "$work/readme/bin/$stand_in_name"
}
stand_in mpicc $mpicc
stand_in mpif90 $mpifc
stand_in mpiexec $MPIEXEC
test -n "$sysroot" && stand_in pkg-config pkg-config "--define-variable=prefix=$sysroot$prefix"
ln -s "$sysroot$prefix" "$work/readme/_install" && ln -s "$srcdir/examples" "$work/readme/examples" || exit 1
echo "$readme_commands" >"$work/readme/commands.sh"
if (cd "$work/readme" && PATH="$work/readme/bin:$PATH" sh -ex ./commands.sh) >"$work/readme.log" 2>&1; then
  echo "ok: doc/insitu.md's commands (`echo "$readme_commands" | wc -l` lines): `tail -n 1 "$work/readme.log"`"
  test $readelf = yes &&
  for prog in `find "$work/readme" -name CMakeFiles -prune -o -type f -perm -u+x ! -path "$work/readme/bin/*" -print`; do
    has_run_path "$prog" && echo "ok: the run path of ${prog#$work/readme/} names $libdir" || fail=1
  done
else
  cat "$work/readme.log"
  echo "FAIL: doc/insitu.md's commands between <!-- insitu-commands --> and <!-- /insitu-commands --> (run in $work/readme)"
  fail=1
fi
exit $fail
