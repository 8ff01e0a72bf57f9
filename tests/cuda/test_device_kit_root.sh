#!/bin/bash
# The device kit (bench/device_kit.sh) in an isolated root that holds only glibc, the
# unpacked kit and the CUDA toolkit's lib64, as bubblewrap builds it: what a GPU
# machine with nothing of ours installed gives the kit, less the driver. There:
#   - every carried program and library loads, every symbol bound (the loader's
#     `ldd -r` mode), and every program starts and ends as it does without a GPU
#     (the table below; 127 or a loader error is a failure);
#   - test_conformance_cuda reaches its own "no CUDA device" status 77;
#   - `mpiexec -n 2` from the kit runs a host test (test_comm_alias_np2) to its end;
#   - run.sh, outside the root: without a GPU it skips (77); with a stub driver it
#     runs and reports every stage and item (the dry run of a GPU session's call).
# The environment is the one run.sh sets for the kit's programs on a machine without a
# libstdc++ of its own (so with the kit's fallback one).
# Usage: test_device_kit_root.sh [KIT_DIR] (default $GAAW_DEVICE_KIT, else
# ./device-kit: the folder with gaaw-device-kit.tar.xz). Skips (77) without the
# archive or bwrap. `make check-device-kit` builds the kit and runs this.
kit_dir=${1:-${GAAW_DEVICE_KIT:-./device-kit}}
archive=$kit_dir/gaaw-device-kit.tar.xz
name=test_device_kit_root
if [ ! -f "$archive" ]; then
  echo "$name: no $archive (bash bench/device_kit.sh makes it); skipped"
  exit 77
fi
if ! command -v bwrap > /dev/null; then
  echo "$name: no bwrap (Debian: apt-get install bubblewrap); skipped"
  exit 77
