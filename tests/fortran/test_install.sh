#!/bin/sh
# The installed library works for users: `make install DESTDIR=<temporary>`, then a
# C program built with `mpicc $(pkg-config --cflags --libs gaaw)` and a Fortran
# program built with `mpifort -I<fmoddir> ... $(pkg-config --libs gaaw)` run against
# that copy.
# Skips (77) without mpicc or pkg-config; the Fortran part needs mpifort and an
# installed gaaw.mod (built with --enable-fortran).
#
# Run from the build directory (as `make check` does). With GAAW_INSTALLED_PCDIR set
# (the folder of an installed gaaw.pc; `make installcheck` does this), nothing is
# installed and that installation is checked, under GAAW_INSTALLED_SYSROOT if set.
for tool in mpicc pkg-config; do
  if command -v $tool >/dev/null 2>&1; then :; else
    echo "no $tool: skipped"
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
libdir=`pc --variable=libdir`
fmoddir=`pc --variable=fmoddir`
echo "pkg-config: $flags"
echo "libdir: $libdir  fmoddir: $fmoddir"
fail=0

cat >"$work/hello.c" <<'EOC'
#include <stdio.h>
#include <string.h>
#include <gaaw.h>

#define CHECK(call)                                                                       \
  do {                                                                                   \
    gaaw_status_t st_ = (call);                                                          \
    if (st_ != GAAW_SUCCESS) {                                                           \
      fprintf(stderr, "%s: %s\n%s\n", #call, gaaw_status_name(st_), gaaw_last_error(NULL)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  gaaw_config_t cfg;
  gaaw_context_t ctx;
  int size = 0;
  CHECK(gaaw_config_create(&cfg));
  CHECK(gaaw_config_set(cfg, "backend", "host"));
  CHECK(gaaw_init(MPI_COMM_WORLD, cfg, &ctx));
  CHECK(gaaw_world_size(ctx, &size));
  if (size != 1 || strcmp(gaaw_version(), GAAW_VERSION_STRING) != 0 || gaaw_info_backend_count() < 1) {
    fprintf(stderr, "size %d, version %s (headers %s)\n", size, gaaw_version(), GAAW_VERSION_STRING);
    return 1;
  }
  CHECK(gaaw_finalize(&ctx));
  CHECK(gaaw_config_destroy(&cfg));
  MPI_Finalize();
  printf("installed C: gaaw %s works\n", gaaw_version());
  return 0;
}
EOC
if mpicc -o "$work/hello_c" "$work/hello.c" $flags; then
  LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/hello_c" || { echo "FAIL: the C program"; fail=1; }
else
  echo "FAIL: mpicc hello.c \`pkg-config --cflags --libs gaaw\`"
  fail=1
fi

# The installed gaaw-info runs, and says whether the library has the Fortran module.
bindir=`pc --variable=exec_prefix`/bin
info=`LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$bindir/gaaw-info"` || {
  echo "FAIL: $bindir/gaaw-info"; fail=1; }
if echo "$info" | grep '^  fortran  *yes$' >/dev/null && test ! -f "$fmoddir/gaaw.mod"; then
  echo "FAIL: the library has the Fortran module but $fmoddir/gaaw.mod is not installed"
  fail=1
fi

if command -v mpifort >/dev/null 2>&1 && test -f "$fmoddir/gaaw.mod"; then
  cat >"$work/hello.f90" <<'EOF90'
program hello
  use mpi
  use gaaw
  implicit none
  type(gaaw_config) :: cfg
  type(gaaw_context) :: ctx
  integer :: ierr, st, n
  call MPI_Init(ierr)
  st = gaaw_config_create(cfg)
  if (st == GAAW_SUCCESS) st = gaaw_config_set(cfg, "backend", "host")
  if (st == GAAW_SUCCESS) st = gaaw_init(MPI_COMM_WORLD, cfg, ctx)
  if (st == GAAW_SUCCESS) st = gaaw_world_size(ctx, n)
  if (st /= GAAW_SUCCESS) then
    print *, gaaw_status_name(st), " ", gaaw_last_error()
    stop 1
  end if
  if (n /= 1 .or. gaaw_version() /= GAAW_VERSION_STRING) then
    print *, "size ", n, " version ", gaaw_version()
    stop 1
  end if
  st = gaaw_finalize(ctx)
  st = gaaw_config_destroy(cfg)
  call MPI_Finalize(ierr)
  print '(2a)', "installed Fortran: gaaw ", gaaw_version()
end program hello
EOF90
  libs=`pc --libs` # -L$libdir -lgaaw, and the sanitizer runtimes of an --enable-sanitizers build
  if (cd "$work" && mpifort -o hello_f hello.f90 -I"$fmoddir" $libs); then
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/hello_f" || { echo "FAIL: the Fortran program"; fail=1; }
  else
    echo "FAIL: mpifort hello.f90 -I$fmoddir $libs"
    fail=1
  fi
else
  echo "no mpifort or no installed gaaw.mod: Fortran part not run"
fi
exit $fail
