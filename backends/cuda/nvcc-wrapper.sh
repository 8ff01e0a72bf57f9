#!/bin/sh
# nvcc-wrapper.sh NVCC [ARGS...]: runs nvcc for libtool. libtool compiles library
# objects with the C compiler's PIC flags (-fPIC -DPIC), which nvcc rejects; the
# host-only ones are handed to the host compiler with -Xcompiler, the rest passes
# through unchanged (sources, -c, -o, -I, -D, nvcc's own options).
nvcc=$1
shift
n=$#
while test "$n" -gt 0; do
  arg=$1
  shift
  n=`expr "$n" - 1`
  case $arg in
    -fPIC | -fpic | -fno-common | -pthread | -fvisibility=*) set -- "$@" -Xcompiler "$arg" ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec "$nvcc" "$@"
