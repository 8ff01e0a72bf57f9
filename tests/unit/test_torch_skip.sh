#!/bin/sh
# The PyTorch reference (tests/reference/gpt_reference.py) skips only when torch is
# not installed, and fails when it is installed but broken:
#  - with a torch package on PYTHONPATH whose import raises ImportError, or OSError
#    (as a missing shared library does), it must exit 1, not 77;
#  - with torch hidden (python3 -S leaves out the site directories, where Debian's
#    python3-torch lives) it must exit 77; that part is left out, not skipped, when
#    torch is importable even without the site directories.
# The C side (tests/harness/torch_ref.h) turns 77 into a skip and anything else but 0
# into a failure. Skips (77) only without /usr/bin/python3.
python=/usr/bin/python3
ref=${GAAW_TOP_SRCDIR:-.}/tests/reference/gpt_reference.py
if test ! -x $python; then
  echo "no $python: skipped"
  exit 77
fi
tmp=`mktemp -d ${TMPDIR:-/tmp}/test_torch_skip.XXXXXX` || exit 1
trap 'rm -rf "$tmp"' 0
fail=0
for error in 'ImportError("libtorch_cpu.so: cannot open shared object file")' 'OSError("undefined symbol")'; do
  rm -rf "$tmp/torch"
  mkdir "$tmp/torch"
  echo "raise $error" >"$tmp/torch/__init__.py"
  PYTHONPATH="$tmp" $python "$ref" "$tmp/in" "$tmp/out" >"$tmp/log" 2>&1
  rc=$?
  if test $rc -eq 0 || test $rc -eq 77; then
    echo "FAIL: a torch that raises $error on import gave exit $rc, expected a failure"
    cat "$tmp/log"
    fail=1
  else
    echo "ok: a torch that raises $error on import fails (exit $rc)"
  fi
done
if $python -S -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is not None)'; then
  $python -S "$ref" "$tmp/in" "$tmp/out" >"$tmp/log" 2>&1
  rc=$?
  if test $rc -ne 77; then
    echo "FAIL: without torch the reference exited with $rc, expected 77"
    cat "$tmp/log"
    fail=1
  else
    echo "ok: without torch the reference skips (77)"
  fi
else
  echo "torch is importable without the site directories: the 'not installed' case is not tried"
fi
exit $fail
