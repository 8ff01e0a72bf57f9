#!/bin/sh
# Every function declared in include/gaaw/*.h has a bind(C) interface in the
# Fortran module (ports/fortran/gaaw.F90 and its include files), found by its C
# name in `bind(C, name="...")`. Fails naming each function without one.
top=${GAAW_TOP_SRCDIR:-.}
fail=0

# Functions the module leaves to C on purpose (gaaw.F90's header says why):
#   kernels.h             the device kernels, run on backend tensors inside layers
#   gaaw_init_version     takes a C MPI_Comm; the module binds gaaw_init_fortran
excluded_headers="kernels.h"
excluded_functions="gaaw_init_version"

# A declaration starts a line with its return type and names gaaw_*( on that line.
declared() {
  for h in "$top"/include/gaaw/*.h; do
    base=`basename "$h"`
    case " $excluded_headers " in *" $base "*) continue ;; esac
    sed -n 's/^[a-z_][a-z0-9_ ]*[ *]\(gaaw_[a-z0-9_]*\)(.*/\1/p' "$h"
  done | sort -u
}

bound=`cat "$top"/ports/fortran/gaaw.F90 "$top"/ports/fortran/*.inc |
  sed -n 's/.*bind(C, *name="\(gaaw_[a-z0-9_]*\)").*/\1/p' | sort -u`

count=0
for f in `declared`; do
  count=`expr $count + 1`
  case " $excluded_functions " in *" $f "*) continue ;; esac
  echo "$bound" | grep -x "$f" >/dev/null || { echo "FAIL: $f has no interface in the Fortran module"; fail=1; }
done
test $count -gt 50 || { echo "FAIL: only $count functions read from $top/include/gaaw (the pattern broke?)"; fail=1; }
# the excluded names must still exist, so the list cannot go stale
for f in $excluded_functions; do
  grep "$f(" "$top"/include/gaaw/*.h >/dev/null || { echo "FAIL: excluded $f is no longer declared"; fail=1; }
done
echo "$count functions declared, `echo "$bound" | wc -l` bound in the module"
exit $fail
