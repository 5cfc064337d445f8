#!/usr/bin/env bash
# The GPU suite, for a lent GPU machine (no apt, no network there):
#   build      builds Collie for this GPU in build-gpu/ (GoogleTest from .deps/,
#              made on the development machine by scripts/gpu_deps.sh and carried along);
#   test       the GPU tests: ranks as threads sharing the GPU (every collective and
#              algorithm; N = 1, 2, 3, 4, 8, or 2 and 3 with --quick) and as processes
#              (cudaIpc), across 2 fake nodes (staged path and proxy), the drop-in NCCL,
#              and PyTorch's torch.distributed on it (tests/gpu/torch_collectives_test.py);
#   sanitize   compute-sanitizer memcheck and racecheck on a subset;
#   bench      a short benchmark of the CUDA backend against a device-to-device copy
#              and, at one rank, NCCL;
# and ends with a table of what passed and how long it took.
#   tests/gpu/run.sh [--quick] [PART...]   PART: build test sanitize bench (default: all four)
# A lent machine allows 10 minutes per command and goes back 30 s after a call, so each call starts
# bare: build here with scripts/gpu_stage.sh (nvcc needs no GPU), carry .deps/root and .gpurun, and
# begin each call with `tar xJf .gpurun/build-gpu.tar.xz` instead of running the build part there.
# Exit status 0 only when every step passed. A test that skips counts as a
# failure here: on a GPU machine a skip means the GPU was not usable.
# COLLIE_TIMEOUT defaults to 30 s, so a hang costs 30 s, not 300; CUDA_DEVICE_MAX_CONNECTIONS to 32.
# GPU_STEP_TIMEOUT (seconds, default none) stops any one step that runs longer, so that one call of a
# lent machine always reaches the summary.
# Logs go to $OUT (or gpu-logs/).
set -uo pipefail
cd "$(dirname "$0")/../.."
quick=0
parts=()
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    build | test | sanitize | bench) parts+=("$a") ;;
    *) echo "usage: tests/gpu/run.sh [--quick] [build|test|sanitize|bench]..." >&2; exit 2 ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || parts=(build test sanitize bench)
want() { [[ " ${parts[*]} " == *" $1 "* ]]; }
logs=${OUT:-gpu-logs}
mkdir -p "$logs"
build=build-gpu
prefix=$PWD/.deps/root/usr
export COLLIE_TIMEOUT=${COLLIE_TIMEOUT:-30}
# Some tests run 22 ranks as threads of one process (programs too long for the launch parameters): with CUDA's
# default 8 hardware queues their kernels could queue behind each other (Collie warns). 32 is CUDA's maximum;
# a process setting, read when its CUDA context is made, not a setting of the card.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}

declare -a names times results
step() {  # step NAME COMMAND...: runs it, logs to $logs/NAME.log, records the outcome
  local name=$1
  shift
  local t0=$(date +%s) rc=0
  echo "== $name: $*"
  if [ -n "${GPU_STEP_TIMEOUT:-}" ]; then
    timeout -k 5 "$GPU_STEP_TIMEOUT" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  else
    "$@" >"$logs/$name.log" 2>&1 || rc=$?
  fi
  if [ "$rc" != 0 ]; then
    results+=("FAIL($rc)")
  elif grep -q -e '\[  SKIPPED \]' -e '^skipped' "$logs/$name.log"; then
    results+=("SKIPPED")  # the GPU was not usable: not a pass
  else
    results+=(pass)
  fi
  names+=("$name")
  times+=($(($(date +%s) - t0)))
  tail -n 5 "$logs/$name.log"
}

