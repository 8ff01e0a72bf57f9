#!/bin/bash
# bench/device_kit.sh: builds, on this machine (CUDA toolkit, no GPU needed), the kit
# that a session lent a GPU runs there: one xz archive with the CUDA build of the check
# programs and every shared library they load that the GPU machine may lack, and the
# run.sh that unpacks and runs it (doc/testing.md, "The device kit").
#
# The GPU machine reaches no package registry and is not known to have MPICH, OpenBLAS,
# Jansson, xxHash, liburing, make or the autotools, so nothing is built there:
#   - gaaw is configured static (no libtool wrappers: every program is a plain binary)
#     for sm_$ARCH machine code plus compute_$ARCH PTX, and built in $KIT_ROOT/build,
#     the same absolute path the kit unpacks to there;
#   - carried beside the programs: every library they, mpiexec and hydra_pmi_proxy
#     load, except glibc's, the driver's (libcuda, libnvidia-*) and CUDA 13's
#     (cudart, cuBLAS, cuBLASLt, NCCL: run.sh finds those there), and the modules UCX
#     loads at run time (lib/ucx); libstdc++ and libgcc_s go to lib/fallback, used only
#     when the machine's own are older than the programs need;
#   - the archive's glibc floor (the newest GLIBC_ symbol version any carried program
#     or library needs) must be at most $GLIBC_MAX (2.35: Ubuntu 22.04's), and the
#     archive at most $MAX_MIB MiB. The fallback libstdc++'s own floor is recorded
#     apart (Debian 12's needs 2.36): it serves only a machine whose libstdc++ is older
#     than the programs need, i.e. older than GCC 12's.
# Output, in $KIT_OUT (default ./device-kit, which git ignores): gaaw-device-kit.tar.xz,
# run.sh and kit.txt (the commit built, the glibc floor, the libraries carried and from
# where, each file's size). Prints one line per step and the archive's size last.
#
# Environment: KIT_ROOT (default /tmp/gaaw-kit; emptied first), KIT_OUT, ARCH (90),
# JOBS (make -j, default 2), GLIBC_MAX (2.35), MAX_MIB (40).
# Exit status: 0 when the kit was made, 1 otherwise.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
root=${KIT_ROOT:-/tmp/gaaw-kit}
kit_out=${KIT_OUT:-$PWD/device-kit}
arch=${ARCH:-90}
jobs=${JOBS:-2}
glibc_max=${GLIBC_MAX:-2.35}
max_mib=${MAX_MIB:-40}
say() { echo "device_kit: $*"; }
die() { echo "device_kit: error: $*" >&2; exit 1; }

