#!/bin/sh
# README: only gaaw_* symbols are exported. Every symbol that the built shared
# library defines for dynamic linking (nm -D --defined-only) must be gaaw_* or, from
# the Fortran module gaaw, __gaaw_MOD_*; and every function that the public headers
# (include/gaaw.h, include/gaaw/*.h) declare must be among them.
# Skips (77) only when the build has no shared library (--disable-shared).
# GAAW_EXPORTS_LIB overrides the library (default .libs/libgaaw.so of the build tree).
lib=${GAAW_EXPORTS_LIB:-./.libs/libgaaw.so}
src=${GAAW_TOP_SRCDIR:-.}
if test ! -e "$lib"; then
  if grep "^dlname=''" ./libgaaw.la >/dev/null 2>&1; then
    echo "no shared library in this build (libgaaw.la has no dlname): skipped"
    exit 77
  fi
  echo "FAIL: $lib is missing, yet libgaaw.la names a shared library"
  exit 1
fi
syms=`nm -D --defined-only "$lib" | awk 'NF >= 2 { print $NF }'` || { echo "FAIL: nm -D failed on $lib"; exit 1; }
fail=0
# a declaration starts a line: "gaaw_status_t gaaw_tensor_alloc(", "const char *gaaw_status_name("
declared=`sed -n 's/^[a-zA-Z0-9_ ]*[ *]\(gaaw_[a-z0-9_]*\)(.*/\1/p' "$src"/include/gaaw.h "$src"/include/gaaw/*.h | sort -u`
n=`echo "$declared" | grep -c .`
test "$n" -ge 50 || { echo "FAIL: only $n functions read from $src/include (expected over 50)"; fail=1; }
for want in $declared; do
  echo "$syms" | grep -x "$want" >/dev/null || { echo "FAIL: $lib does not export $want (declared in include/)"; fail=1; }
done
others=`echo "$syms" | grep -v '^gaaw_' | grep -v '^__gaaw_MOD_'`
if test -n "$others"; then
  echo "FAIL: $lib exports symbols outside gaaw_* (`echo "$others" | wc -l` of them):"
  echo "$others" | head -20 | sed 's/^/  /'
  fail=1
fi
test $fail -eq 0 && echo "$lib exports `echo "$syms" | wc -l` symbols, every one gaaw_* or __gaaw_MOD_*, and the $n functions of include/"
exit $fail
