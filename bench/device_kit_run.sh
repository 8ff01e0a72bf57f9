#!/bin/bash
# run.sh of the device kit (bench/device_kit.sh writes it beside the archive, with
# kit_root set to where the kit was built): on the GPU machine, unpacks
# gaaw-device-kit.tar.xz to kit_root, checks the driver, finds the CUDA runtime,
# cuBLAS and NCCL there, and runs the check from the prebuilt programs:
#   smoke (at most SMOKE_S, 60 s): the versions, every carried program loads with all
#          its libraries and symbols, the conformance suite, a 2-rank MPI test;
#   then   bench/cuda_device_check.sh over the prebuilt tree (GAAW_PREBUILT=1) with
#          what is left of BUDGET_S (300 s) for everything.
# Every result is one line, "kit: ITEM STATUS DETAIL" or "cuda_device_check: ...",
# appended to $OUT/summary.txt as it comes (a run cut off still returns what it
# found); the logs go to $OUT/logs.tar.xz, rewritten after each stage. Nothing else
# is written under $OUT (the device tool returns at most 8 files).
# Python items run with the machine's own library path, not the kit's.
# Exit status: 0 when nothing failed, 1 otherwise, 77 without a GPU.
set -u
kit_root=/tmp/gaaw-kit
here=$(cd "$(dirname "$0")" && pwd)
result_dir=${OUT:-$here/out}
budget=${BUDGET_S:-300}
smoke_s=${SMOKE_S:-60}
logs=${KIT_LOGS:-/tmp/gaaw-kit-logs}
mkdir -p "$result_dir"
rm -rf "$logs" && mkdir -p "$logs"
summary=$result_dir/summary.txt
: > "$summary"
failed=0
line() { echo "kit: $*" | tee -a "$summary"; }
result() { # ITEM STATUS DETAIL...
  case "$2" in FAIL | TIMEOUT) failed=1 ;; esac
  line "$@"
}
# xz, or Python's lzma where the machine has no xz (a minimal image may lack it).
have_xz() { xz --version > /dev/null 2>&1; }
py_tar() { # MODE ARCHIVE DIR: x (extract ARCHIVE into DIR) or c (DIR's contents into ARCHIVE)
  python3 -c 'import sys, tarfile
mode, archive, folder = sys.argv[1:]
if mode == "x":
    with tarfile.open(archive) as t:
        if hasattr(tarfile, "data_filter"):
            t.extractall(folder, filter="data")
        else:
            t.extractall(folder)
else:
    with tarfile.open(archive, "w:xz", preset=1) as t:
        t.add(folder, arcname=".")' "$@"
}
pack_logs() {
  if have_xz; then
    tar -C "$logs" -cf - . 2> /dev/null | xz -1 > "$result_dir/logs.tar.xz.tmp"
  else
    py_tar c "$result_dir/logs.tar.xz.tmp" "$logs"
  fi && mv "$result_dir/logs.tar.xz.tmp" "$result_dir/logs.tar.xz"
}
finish() {
  line "done INFO ${SECONDS} s of a ${budget} s budget"
  pack_logs
  exit "$1"
}

# ---------------------------------------------------------------- the driver
gpus=0
if command -v nvidia-smi > /dev/null 2>&1 &&
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader > "$logs/gpus.txt" 2>&1; then
  gpus=$(grep -c . "$logs/gpus.txt")
fi
if [ "$gpus" -lt 1 ]; then
  result driver SKIP "no NVIDIA GPU or driver here (nvidia-smi: $(head -c 200 "$logs/gpus.txt" 2> /dev/null))"
  pack_logs
  exit 77
fi
line "driver INFO $gpus GPU(s): $(head -n 1 "$logs/gpus.txt"); $(uname -r); glibc $(ldd --version 2>&1 | head -n 1 | grep -o '[0-9.]*$')"

# ---------------------------------------------------------------- unpack
t0=$SECONDS
unpack() {
  if have_xz; then tar -C "$kit_root" -xJf "$here/gaaw-device-kit.tar.xz"; else py_tar x "$here/gaaw-device-kit.tar.xz" "$kit_root"; fi
}
rm -rf "$kit_root" && mkdir -p "$kit_root" && unpack ||
  { result unpack FAIL "could not unpack $here/gaaw-device-kit.tar.xz to $kit_root"; finish 1; }
cp "$kit_root/kit.txt" "$logs/"
line "unpack INFO $((SECONDS - t0)) s ($(have_xz && echo xz || echo "Python's lzma: no xz here")); $(grep -m1 '^commit:' "$kit_root/kit.txt"); $(grep -m1 '^glibc_floor:' "$kit_root/kit.txt")"

# ---------------------------------------------------------------- CUDA 13 and NCCL
# Candidate folders: the machine's LD_LIBRARY_PATH, the toolkit's, the Python wheels'
# (nvidia/*/lib, nvidia/cu13/lib) of every python3 on PATH, then the loader's cache.
candidates=()
IFS=: read -r -a ld_dirs <<< "${LD_LIBRARY_PATH-}"
for d in "${ld_dirs[@]}"; do [ -n "$d" ] && [ -d "$d" ] && candidates+=("$d"); done
for d in ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 \
  /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/local/nvidia/lib64; do
  [ -d "$d" ] && candidates+=("$d")
