#!/bin/sh
# The library's sources stay in files of one purpose and functions of one screen
# (the project's STYLE.md, "One file, one reason to change"):
# - no source file of backends/, parallel/ or zero/ (.c .h .cu .cuh .F90 .inc, not
#   the Makefile.inc fragments), nor of the Fortran module (ports/fortran/*.F90,
#   *.inc), has more than 700 lines;
# - no C or CUDA function of backends/, parallel/ or zero/ (.c .h .cu .cuh) has
#   more than 80 lines, counted from the line of its opening `{` to the line of its
#   closing `}`, both included (the signature above the `{` is not counted). Our
#   code puts a function's braces at column 0: a line that starts with `{` opens a
#   function's body, the next line that starts with `}` closes it, and the function
#   is named by the first `name(` of the last line above the `{` that starts in
#   column 0 (its signature's first line).
# Fails naming each file, and each function with its file and line, over a limit.
# Reads the sources under $GAAW_TOP_SRCDIR (the build's top_srcdir, set by make
# check), so it runs in VPATH builds and in make distcheck, on the tarball's files.
top=${GAAW_TOP_SRCDIR:-.}
max_file_lines=700
max_function_lines=80

# Files left out of both checks, one a line with the reason after a '#'. Empty by
# design: a file stands here only while it is being split on another branch, and
# an entry fails once its file is gone or within the limits, so that it is removed.
exemptions='
'
# Generated in the source tree by an in-tree build (not sources): not read.
generated='backends/opencl/opencl_sources.c ports/fortran/gaaw_constants.inc'

exempt=`echo "$exemptions" | sed -e 's/#.*//' -e 's/[ 	]*$//' -e 's/^[ 	]*//' -e '/^$/d'`
is_listed() { # NAME LIST...
  n=$1
  shift
  for e in $*; do test "x$e" = "x$n" && return 0; done
  return 1
}

# The files to check, relative to $top (not the build's Makefile.inc fragments).
sources() {
  (cd "$top" && find backends parallel zero -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
    -o -name '*.cuh' -o -name '*.F90' -o -name '*.inc' \) ! -name Makefile.inc &&
    find ports/fortran -type f \( -name '*.F90' -o -name '*.inc' \)) | LC_ALL=C sort
}

# Prints "LINE: NAME LINES" for each function of FILE longer than the limit.
long_functions() { # FILE
  awk -v max="$max_function_lines" '
    !open && /^[A-Za-z_]/ { sig = $0 }
    !open && /^\{/ { open = FNR; next }
    open && /^\}/ {
      n = FNR - open + 1
      if (n > max) {
        name = sig
        if (match(sig, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
          name = substr(sig, RSTART, RLENGTH - 1)
          sub(/[ \t]*$/, "", name)
        }
        printf "%d: %s %d\n", open, name, n
      }
      open = 0
    }' "$top/$1"
}

fail=0 files=0
for f in `sources`; do
  is_listed "$f" $generated && continue
  if is_listed "$f" $exempt; then
    lines=`wc -l <"$top/$f"`
    if test "$lines" -le $max_file_lines; then
      case $f in *.c | *.h | *.cu | *.cuh) test -z "`long_functions "$f"`" || continue ;; esac
      echo "FAIL: $f is exempt, but it is within the limits now: remove it from the exemptions of $0"
      fail=1
    fi
    continue
  fi
  files=`expr $files + 1`
  lines=`wc -l <"$top/$f"`
  if test "$lines" -gt $max_file_lines; then
    echo "FAIL: $f has $lines lines, more than $max_file_lines: split it by responsibility"
    fail=1
  fi
  case $f in
    ports/*) continue ;;
    *.c | *.h | *.cu | *.cuh) ;;
    *) continue ;;
  esac
  long=`long_functions "$f"`
  if test -n "$long"; then
    echo "$long" | while read -r at name n; do
      echo "FAIL: $f:${at%:} function $name has $n lines from { to }, more than $max_function_lines"
    done
    fail=1
  fi
done
for e in $exempt; do
  test -f "$top/$e" || { echo "FAIL: exempt $e does not exist: remove it from the exemptions of $0"; fail=1; }
done
# a wrong $top would pass with nothing read
test $files -gt 100 || { echo "FAIL: only $files source files found under $top (wrong GAAW_TOP_SRCDIR?)"; fail=1; }
test $fail -eq 0 && echo "$files source files, none over $max_file_lines lines and no function over" \
  "$max_function_lines lines; exempt:" ${exempt:-none}
exit $fail