fi
cuda_lib=$(readlink -f /usr/local/cuda/lib64)
[ -d "$cuda_lib" ] || { echo "$name: FAIL: no CUDA toolkit lib64 here (/usr/local/cuda/lib64)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/kit"
tar -C "$tmp/kit" -xJf "$archive" || { echo "$name: FAIL: cannot unpack $archive"; exit 1; }
root=$(sed -n 's/^root: //p' "$tmp/kit/kit.txt")
[ -n "$root" ] || { echo "$name: FAIL: kit.txt names no root"; exit 1; }

# glibc: the shared objects of Debian's libc6, where the loader looks for them.
binds=()
multiarch=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
for f in $(dpkg -L libc6 | grep -E '^/lib.*\.so(\.[0-9]+)?$' | grep -v gconv); do
  binds+=(--ro-bind "$(readlink -f "$f")" "/lib/$multiarch/$(basename "$f")")
done
binds+=(--ro-bind "$(readlink -f /lib64/ld-linux-x86-64.so.2)" /lib64/ld-linux-x86-64.so.2)
extra_env=()
in_root() { # command...: runs it in the isolated root with the kit's environment (and
  # extra_env's --setenv pairs), for 120 s at most
  timeout -k 5 120 bwrap "${binds[@]}" --tmpfs /tmp --ro-bind "$tmp/kit" "$root" --ro-bind "$cuda_lib" /usr/local/cuda/lib64 \
    --proc /proc --ro-bind /sys /sys --dev /dev --tmpfs /dev/shm --chdir /tmp --unshare-pid --die-with-parent --clearenv \
    --setenv PATH "$root/bin" --setenv HOME /tmp \
    --setenv LD_LIBRARY_PATH "$root/lib:/usr/local/cuda/lib64:$root/lib/fallback" \
    --setenv UCX_MODULE_DIR "$root/lib/ucx" --setenv HWLOC_PLUGINS_PATH "$root/lib/hwloc" \
    --setenv GAAW_LOG warn "${extra_env[@]}" "$@"
}

fail=0
err() {
  echo "FAIL: $*"
  fail=1
}

# Loads: every program, mpiexec, its proxy and UCX's modules (which UCX loads at run
# time), all symbols bound. The other libraries load as the programs' (libucm, for
# one, binds only inside a process that has libucs).
loaded=0
for f in $(cd "$tmp/kit" && find build bin lib/ucx -type f ! -name '*.h' | sort); do
  extra_env=(--setenv LD_TRACE_LOADED_OBJECTS 1 --setenv LD_WARN yes --setenv LD_BIND_NOW 1)
  out=$(in_root /lib64/ld-linux-x86-64.so.2 "$root/$f" 2>&1)
  rc=$?
  extra_env=()
  if [ "$rc" -ne 0 ] || echo "$out" | grep -E 'not found|undefined symbol|rror' > /dev/null; then
    err "$f does not load (exit $rc): $(echo "$out" | grep -E 'not found|undefined symbol|rror' | head -n 3)"
  fi
  loaded=$((loaded + 1))
done
echo "$name: $loaded files of the kit load, every symbol bound"

# Starts and ends: each program's status without a GPU.
check() { # EXPECTED PROGRAM ARGS...
  local want=$1 prog=$2
  shift 2
  local out rc
  out=$(in_root "$root/$prog" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || echo "$out" | grep -q 'error while loading shared libraries'; then
    err "$prog $*: exit $rc, expected $want: $(echo "$out" | tail -n 3)"
  else
    echo "$name: $prog $* -> $rc"
  fi
}
check 77 build/tests/cuda/test_conformance_cuda
check 0 build/tests/cuda/test_cuda_device
check 0 build/tests/cuda/test_cuda_errors
check 77 build/tests/cuda/test_nccl_np2
check 77 build/tests/cuda/test_cuda_gpt_np2
check 77 build/tests/cuda/test_nccl_timeout_np2
check 77 build/tests/cuda/test_nccl_shared_gpu_np2
check 77 build/tests/backend/train_cuda
check 77 build/tests/backend/checkpoint_cuda
check 2 build/tests/mpi/test_mixed_backends
check 0 build/bench/gemm_cuda
check 0 build/examples/gaaw-info
check 0 build/examples/gaaw-train --help
check 0 bin/mpiexec --version
# MPI from the kit: hydra, its proxy, MPICH and UCX's modules, two ranks.
check 0 bin/mpiexec -n 2 "$root/build/tests/mpi/test_comm_alias_np2"
in_root "$root/build/tests/cuda/test_conformance_cuda" 2>&1 | grep -q 'no CUDA device' ||
  err "test_conformance_cuda did not report its own 'no CUDA device'"
# Every program of the kit is checked above.
for p in $(sed -n 's/^programs: //p' "$tmp/kit/kit.txt"); do
  grep -q "^check .*build/$p\( \|\"\|$\)" "$0" || err "program $p of the kit has no check here"
done

# run.sh itself, on this machine (outside the root): without a GPU, one SKIP line and
# 77; with a stub driver (an nvidia-smi that names one GPU, an empty libcuda.so.1),
# every stage and item of a real run, each reported in summary.txt, the logs in
# logs.tar.xz, and nothing else under OUT; with no xz there (a failing stub), Python's
# lzma unpacks and packs.
out=$tmp/out-nogpu
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  OUT=$out KIT_LOGS=$tmp/logs bash "$kit_dir/run.sh" > "$tmp/run.log" 2>&1
  rc=$?
  [ "$rc" -eq 77 ] || err "run.sh without a GPU: exit $rc, expected 77"
  [ "$(cat "$out/summary.txt")" = "$(grep '^kit: ' "$tmp/run.log")" ] && grep -q '^kit: driver SKIP' "$out/summary.txt" ||
    err "run.sh without a GPU: summary $(cat "$out/summary.txt")"
fi
mkdir "$tmp/stub"
printf '#!/bin/sh\ncase "$*" in *query-gpu*) echo "Stub GPU, 580.00, 81559 MiB, 9.0" ;; *) echo "GPU 0: Stub GPU (UUID: GPU-0)" ;; esac\n' \
  > "$tmp/stub/nvidia-smi"
# and no xz (a stub that fails): run.sh unpacks and packs its logs with Python's lzma
printf '#!/bin/sh\nexit 127\n' > "$tmp/stub/xz"
chmod +x "$tmp/stub/nvidia-smi" "$tmp/stub/xz"
echo 'int gaaw_stub_driver;' > "$tmp/stub/stub.c"
gcc -shared -fPIC -o "$tmp/stub/libcuda.so.1" "$tmp/stub/stub.c" || err "cannot build the stub libcuda.so.1"
out=$tmp/out-stub
PATH=$tmp/stub:$PATH LD_LIBRARY_PATH=$tmp/stub OUT=$out KIT_LOGS=$tmp/logs BUDGET_S=120 \
  bash "$kit_dir/run.sh" > "$tmp/run.log" 2>&1
rc=$?
[ "$rc" -le 1 ] || err "run.sh with a stub driver: exit $rc: $(tail -n 3 "$tmp/run.log")"
for item in 'kit: driver INFO 1 GPU' "kit: unpack INFO [0-9]* s (Python's lzma" 'kit: found INFO libcudart.so.13' 'kit: found INFO libnccl.so.2' \
  'kit: libstdcxx INFO' 'kit: versions PASS' 'kit: loads PASS' 'kit: conformance SKIP' 'kit: mpi PASS' \
  'kit: smoke INFO' 'cuda_device_check: build INFO prebuilt' 'cuda_device_check: conformance SKIP' \
  'cuda_device_check: cuda_errors PASS' 'cuda_device_check: zero_gpt' 'cuda_device_check: train_cuda SKIP' \
  'cuda_device_check: checkpoint_cuda SKIP' 'cuda_device_check: mixed_backends SKIP' 'cuda_device_check: gemm_bf16 INFO' \
  'cuda_device_check: gpt2_124m' 'cuda_device_check: memcheck' 'cuda_device_check: done INFO' 'kit: done INFO'; do
  grep -q "^$item" "$out/summary.txt" || err "run.sh with a stub driver: no line '$item...' in summary.txt"
done
[ "$(ls "$out" | tr '\n' ' ')" = "logs.tar.xz summary.txt " ] || err "run.sh left $(ls "$out" | tr '\n' ' ') under OUT"
tar -tJf "$out/logs.tar.xz" | grep -q 'check/zero_gpt.log' || err "logs.tar.xz (Python's) lacks the check's logs"
echo "$name: run.sh with a stub driver: $(grep -c . "$out/summary.txt") summary lines, exit $rc"
[ "$fail" -eq 0 ] && echo "$name: passed"
exit $fail