nvidia-smi >"$logs/gpu.txt" 2>&1 || echo "nvidia-smi failed: see $logs/gpu.txt"
# libcudart.so.13 of the machine's toolkit, for a build made elsewhere (scripts/gpu_stage.sh).
[ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# UCX from .deps (scripts/gpu_deps.sh), for GPU communicators across fake nodes.
if [ -e "$prefix/lib/x86_64-linux-gnu/libucp.so.0" ]; then
  export PKG_CONFIG_PATH=$prefix/lib/x86_64-linux-gnu/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export UCX_MODULE_DIR=$prefix/lib/x86_64-linux-gnu/ucx
fi
if want build; then
  step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCOLLIE_WITH_MPI=OFF -DCMAKE_PREFIX_PATH="$prefix" -DGTest_DIR="$prefix/lib/x86_64-linux-gnu/cmake/GTest"
  step build cmake --build "$build" -j 16 --target collectives_gpu_test program_cache_gpu_test reduce_ops_gpu_test \
    collectives_gpu_mp collie-run nccl_gpu_test collie-bench
fi
if want test; then
  # First, the question docs/RELIABILITY.md ("On a GPU") asks: with every stream in one hardware queue, do
  # calls of several rounds still pass? (They deadlocked on the fake's model of shared queues with one
  # launch per round; they pass there with one launch per call.)
  step gpu_one_queue env CUDA_DEVICE_MAX_CONNECTIONS=1 "$build/tests/collectives_gpu_test" \
    --gtest_filter='*allreduce_ring_n3:CudaBackend.ACallInManyRoundsIsOneLaunchPerRank'
  # With one GPU the two-GPU tests would skip, which counts as a failure here: leave them out.
  others=
  [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] ||
    others=-CudaBackend.AStreamOfAnotherGpuIsAnError:CudaBackend.RanksOnTwoGpusStageOnlyWithoutP2P
  if [ "$quick" = 1 ]; then
    step gpu_threads "$build/tests/collectives_gpu_test" \
      --gtest_filter="*_n2:*_n3:CudaBackend.*$others"
  else
    step gpu_threads "$build/tests/collectives_gpu_test" --gtest_filter="*$others"
  fi
  step gpu_reduce_ops "$build/tests/reduce_ops_gpu_test"
  step gpu_program_cache "$build/tests/program_cache_gpu_test"
  for np in 2 3 4; do
    step "gpu_processes_np$np" "$build/tools/collie-run" -np "$np" "$build/tests/collectives_gpu_mp"
  done
  # The staged path of GPUs without P2P (pinned host copies, the host executor), asked for by COLLIE_P2P=0 in
  # rank 1's environment alone: the other ranks must follow it.
  step gpu_processes_np3_staged "$build/tools/collie-run" -np 3 \
    sh -c '[ "$COLLIE_RANK" != 1 ] || export COLLIE_P2P=0; exec "$0" "$@"' "$build/tests/collectives_gpu_mp"
  # Across 2 fake nodes: the staged path (host copies of device buffers, UCX between the nodes), then the proxy.
  if grep -q 'COLLIE_WITH_UCX:BOOL=ON' "$build/CMakeCache.txt"; then
    step gpu_fake_nodes_2x2 env UCX_TLS=sm,self "$build/tools/collie-run" --nodes 2 -np 4 \
      "$build/tests/collectives_gpu_mp"
    # The same through the proxy thread (kernels <-> pinned outboxes/inbox <-> UCX).
    step gpu_fake_nodes_2x2_proxy env UCX_TLS=sm,self COLLIE_GPU_REMOTE=proxy "$build/tools/collie-run" --nodes 2 \
      -np 4 "$build/tests/collectives_gpu_mp"
  fi
  step gpu_nccl "$build/tests/nccl/nccl_gpu_test"
  # PyTorch unchanged, on our libnccl.so.2 through LD_PRELOAD (its NCCL comes from a wheel, found by RPATH, so
  # LD_LIBRARY_PATH would not redirect it): 3 processes on the GPU, every collective torch.distributed offers.
  step gpu_torch env LD_PRELOAD="$PWD/$build/compat/nccl/libnccl.so.2" python3 tests/gpu/torch_collectives_test.py \
    --np 3
fi
if want sanitize && [ "$quick" = 0 ] && command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/collectives_gpu_test" \
    --gtest_filter='*allreduce_ring_n3:*allgather_ring_n2:*alltoall_pairwise_n3:CudaBackend.AllToAllv*'
  step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/collectives_gpu_test" \
    --gtest_filter='*allreduce_ring_n2:*reducescatter_ring_n3'
fi
bench=$build/bench/collie-bench
if want bench && [ -x "$bench" ]; then
  # NCCL for --vs nccl: the system's, else the one PyTorch brings (nvidia-nccl wheel).
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' \
    2>/dev/null || true)
  [ -n "$nccl" ] && export LD_LIBRARY_PATH="$nccl:${LD_LIBRARY_PATH:-}"
  # Ranks as threads of one process (-t): one CUDA context, kernels run concurrently.
  # NCCL refuses two ranks on one GPU, so it is compared at one rank.
  step bench_allreduce_1_vs_nccl "$bench" allreduce --backend cuda -b 8 -e 256M -f 4 --vs nccl --limit \
    --json "$logs/allreduce_1.json"
  for t in 2 4 8; do
    step "bench_allreduce_t$t" "$bench" allreduce -t "$t" --backend cuda -b 8 -e 256M -f 4 --limit \
      --json "$logs/allreduce_t$t.json" --plot "$logs/allreduce_t$t.svg"
    step "bench_small_t${t}_graphs" "$bench" allreduce -t "$t" --backend cuda -b 8 -e 64K -f 2 -G 20 \
      --json "$logs/small_t${t}_graphs.json"
  done
  # What LL buys for small calls: the same sizes with Simple forced (bench_allreduce_t4 picks LL up to 64 KiB).
  step bench_small_t4_simple env COLLIE_PROTO=simple "$bench" allreduce -t 4 --backend cuda -b 8 -e 64K -f 4 \
    --json "$logs/small_t4_simple.json"
  for c in allgather reducescatter alltoall; do
    step "bench_${c}_t4" "$bench" "$c" -t 4 --backend cuda -b 1K -e 256M -f 16 --limit --json "$logs/${c}_t4.json"
  done
fi

echo
printf '%-26s %-10s %s\n' step result seconds | tee -a "$logs/summary.txt"
failed=0
for i in "${!names[@]}"; do
  printf '%-26s %-10s %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}" | tee -a "$logs/summary.txt"
  [ "${results[$i]}" = pass ] || failed=1
done
exit $failed