done
for py in $(which -a python3 2> /dev/null | sort -u); do
  for site in $("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2> /dev/null); do
    for d in "$site"/nvidia/*/lib "$site"/nvidia/cu13/lib; do [ -d "$d" ] && candidates+=("$d"); done
  done
done
find_lib() { # NAME: the first candidate folder holding it, else the loader's cache's
  local d
  for d in "${candidates[@]}"; do
    [ -e "$d/$1" ] && { echo "$d"; return 0; }
  done
  d=$(ldconfig -p 2> /dev/null | awk -v n="$1" '$1 == n { print $NF; exit }')
  [ -n "$d" ] && { dirname "$d"; return 0; }
  return 1
}
libpath=$kit_root/lib
for lib in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  if dir=$(find_lib "$lib"); then
    line "found INFO $lib in $dir"
    case ":$libpath:" in *":$dir:"*) ;; *) libpath=$libpath:$dir ;; esac
  else
    result found FAIL "$lib is nowhere (LD_LIBRARY_PATH, the toolkit's lib64, the Python wheels' nvidia/*/lib, the loader's cache)"
  fi
done
[ "$failed" -eq 0 ] || finish 1

# libstdc++ and libgcc_s: the machine's own, unless older than the programs need.
need=$(sed -n 's/^glibcxx_needed: //p' "$kit_root/kit.txt")
own=$(ldconfig -p 2> /dev/null | awk '$1 == "libstdc++.so.6" { print $NF; exit }')
if [ "$need" != none ] && { [ -z "$own" ] || ! grep -q "GLIBCXX_$need" "$own"; }; then
  libpath=$libpath:$kit_root/lib/fallback
  line "libstdcxx INFO the kit's (the machine's ${own:-none} lacks GLIBCXX_$need; the kit's needs glibc $(sed -n 's/^fallback_glibc_floor: //p' "$kit_root/kit.txt"))"
else
  line "libstdcxx INFO the machine's own ($own has GLIBCXX_$need)"
fi

export GAAW_KIT_ORIG_LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}
export LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$kit_root/bin:$PATH
# UCX's transports and hwloc's plugins from the kit only (the machine's may be other
# versions).
export UCX_MODULE_DIR=$kit_root/lib/ucx HWLOC_PLUGINS_PATH=$kit_root/lib/hwloc
export GAAW_LOG=${GAAW_LOG:-warn}
build=$kit_root/build

# ---------------------------------------------------------------- smoke
# run_item, status_of, summary_of, over the smoke stage's budget and the logs folder
. "$kit_root/src/bench/device_check_util.sh"
out=$logs budget_all=$budget budget=$smoke_s
run_item versions 3 10 versions.log "$build/examples/gaaw-info"
[ "$rc" -eq 200 ] || result versions "$(status_of $rc)" "$(head -n 1 "$logs/versions.log"); $(grep -i -m2 'cuda\|nccl' "$logs/versions.log" | tr '\n' ' ')"

# Every program, mpiexec, its proxy and UCX's modules load: all libraries found, every
# symbol bound (the loader's `ldd -r` mode; nothing runs). The other libraries load as
# the programs' (libucm, for one, binds only inside a process that has libucs).
bad=
for f in "$build"/tests/*/* "$build"/bench/* "$build"/examples/* "$kit_root"/bin/* "$kit_root"/lib/ucx/*; do
  [ -f "$f" ] || continue
  if ! LD_TRACE_LOADED_OBJECTS=1 LD_WARN=yes LD_BIND_NOW=1 /lib64/ld-linux-x86-64.so.2 "$f" > "$logs/load.tmp" 2>&1 ||
    grep -qE 'not found|undefined symbol' "$logs/load.tmp"; then
    bad="$bad ${f#$kit_root/}"
    { echo "== $f"; cat "$logs/load.tmp"; } >> "$logs/loads.log"
  fi
done
rm -f "$logs/load.tmp"
if [ -z "$bad" ]; then result loads PASS "every program, mpiexec, its proxy and UCX module of the kit"; else result loads FAIL "$bad (see loads.log)"; fi

run_item conformance 3 40 conformance.log "$build/tests/cuda/test_conformance_cuda"
[ "$rc" -eq 200 ] || result conformance "$(status_of $rc)" "${elapsed} s: $(summary_of conformance.log)"

run_item mpi 3 20 mpi.log mpiexec -n 2 "$build/tests/mpi/test_comm_alias_np2"
[ "$rc" -eq 200 ] || result mpi "$(status_of $rc)" "mpiexec -n 2 (host): $(summary_of mpi.log)"
budget=$budget_all
line "smoke INFO ${SECONDS} s"
pack_logs

# ---------------------------------------------------------------- the rest
left=$((budget - SECONDS))
OUT=$logs/check SUMMARY=$summary BUILD=$build GAAW_PREBUILT=1 BUDGET_S=$left MPIEXEC=mpiexec \
  bash "$kit_root/src/bench/cuda_device_check.sh" > "$logs/check.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || failed=1
finish $failed
