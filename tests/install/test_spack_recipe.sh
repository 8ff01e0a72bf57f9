#!/bin/sh
# The Spack recipe ports/spack/package.py compiles (python3 -m py_compile) and does
# what it claims against a stub of Spack and this tree's configure
# (test_spack_recipe.py says what). Skips (77) without python3.
top=${GAAW_TOP_SRCDIR:-.}
if command -v python3 >/dev/null 2>&1; then :; else
  echo "no python3: skipped"
  exit 77
fi
work=`mktemp -d "${TMPDIR:-/tmp}/gaaw-spack.XXXXXX"` || exit 1
trap 'rm -rf "$work"' 0
# py_compile writes its cache beside the source unless told otherwise (a read-only
# distcheck tree).
PYTHONPYCACHEPREFIX=$work python3 -m py_compile "$top/ports/spack/package.py" ||
  { echo "FAIL: python3 -m py_compile ports/spack/package.py"; exit 1; }
PYTHONPYCACHEPREFIX=$work PYTHONDONTWRITEBYTECODE=1 \
  python3 "$top/tests/install/test_spack_recipe.py" "$top/ports/spack/package.py" "$top/configure"