command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  die "no CUDA toolkit here (nvcc is neither on PATH nor in /usr/local/cuda/bin)"
case "$root" in /*) ;; *) die "KIT_ROOT must be an absolute path, got '$root'" ;; esac
mkdir -p "$kit_out"
kit_out=$(cd "$kit_out" && pwd)
case "$kit_out/" in "$root"/*) die "KIT_OUT ($kit_out) must not lie inside KIT_ROOT ($root)" ;; esac

# The programs the device check runs (bench/cuda_device_check.sh, run.sh).
programs=(
  tests/cuda/test_cuda_device tests/cuda/test_conformance_cuda tests/cuda/test_cuda_errors
  tests/cuda/test_nccl_np2 tests/cuda/test_cuda_gpt_np2 tests/cuda/test_nccl_timeout_np2
  tests/cuda/test_nccl_shared_gpu_np2 tests/backend/train_cuda tests/backend/checkpoint_cuda
  tests/mpi/test_comm_alias_np2 tests/mpi/test_mixed_backends
  bench/gemm_cuda examples/gaaw-info examples/gaaw-train
)

# ---------------------------------------------------------------- the source
rm -rf "$root"
mkdir -p "$root/src" "$root/build" "$root/lib/ucx" "$root/lib/hwloc" "$root/lib/fallback" "$root/bin"
commit=unknown
if git -C "$src" rev-parse --git-dir > /dev/null 2>&1; then
  commit=$(git -C "$src" rev-parse HEAD)
  [ -n "$(git -C "$src" status --porcelain --untracked-files=no)" ] && commit="$commit+uncommitted changes"
  (cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$root/src" -xf -
else
  (cd "$src" && tar --exclude=./device-kit -cf - .) | tar -C "$root/src" -xf -
fi
say "source: $commit"
(cd "$root/src" && { [ -x configure ] || autoreconf -fi > "$root/build/autoreconf.log" 2>&1; }) ||
  die "autoreconf failed (see $root/build/autoreconf.log)"

# ---------------------------------------------------------------- the build
t0=$SECONDS
cd "$root/build"
"$root/src/configure" --disable-shared --enable-static --with-cuda --with-nccl --with-cuda-arch="$arch" \
  --without-opencl --without-clblast --disable-fortran > configure.log 2>&1 ||
  { tail -n 30 configure.log; die "configure failed (see $root/build/configure.log)"; }
make -j"$jobs" "${programs[@]}" > make.log 2>&1 || { tail -n 40 make.log; die "make failed (see $root/build/make.log)"; }
for p in "${programs[@]}"; do
  [ -x "$p" ] && file -b "$p" | grep -q ELF || die "$p is not a plain executable (a libtool wrapper?)"
  strip --strip-debug "$p"
done
say "build: $((SECONDS - t0)) s, sm_$arch + compute_$arch PTX, ${#programs[@]} programs"

# ---------------------------------------------------------------- the libraries
# glibc's own libraries: the device's are used (the floor below says which it needs).
is_glibc() {
  case "$1" in
    ld-linux-x86-64.so.2 | libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | libresolv.so.2 | \
      libutil.so.1 | libanl.so.1 | libmvec.so.1 | libnss_*.so.2 | libthread_db.so.1 | libBrokenLocale.so.1) return 0 ;;
  esac
  return 1
}
# What the GPU machine provides: the driver's and CUDA 13's libraries.
from_device() {
  case "$1" in
    libcuda.so.* | libnvidia-*.so* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libnccl.so.*) return 0 ;;
  esac
  return 1
}
mpiexec_bin=$(readlink -f "$(command -v mpiexec)")
proxy=$(command -v hydra_pmi_proxy) || die "hydra_pmi_proxy not found (MPICH's hydra)"
multiarch=$(gcc -print-multiarch)
ucx_modules=(/usr/lib/"$multiarch"/ucx/libuct_cma.so.0)
cp "$mpiexec_bin" "$root/bin/mpiexec"
cp "$proxy" "$root/bin/hydra_pmi_proxy"
for m in "${ucx_modules[@]}"; do
  [ -f "$m" ] || die "UCX's module $m is missing (MPICH here is not built on UCX?)"
  cp -L "$m" "$root/lib/ucx/"
done
: > "$root/libraries.txt"
carry_deps_of() { # FILE...: copies every library they load (ldd: the whole closure) into
  # lib/ or lib/fallback
  local f name path
  for f in "$@"; do
    ldd "$f" | awk '/=>/ { print $1, $3 }' | while read -r name path; do
      if is_glibc "$name"; then continue; fi
      if from_device "$name"; then echo "device $name" >> "$root/libraries.txt"; continue; fi
      [ -f "$path" ] || die "$f needs $name, which is not found here"
      case "$name" in
        libstdc++.so.6 | libgcc_s.so.1) dest=$root/lib/fallback ;;
        *) dest=$root/lib ;;
      esac
      if [ ! -e "$dest/$name" ]; then
        cp -L "$path" "$dest/$name"
        echo "carried $name $(readlink -f "$path")" >> "$root/libraries.txt"
      fi
    done
  done
}
cd "$root/build"
carry_deps_of "${programs[@]}" "$root/bin/mpiexec" "$root/bin/hydra_pmi_proxy" "$root"/lib/ucx/*
sort -u -o "$root/libraries.txt" "$root/libraries.txt"
say "libraries: $(grep -c '^carried' "$root/libraries.txt") carried, from the device: $(grep '^device' "$root/libraries.txt" | cut -d' ' -f2 | tr '\n' ' ')"

# ---------------------------------------------------------------- the floors
elves=("${programs[@]/#/$root/build/}" "$root"/bin/* "$root"/lib/*.so* "$root"/lib/ucx/*)
newest() { # PREFIX FILE...: the newest PREFIX_x.y version the files' dynamic symbols need
  local prefix=$1
  shift
  for f in "$@"; do objdump -T "$f"; done 2>/dev/null | grep -o "(${prefix}_[0-9.]*)" | tr -d '()' |
    sed "s/^${prefix}_//" | sort -V | tail -n 1
}
glibc_floor=$(newest GLIBC "${elves[@]}")
# Debian's libstdc++ may need a newer glibc than the programs (12's: 2.36, for
# arc4random); it is recorded apart, and run.sh says so where it would be needed.
fallback_floor=$(newest GLIBC "$root"/lib/fallback/*)
glibcxx_needed=$(newest GLIBCXX "${elves[@]}")
cxxabi_needed=$(newest CXXABI "${elves[@]}")
[ -n "$glibc_floor" ] || die "no GLIBC symbol versions found (objdump missing?)"
[ "$(printf '%s\n%s\n' "$glibc_floor" "$glibc_max" | sort -V | tail -n 1)" = "$glibc_max" ] ||
  die "the kit needs glibc $glibc_floor, newer than $glibc_max: $(for f in "${elves[@]}"; do
    objdump -T "$f" 2>/dev/null | grep -q "GLIBC_$glibc_floor" && basename "$f"; done | tr '\n' ' ')"
say "glibc floor: $glibc_floor (at most $glibc_max; the fallback libstdc++'s: ${fallback_floor:-none}); libstdc++ needed: GLIBCXX_${glibcxx_needed:-none} CXXABI_${cxxabi_needed:-none}"

# ---------------------------------------------------------------- the archive
{
  echo "commit: $commit"
  echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "root: $root"
  echo "cuda: sm_$arch + compute_$arch PTX, $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || /usr/local/cuda/bin/nvcc --version | grep -o 'release [0-9.]*')"
  echo "mpi: $(dpkg-query -W -f='mpich ${Version}' mpich 2>/dev/null || echo unknown)"
  echo "glibc_floor: $glibc_floor"
  echo "fallback_glibc_floor: ${fallback_floor:-none}"
  echo "glibcxx_needed: ${glibcxx_needed:-none}"
  echo "cxxabi_needed: ${cxxabi_needed:-none}"
  echo "programs: ${programs[*]}"
  sed 's/^/library: /' "$root/libraries.txt"
} > "$root/kit.txt"
files=(kit.txt src bin lib build/config.h "${programs[@]/#/build/}")
(cd "$root" && find "${files[@]}" -path src/autom4te.cache -prune -o -type f -printf '%s %p\n' | sort -k2) | sed 's/^/file: /' >> "$root/kit.txt"
archive=$kit_out/gaaw-device-kit.tar.xz
tar -C "$root" --exclude=src/autom4te.cache -cf - "${files[@]}" | xz -T"$jobs" -9 > "$archive.tmp"
mv "$archive.tmp" "$archive"
sed "s|^kit_root=.*|kit_root=$root|" "$src/bench/device_kit_run.sh" > "$kit_out/run.sh"
chmod +x "$kit_out/run.sh"
cp "$root/kit.txt" "$kit_out/kit.txt"
bytes=$(stat -c %s "$archive")
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
[ "$bytes" -le $((max_mib * 1048576)) ] || die "the archive is $mib MiB, over $max_mib MiB"
say "archive: $archive, $mib MiB (at most $max_mib); run.sh and kit.txt beside it"
