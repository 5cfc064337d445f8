#!/usr/bin/env bash
# The GPU suite, for a lent GPU machine (no apt, no network there):
#   build      builds Collie for this GPU in build-gpu/ (GoogleTest from .deps/,
#              made on the development machine by scripts/gpu_deps.sh and carried along);
#   test       the GPU tests: ranks as threads sharing the GPU (the backend's cases, every
#              algorithm at 3 ranks, or 2 with --quick) and as processes (cudaIpc), across
#              2 fake nodes (staged path and proxy), the drop-in NCCL, PyTorch's
#              torch.distributed on it (tests/gpu/torch_collectives_test.py), and random cases
#              on device buffers at 1 to 8 ranks (tests/unit/soak_test.cc; 30 s, then 20 s
#              with every stream in one hardware queue);
#   sanitize   compute-sanitizer memcheck and racecheck on a subset;
#   bench      a short benchmark of the CUDA backend against a device-to-device copy
#              and, at one rank, NCCL;
#   perf       only when named: the direct kernels' figures in one call, JSON lines in gpu-logs/perf.jsonl:
#              the machine and its ceilings (tests/gpu/ceilings.cc), the launch floor at 1-8 threads, then
#              Collie's paths side by side with median and p90 of 5 loops, #wrong and the share of the byte floor
#              (docs/PERFORMANCE.md, "Floors and ceilings"); tests/gpu/perf_table.py turns it into the table;
#   tune       only when named: the sweeps that choose defaults and settle open questions (every
#              allreduce algorithm at small and large sizes, channels, slot sizes, the Simple
#              post's fence, where a kernel's time goes), with the copy limit and the traffic per
#              rank (docs/cuda-executor.md, "Memory traffic and the tuner");
# and ends with a table of what passed and how long it took.
#   tests/gpu/run.sh [--quick] [--deadline S] [--only GLOBS] [PART...]
#     PART: build test sanitize bench perf tune (default: the first four, in that order; given parts run in the
#           order given)
#     --deadline S  no step starts after S seconds, and each is stopped when S is reached, so the call
#                   always ends with its summary (a lent machine gives 15 minutes of device time in all)
#     --only GLOBS  only the steps whose names match one of these comma-separated globs (gpu_nccl,bench_*)
# Each step's line is appended to the summary as it ends, so a call cut short still leaves one.
# A lent machine allows 10 minutes per command and goes back 30 s after a call, so each call starts
# bare: build here with scripts/gpu_stage.sh (nvcc needs no GPU), carry .deps/root and .gpurun, and
# begin each call with `tar xJf .gpurun/build-gpu.tar.xz` instead of running the build part there. With
# 15 minutes of device time in all there is room for one call: run(timeout_s=600, carry=[.deps/root, .gpurun]) of
#   tar xJf .gpurun/build-gpu.tar.xz && GPU_STEP_TIMEOUT=120 tests/gpu/run.sh --deadline 540 test bench tune sanitize
# (bench before tune, since test and the first tune steps can take the whole deadline; tune begins with its open
# questions; what the deadline leaves out is listed as not run).
# Exit status 0 only when every step passed. A test that skips counts as a
# failure here: on a GPU machine a skip means the GPU was not usable.
# COLLIE_TIMEOUT defaults to 30 s, so a hang costs 30 s, not 300; CUDA_DEVICE_MAX_CONNECTIONS to 32.
# GPU_STEP_TIMEOUT (seconds, default none) stops any one step that runs longer.
# GPU_BUILD names the build tree (default build-gpu/); scripts/fake_gpu.sh rehearses this script on the fake
# CUDA runtime's tree, build-fakecuda/, so that its plumbing is tested before a GPU's minutes are spent.
# Logs go to gpu-logs/ (and, packed, to $OUT where that is set).
set -uo pipefail
cd "$(dirname "$0")/../.."
usage() {
  echo "usage: tests/gpu/run.sh [--quick] [--deadline SECONDS] [--only GLOB,...] [build|test|sanitize|bench|perf|tune]..." >&2
  exit 2
}
quick=0 deadline= only=
parts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --deadline) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || usage; deadline=$2; shift ;;
    --only) [ -n "${2:-}" ] || usage; only=$2; shift ;;
    build | test | sanitize | bench | perf | tune) parts+=("$1") ;;
    *) usage ;;
  esac
  shift
done
[ ${#parts[@]} -gt 0 ] || parts=(build test sanitize bench)
started=$(date +%s)
# A lent machine hands back at most 8 files from $OUT: the logs stay in gpu-logs/ and are packed, with the
# summary beside them, into $OUT after every step (so a call cut short still returns what it did).
logs=gpu-logs
rm -rf "$logs"
mkdir -p "$logs"
: >"$logs/summary.txt"
build=${GPU_BUILD:-build-gpu}
prefix=$PWD/.deps/root/usr
export COLLIE_TIMEOUT=${COLLIE_TIMEOUT:-30}
# Some tests run 22 ranks as threads of one process (programs too long for the launch parameters): with CUDA's
# default 8 hardware queues their kernels could queue behind each other (Collie warns). 32 is CUDA's maximum;
# a process setting, read when its CUDA context is made, not a setting of the card.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-32}
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
arch=${arch:-90}

declare -a names times results
record() {  # record NAME RESULT SECONDS: one line of the summary, written at once
  names+=("$1")
  results+=("$2")
  times+=("$3")
  printf '%-26s %-10s %s\n' "$1" "$2" "$3" >>"$logs/summary.txt"
  if [ -n "${OUT:-}" ]; then
    cp "$logs/summary.txt" "$OUT/summary.txt"
    tar -czf "$OUT/gpu-logs.tar.gz" "$logs"
  fi
}
selected() {  # selected NAME: whether --only lets this step run
  [ -z "$only" ] && return 0
  local glob
  IFS=, read -ra globs <<<"$only"
  for glob in "${globs[@]}"; do
    # shellcheck disable=SC2053 # the glob is meant to match
    [[ "$1" == $glob ]] && return 0
  done
  return 1
}
step() {  # step NAME COMMAND...: runs it, logs to $logs/NAME.log, records the outcome
  local name=$1
  shift
  selected "$name" || return 0
  local t0=$(date +%s) rc=0 limit=${GPU_STEP_TIMEOUT:-}
  if [ -n "$deadline" ]; then
    local left=$((deadline - (t0 - started)))
    if [ "$left" -lt 10 ]; then
      echo "== $name: not run, the deadline (${deadline} s) is reached"
      record "$name" "not-run" 0
      return 0
    fi
    [ -n "$limit" ] && [ "$limit" -lt "$left" ] || limit=$left
  fi
  echo "== $name: $*"
  if [ -n "$limit" ]; then
    timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  else
    "$@" >"$logs/$name.log" 2>&1 || rc=$?
  fi
  local result=pass
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    result="TIMEOUT(${limit}s)"
  elif [ "$rc" != 0 ]; then
    result="FAIL($rc)"
  elif grep -q -e '\[  SKIPPED \]' -e '^skipped' "$logs/$name.log"; then
    result=SKIPPED  # the GPU was not usable: not a pass
  fi
  record "$name" "$result" $(($(date +%s) - t0))
  # collie-bench --algo all ends with the tuner's picks against the fastest measured: those, else the last lines.
  if grep -q '^# Picks' "$logs/$name.log"; then
    sed -n '/^# Picks/,/^#$/p' "$logs/$name.log"
  else
    tail -n 5 "$logs/$name.log"
  fi
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
part_build() {
  step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCOLLIE_WITH_MPI=OFF -DCMAKE_PREFIX_PATH="$prefix" -DGTest_DIR="$prefix/lib/x86_64-linux-gnu/cmake/GTest"
  step build cmake --build "$build" -j 16 --target collectives_gpu_test program_cache_gpu_test reduce_ops_gpu_test \
    collectives_gpu_mp faults_gpu_mp collie-run nccl_gpu_test collie-bench soak_test launch_floor exchange_floor \
    ceilings direct_gpu_mp
}
part_test() {
  # First, with every stream in one hardware queue: calls of several rounds, a grouped send/recv and pre-multiplied
  # sums, each one launch per rank with nothing queued after it (docs/cuda-executor.md, "Ranks sharing hardware
  # queues"); a rank whose next collective waits until its peers have queued the last.
  step gpu_one_queue env CUDA_DEVICE_MAX_CONNECTIONS=1 "$build/tests/collectives_gpu_test" \
    --gtest_filter='*allreduce_ring_n3:CudaBackend.ACallInManyRoundsIsOneLaunchPerRank:CudaBackend.AllToAllvAndGroupedSendRecv:CudaBackend.ARankAhead*:PreMulSumGpu.*'
  # The first calls of fresh processes, each process ending at its first error: an 8-byte one-shot allreduce at
  # 8 ranks and a 4-rank Simple ring at 8 MiB, whose first kernels hold each other back in shared hardware queues
  # unless a rank's next collective waits for its peers to queue the last (docs/cuda-executor.md, "Ranks sharing
  # hardware queues"). A hang's sentence is in the step's log.
  step gpu_first_calls env COLLIE_TIMEOUT=10 bash -c 'for i in $(seq 12); do
      "$0" allreduce -t 8 --backend cuda -b 8 -e 8 -n 50 -w 10 --algo oneshot || { echo "8 ranks: process $i failed"; exit 1; }
      [ "$i" -gt 6 ] || "$0" allreduce -t 4 --backend cuda -b 8M -e 8M -n 20 -w 5 --algo ring \
        || { echo "4 ranks: process $i failed"; exit 1; }
    done; echo "18 processes passed their first calls"' "$build/bench/collie-bench"
  # With one GPU the two-GPU tests would skip, which counts as a failure here: leave them out.
  local others= np
  [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] ||
    others=-CudaBackend.AStreamOfAnotherGpuIsAnError:CudaBackend.RanksOnTwoGpusStageOnlyWithoutP2P
  # The backend's own cases first, then every algorithm on device buffers at 3 ranks (and ring allreduce at 8),
  # 160 cases each up to 1 Mi elements. All 110 (22 algorithms x 1, 2, 3, 4, 8 ranks) do not fit a lent
  # machine's minutes (some 6 s each, and a step has 150 s). The soak (gpu_soak) draws every
  # algorithm at 1 to 8 ranks. GPU_THREADS_FILTER picks others, e.g. 'Registry/*' for all.
  step gpu_backend "$build/tests/collectives_gpu_test" --gtest_filter="CudaBackend.*:Pinned*:PreMulSumGpu.*$others"
  local registry='Registry/*_n3:Registry/*allreduce_ring_n8'
  [ "$quick" = 0 ] || registry='Registry/*_n2'
  step gpu_threads "$build/tests/collectives_gpu_test" --gtest_filter="${GPU_THREADS_FILTER:-$registry}"
  step gpu_reduce_ops "$build/tests/reduce_ops_gpu_test"
  step gpu_program_cache "$build/tests/program_cache_gpu_test"
  for np in 2 3 4; do
    step "gpu_processes_np$np" "$build/tools/collie-run" -np "$np" "$build/tests/collectives_gpu_mp"
  done
  # The direct kernels between processes: buffers in windows, staged, mixed, captured; the refusals.
  for np in 2 3; do
    step "gpu_direct_processes_np$np" "$build/tools/collie-run" -np "$np" "$build/tests/direct_gpu_mp"
  done
  # A rank process killed after init: the survivors' kernels stop within milliseconds (executor/peer_watch.h),
  # not after COLLIE_TIMEOUT.
  step gpu_fault_before bash tests/gpu/faults_gpu_test.sh "$build/tests/faults_gpu_mp" 3 1
  # Two processes of one job on different backends (COLLIE_DEVICE cuda and host): init refuses it on both.
  step gpu_backends_differ bash tests/gpu/backends_differ_test.sh "$build/tests/collectives_gpu_mp" \
    "$build/tests/collectives_mp"
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
  # Ours first on the library path: CUDA's lib64, put there above for libcudart, may hold NVIDIA's libnccl.so.2.
  step gpu_nccl env LD_LIBRARY_PATH="$PWD/$build/compat/nccl:${LD_LIBRARY_PATH:-}" "$build/tests/nccl/nccl_gpu_test"
  # PyTorch unchanged, on our libnccl.so.2 through LD_PRELOAD (its NCCL comes from a wheel, found by RPATH, so
  # LD_LIBRARY_PATH would not redirect it): 3 processes on the GPU, every collective torch.distributed offers.
  step gpu_torch env LD_PRELOAD="$PWD/$build/compat/nccl/libnccl.so.2" PYTHONUNBUFFERED=1 \
    python3 tests/gpu/torch_collectives_test.py --np 3 --timeout 120
  # Random cases on long-lived communicators (tests/unit/soak_test.cc), every buffer in GPU memory, ranks as
  # threads: LL and Simple mixed, 1-8 ranks, 1-3 channels, any collective and algorithm, LL flags coming round
  # every 16 slices; 30 s.
  step gpu_soak env COLLIE_TEST_SOAK_MEMORY=device COLLIE_TEST_LL_FLAG_PERIOD=16 COLLIE_TEST_SOAK_SECONDS=30 \
    "$build/tests/soak_test"
  # The same with every stream in one hardware queue: the soak queues nothing behind a call before the peers
  # have queued theirs, so every call, a grouped send/recv included, must be one launch that holds back no
  # peer's.
  step gpu_soak_one_queue env CUDA_DEVICE_MAX_CONNECTIONS=1 COLLIE_TEST_SOAK_MEMORY=device COLLIE_TEST_LL_FLAG_PERIOD=16 \
    COLLIE_TEST_SOAK_SECONDS=20 "$build/tests/soak_test"
}
part_sanitize() {
  [ "$quick" = 0 ] || return 0
  selected memcheck || selected racecheck || selected memcheck_alltoallv || return 0
  command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer not found"; record sanitize SKIPPED 0; return 0; }
  # Some lent machines' runtimes (gVisor) refuse the tools ("Device not supported"): say so in one line rather
  # than as two failed steps.
  if timeout 60 compute-sanitizer --tool memcheck "$build/tests/collectives_gpu_test" \
    --gtest_filter=CudaBackend.OneRankCopiesInCallOrderWithoutALaunch 2>&1 | grep 'Device not supported' >/dev/null; then
    echo "compute-sanitizer: Device not supported on this machine"
    record sanitize UNSUPPORTED 0
    return 0
  fi
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/collectives_gpu_test" \
    --gtest_filter='*allreduce_ring_n3:*allgather_ring_n2:*alltoall_pairwise_n3:CudaBackend.AKernelEnds*'
  step racecheck compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/collectives_gpu_test" \
    --gtest_filter='*allreduce_ring_n2:*reducescatter_ring_n3'
  # Last, and alone: under memcheck a launch of its 4 ranks can take tens of seconds to return. A longer
  # COLLIE_TIMEOUT tells a slow tool from a hang, and a failure here costs none of the steps above.
  step memcheck_alltoallv env COLLIE_TIMEOUT=120 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tests/collectives_gpu_test" --gtest_filter='CudaBackend.AllToAllv*'
}
find_nccl() {  # NCCL for --vs nccl: the system's, else the one PyTorch brings (nvidia-nccl wheel)
  local nccl
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' \
    2>/dev/null || true)
  [ -z "$nccl" ] || export LD_LIBRARY_PATH="$nccl:${LD_LIBRARY_PATH:-}"
}
part_bench() {
  local bench=$build/bench/collie-bench t c
  [ -x "$bench" ] || { echo "$bench not built"; record bench FAIL-not-built 0; return 0; }
  find_nccl
  # Ranks as threads of one process (-t): one CUDA context, kernels run concurrently.
  # NCCL refuses two ranks on one GPU, so it is compared at one rank.
  step bench_allreduce_1_vs_nccl "$bench" allreduce --backend cuda -b 4 -e 256M -f 4 --vs nccl --limit \
    --json "$logs/allreduce_1.json"
  # From 4 B (one float) by 4, so that 256 MiB, the issue's size for the bandwidth target, is a point (from 8 B
  # the last was 128 MiB); 8 B is in the graph steps.
  for t in 2 4 8; do
    step "bench_allreduce_t$t" "$bench" allreduce -t "$t" --backend cuda -b 4 -e 256M -f 4 --limit \
      --json "$logs/allreduce_t$t.json" --plot "$logs/allreduce_t$t.svg"
    step "bench_small_t${t}_graphs" "$bench" allreduce -t "$t" --backend cuda -b 8 -e 64K -f 2 -G 20 \
      --json "$logs/small_t${t}_graphs.json"
  done
  # The floor of a call made of one launch per rank, without a collective: T threads each launching a tiny kernel
  # on a stream of its own (and with the event record and capture query each Collie enqueue adds, and as graphs).
  # If launches into one context serialize, this alone is near the small calls' times at 4 and 8 ranks.
  step bench_launch_floor "$build/tests/launch_floor" 2000 1 2 4 8
  # The floor of a small call with a collective in it: each rank's kernel hands a payload to every peer and waits
  # for theirs, nothing else (kernels/exchange_floor.h): per exchange, by the way a payload travels, and per call
  # at 2, 4 and 8 ranks, 8 B to 64 KiB. What bench_small_* and bench_phases_* measure above it is Collie's own.
  step bench_exchange_floor "$build/tests/exchange_floor" 2000 2 4 8
  # Where a small call's kernel time goes: each rank logs its blocks' mean setup, steps, drain and store
  # (COLLIE_KERNEL_TIMING, kernels/launch.h) as its communicator goes; one size per run, so each mean is its own.
  for c in 8 64K; do
    step "bench_phases_t4_$c" env COLLIE_KERNEL_TIMING=1 "$bench" allreduce -t 4 --backend cuda -b "$c" -e "$c" -n 200 \
      -w 20
  done
  # What LL buys for small calls: the same sizes with Simple forced (bench_allreduce_t4 picks LL up to 64 KiB).
  step bench_small_t4_simple env COLLIE_PROTO=simple "$bench" allreduce -t 4 --backend cuda -b 8 -e 64K -f 4 \
    --json "$logs/small_t4_simple.json"
  # The one-shot direct kernel (allreduce direct_oneshot, kernels/direct_allreduce_block.cuh) beside Collie's own
  # pick and the interpreted one-shot, at 2, 4 and 8 ranks: what decides whether the tuner takes it for small calls.
  for t in 2 4 8; do
    step "bench_direct_oneshot_t$t" "$bench" allreduce -t "$t" --backend cuda -b 8 -e 64K -f 4 \
      --algo auto,oneshot,direct_oneshot --json "$logs/direct_oneshot_t$t.json"
  done
  # The barrier kernels (direct_twoshot, reducescatter and allgather direct) beside Collie's pick, 64 KiB to
  # 256 MiB, with the copy limit (--limit): the large calls' share of the floor, and where they win.
  for t in 2 4 8; do
    step "bench_direct_twoshot_t$t" "$bench" allreduce -t "$t" --backend cuda -b 64K -e 256M -f 16 -n 5 -w 2 \
      --algo auto,direct_twoshot --limit --json "$logs/direct_twoshot_t$t.json"
  done
  for c in reducescatter allgather; do
    step "bench_direct_${c}_t4" "$bench" "$c" -t 4 --backend cuda -b 64K -e 256M -f 16 -n 5 -w 2 \
      --algo auto,direct --limit --json "$logs/direct_${c}_t4.json"
  done
  for c in allgather reducescatter alltoall; do
    step "bench_${c}_t4" "$bench" "$c" -t 4 --backend cuda -b 256 -e 256M -f 16 --limit --json "$logs/${c}_t4.json"
  done
}

# The figures the direct kernels are judged by (docs/PERFORMANCE.md, "Floors and ceilings"), each beside its
# baseline from the same run, in one call of about 8 minutes (its command is in docs/PERFORMANCE.md). Every figure
# is a line of $logs/perf.jsonl, copied to $OUT after each step, so a call cut short keeps the lines of the steps
# that ended. Steps run most needed first. PERF_LARGE (default "64M 256M") and PERF_SMALL_MAX (default 256K)
# shrink the sizes for scripts/fake_gpu.sh's rehearsal.
part_perf() {
  local bench=$build/bench/collie-bench jsonl=$logs/perf.jsonl t c
  [ -x "$bench" ] || { echo "$bench not built"; record perf FAIL-not-built 0; return 0; }
  find_nccl
  local large small_max=${PERF_SMALL_MAX:-256K}
  read -ra large <<<"${PERF_LARGE:-64M 256M}"
  local big=(-b "${large[0]}" -e "${large[-1]}" -f 4 -n 5 -w 2 --reps 3 --limit --jsonl "$jsonl")
  local few=(-b 8 -e "$small_max" -f 2 -n 20 -w 5 --reps 5 --jsonl "$jsonl")
  publish() { [ -z "${OUT:-}" ] || [ ! -f "$jsonl" ] || cp "$jsonl" "$OUT/perf.jsonl"; }
  perf_step() {  # the step, then its figures into $OUT
    step "$@"
    publish
  }
  timed_step() {  # NAME COMMAND...: the step with COLLIE_KERNEL_TIMING=1; each rank's direct-kernel means a line
    local name=$1
    shift
    step "$name" env COLLIE_KERNEL_TIMING=1 "$@"
    [ ! -f "$logs/$name.log" ] || sed -nE 's/.*rank ([0-9]+): direct kernels \(COLLIE_KERNEL_TIMING=1\), mean over ([0-9]+) '\
'launches: ([0-9.]+) us from start to end, ([0-9.]+) us of it until .*/{"kind": "direct_timing", "step": '\
'"'"$name"'", "rank": \1, "launches": \2, "kernel_us": \3, "until_peers_us": \4}/p' "$logs/$name.log" >>"$jsonl"
    publish
  }
  # First whether the direct kernels give the right bits on this GPU (every sweep type and operator, in and out of
  # place, the refusals): the timed steps below check one type each.
  step perf_direct_correct "$build/tests/collectives_gpu_test" \
    --gtest_filter='CudaBackend.Direct*:CudaBackend.TheTuner*:PreMulSumGpu.OnTheDirectKernels'
  # Where they fail it (a wrong bit, a hang), the steps below time the other paths only: a direct kernel that
  # hangs would otherwise cost every step that mixes it in COLLIE_TIMEOUT and every figure of that step.
  local direct=1
  if selected perf_direct_correct && [ "${results[${#results[@]}-1]:-}" != pass ]; then
    direct=0
    echo "== perf: the direct kernels did not pass perf_direct_correct: the steps below time the other paths only"
  fi
  algos() { if [ "$direct" = 1 ]; then echo "$1"; else echo "$2"; fi; }  # algos LIST FALLBACK: --algo's list
  # And between processes (windows through cudaIpc, the staging buffer), which no GPU has run before.
  step perf_direct_processes "$build/tools/collie-run" -np 2 "$build/tests/direct_gpu_mp"
  # The machine, and what its memory allows: copies by the copy engine and by the SMs on 1 to 8 streams, and an
  # allreduce with no synchronisation at all (kernels/ceiling_kernels.h).
  perf_step perf_ceilings "$build/tests/ceilings" --jsonl "$jsonl" --bytes "$(IFS=,; echo "${large[*]}")"
  perf_step perf_launch_floor "$build/tests/launch_floor" --jsonl "$jsonl" 2000 1 2 3 4 5 6 7 8
  # Small allreduces: the tuner's pick without and with the direct kernels (COLLIE_DIRECT_TUNE, whose default
  # waits for these figures), the interpreted one-shot and the direct one (n/a over 64 KiB).
  for t in 2 4 8; do
    perf_step "perf_small_t$t" "$bench" allreduce -t "$t" --backend cuda "${few[@]}" \
      --algo "$(algos auto,auto_direct,oneshot,direct_oneshot auto,oneshot)"
  done
  # Large calls: the tuner's picks beside the direct kernels, with the copy limit, so the byte floor's share.
  for t in 2 4 8; do
    perf_step "perf_large_allreduce_t$t" "$bench" allreduce -t "$t" --backend cuda "${big[@]}" \
      --algo "$(algos auto,auto_direct,twoshot,direct_twoshot auto,twoshot)"
  done
  # The copies (allgather, all-to-all, broadcast) by the SMs' kernel and by the copy engine (direct_ce), which
  # the ceilings' ce_ lines bound.
  perf_step perf_large_reducescatter_t4 "$bench" reducescatter -t 4 --backend cuda "${big[@]}" \
    --algo "$(algos auto,auto_direct,direct auto)"
  for c in allgather alltoall broadcast; do
    perf_step "perf_large_${c}_t4" "$bench" "$c" -t 4 --backend cuda "${big[@]}" \
      --algo "$(algos auto,auto_direct,direct,direct_ce auto)"
  done
  # Inside the direct kernels, by the GPU's timer: each rank's time from its kernel's start to its end, and until
  # every peer had come (the launch skew it saw), one size per run.
  if [ "$direct" = 1 ]; then
    timed_step perf_timing_oneshot_t4 "$bench" allreduce -t 4 --backend cuda -b 8 -e 8 -n 200 -w 20 \
      --algo direct_oneshot
    timed_step perf_timing_twoshot_t4 "$bench" allreduce -t 4 --backend cuda -b "${large[0]}" -e "${large[0]}" \
      -n 10 -w 2 --algo direct_twoshot
  fi
  # One rank against NCCL at every size; then whether this machine's NCCL takes 2 ranks on one GPU (it says
  # which version refused, as a note of the run).
  perf_step perf_one_rank_vs_nccl "$bench" allreduce --backend cuda -b 8 -e "${large[-1]}" -f 4 -n 20 -w 5 \
    --reps 3 --vs nccl --jsonl "$jsonl"
  perf_step perf_nccl_t2 "$bench" allreduce -t 2 --backend cuda -b 1M -e 1M -n 5 -w 2 --vs nccl --jsonl "$jsonl"
  # Small calls as CUDA graphs.
  for t in 2 4 8; do
    perf_step "perf_small_t${t}_graphs" "$bench" allreduce -t "$t" --backend cuda "${few[@]}" -G 20 \
      --algo "$(algos auto,oneshot,direct_oneshot auto,oneshot)"
  done
  # Part 4's one launch serving every rank (COLLIE_DIRECT_ONE_LAUNCH, off by default until these figures): one
  # thread driving every rank through groups, as collieCommInitAll programs do, a launch per rank beside one launch
  # for all, with the tuner's pick.
  for t in 2 4 8; do
    perf_step "perf_small_g${t}_one_launch" "$bench" allreduce -t 1 -g "$t" --backend cuda "${few[@]}" \
      --algo "$(algos auto,direct_oneshot,direct_oneshot+one_launch auto)"
  done
  for t in 2 8; do
    perf_step "perf_large_reducescatter_t$t" "$bench" reducescatter -t "$t" --backend cuda "${big[@]}" \
      --algo "$(algos auto,direct auto)"
    for c in allgather alltoall; do
      perf_step "perf_large_${c}_t$t" "$bench" "$c" -t "$t" --backend cuda "${big[@]}" \
        --algo "$(algos auto,direct,direct_ce auto)"
    done
  done
  # All-to-all-v by its direct kernel and by the copy engine (named only: the tuner never picks them) against the
  # interpreted exchanges, on even splits and on a skewed matrix (zipf), whose largest pair bounds the time.
  for traffic in uniform zipf:1.2; do
    perf_step "perf_large_alltoallv_t4_${traffic%%:*}" "$bench" alltoallv -t 4 --backend cuda "${big[@]}" \
      --traffic "$traffic" --algo "$(algos pairwise,direct,direct_ce pairwise)"
  done
}

# What the defaults should be, measured rather than guessed (the tuner's shared-GPU model is fitted to large
# allreduces and assumes the rest; the defaults of channels, slots and slot sizes are choices, not measurements).
# Each step is a short sweep of its own; together about 3 minutes of a GPU (an estimate).
part_tune() {
  local bench=$build/bench/collie-bench t c s
  [ -x "$bench" ] || { echo "$bench not built"; record tune FAIL-not-built 0; return 0; }
  # Reading peers' sends in place (executor/direct_sends.h; on by default from 128 KiB) against every slice
  # through a slot (COLLIE_DIRECT_READ_BYTES=-1), side by side.
  local d
  for c in allreduce allgather alltoall; do
    for d in on:131072 off:-1; do
      step "tune_direct_${d%%:*}_${c}_t4" env COLLIE_DIRECT_READ_BYTES="${d#*:}" "$bench" "$c" -t 4 --backend cuda \
        -b 1M -e 256M -f 16 -n 5 -w 2 --limit --json "$logs/tune_direct_${d%%:*}_${c}_t4.json"
    done
  done
  for t in 2 4; do
    step "tune_algos_large_t$t" "$bench" allreduce -t "$t" --backend cuda -b 32M -e 128M -f 4 -n 5 -w 2 --algo all \
      --limit --json "$logs/tune_algos_large_t$t.json"
  done
  # Where those sweeps fail and the same calls alone pass, in place or not, the same sweep with every slice
  # through a slot tells whether reading in place takes part.
  step tune_algos_large_t4_direct_off env COLLIE_DIRECT_READ_BYTES=-1 "$bench" allreduce -t 4 --backend cuda -b 32M \
    -e 128M -f 4 -n 5 -w 2 --algo all --limit --json "$logs/tune_algos_large_t4_direct_off.json"
  # Two-shot reduces the n inputs of its chunk in one pass (joined steps, algorithms/program.h): read in place it
  # moves (3n-1)/n of the buffer per rank where the ring moves (5n-5)/n, 1.36x less at 4 ranks and 1.52x at 8. The
  # tuner's shared-GPU model counts slots and still picks the ring (docs/cuda-executor.md, "Memory traffic and
  # the tuner"): this decides.
  for t in 4 8; do
    step "tune_twoshot_t$t" "$bench" allreduce -t "$t" --backend cuda -b 8M -e 256M -f 4 -n 5 -w 2 \
      --algo ring,twoshot --limit --json "$logs/tune_twoshot_t$t.json"
  done
  # The shared-GPU model picks ring over bruck for allgather with no measurement behind it: every algorithm.
  step tune_algos_allgather_t4 "$bench" allgather -t 4 --backend cuda -b 1M -e 64M -f 8 -n 5 -w 2 --algo all \
    --limit --json "$logs/tune_algos_allgather_t4.json"
  # Every allreduce algorithm side by side (--algo all: the tuner's pick first), small calls. At 8 ranks hier's
  # programs (16 steps each) pass the 40 inline steps once a call runs in rounds, so they travel to the GPU in
  # store kernels on the launch's stream, never waited for (8 communicators x 8 ranks x 2 streams share 32
  # hardware queues with waiting kernels).
  for t in 4 8; do
    step "tune_algos_small_t$t" "$bench" allreduce -t "$t" --backend cuda -b 8 -e 64K -f 8 -n 20 -w 5 --algo all \
      --json "$logs/tune_algos_small_t$t.json"
  done
  # The floor under a small call: one exchange between 2 ranks (a grouped send/recv, one launch), and where its
  # kernel's time goes; then the same split for an 8-byte allreduce at 8 ranks (3 recursive-doubling steps).
  step tune_sendrecv_t2 "$bench" sendrecv -t 2 --backend cuda -b 8 -e 64K -f 8 -n 50 -w 10 \
    --json "$logs/tune_sendrecv_t2.json"
  step tune_phases_sendrecv_t2_8 env COLLIE_KERNEL_TIMING=1 "$bench" sendrecv -t 2 --backend cuda -b 8 -e 8 -n 200 \
    -w 20
  step tune_phases_t8_8 env COLLIE_KERNEL_TIMING=1 "$bench" allreduce -t 8 --backend cuda -b 8 -e 8 -n 200 -w 20
  # Blocks per rank: the default is about half the SMs over the ranks on the GPU, at most 16 (comm_cuda.cc).
  for c in 4 8 16 32; do
    step "tune_channels_t4_$c" env COLLIE_CHANNELS="$c" "$bench" allreduce -t 4 --backend cuda -b 8M -e 128M -f 16 \
      -n 5 -w 2 --algo ring --limit --json "$logs/tune_channels_t4_$c.json"
  done
  # 32 channels cut the slots to 64 KiB within the default 32 MiB window; the same with room for 128 KiB ones.
  step tune_channels_t4_32_window env COLLIE_CHANNELS=32 COLLIE_DEVICE_WINDOW_BYTES=$((64 << 20)) "$bench" allreduce \
    -t 4 --backend cuda -b 8M -e 128M -f 16 -n 5 -w 2 --algo ring --limit --json "$logs/tune_channels_t4_32_window.json"
  step tune_channels_t2_32 env COLLIE_CHANNELS=32 "$bench" allreduce -t 2 --backend cuda -b 8M -e 128M -f 16 -n 5 \
    -w 2 --algo ring --limit --json "$logs/tune_channels_t2_32.json"
  # A full fence before every Simple post (COLLIE_DEV_SYSTEM_FENCE=1), against tune_channels_t4_16
  # (the same calls without it) and bench_small_t4_simple (small calls, Simple forced, without it).
  step tune_fence_t4 env COLLIE_DEV_SYSTEM_FENCE=1 "$bench" allreduce -t 4 --backend cuda -b 8M -e 128M -f 16 -n 5 -w 2 \
    --algo ring --limit --json "$logs/tune_fence_t4.json"
  step tune_fence_small_t4_simple env COLLIE_DEV_SYSTEM_FENCE=1 COLLIE_PROTO=simple "$bench" allreduce -t 4 \
    --backend cuda -b 8 -e 64K -f 4 --json "$logs/tune_fence_small_t4_simple.json"
  # Every flag at system scope (COLLIE_DEV_SYSTEM_SCOPE=1), against the same calls at GPU scope
  # between ranks of this GPU (the default): tune_channels_t4_16, bench_small_t4_simple and bench_allreduce_t4.
  step tune_scope_t4 env COLLIE_DEV_SYSTEM_SCOPE=1 "$bench" allreduce -t 4 --backend cuda -b 8M -e 128M -f 16 -n 5 -w 2 \
    --algo ring --limit --json "$logs/tune_scope_t4.json"
  step tune_scope_small_t4_simple env COLLIE_DEV_SYSTEM_SCOPE=1 COLLIE_PROTO=simple "$bench" allreduce -t 4 \
    --backend cuda -b 8 -e 64K -f 4 --json "$logs/tune_scope_small_t4_simple.json"
  step tune_scope_small_t4 env COLLIE_DEV_SYSTEM_SCOPE=1 "$bench" allreduce -t 4 --backend cuda -b 8 -e 64K -f 4 \
    --json "$logs/tune_scope_small_t4.json"
  # An LL batch's slices in one pass of the block (the default) against one by one
  # (COLLIE_DEV_LL_SEPARATE_POSTS=1): one-shot allreduce and pairwise all-to-all, the batches' users, at 8 ranks.
  for posts in together:0 separate:1; do
    step "tune_posts_t8_${posts%%:*}" env COLLIE_DEV_LL_SEPARATE_POSTS="${posts#*:}" "$bench" allreduce -t 8 \
      --backend cuda -b 8 -e 8K -f 8 -n 50 -w 10 --algo oneshot --json "$logs/tune_posts_t8_${posts%%:*}.json"
    step "tune_posts_alltoall_t8_${posts%%:*}" env COLLIE_DEV_LL_SEPARATE_POSTS="${posts#*:}" "$bench" alltoall -t 8 \
      --backend cuda -b 64 -e 8K -f 8 -n 50 -w 10 --json "$logs/tune_posts_alltoall_t8_${posts%%:*}.json"
  done
  # At a large size: is a block's time its own moving or waiting for peers (the cap near 2 TB/s of traffic,
  # docs/cuda-executor.md, "Memory traffic and the tuner")?
  step tune_phases_t4_128M env COLLIE_KERNEL_TIMING=1 "$bench" allreduce -t 4 --backend cuda -b 128M -e 128M -n 10 \
    -w 2 --algo ring
  # Slot size (default 256 KiB, cut to fit COLLIE_DEVICE_WINDOW_BYTES: 128 KiB at 4 ranks x 16 channels).
  for s in 64K:65536 1M:1048576; do
    step "tune_slot_t4_${s%%:*}" env COLLIE_SLOT_BYTES="${s#*:}" COLLIE_DEVICE_WINDOW_BYTES=$((512 << 20)) \
      "$bench" allreduce -t 4 --backend cuda -b 8M -e 128M -f 16 -n 5 -w 2 --algo ring --limit \
      --json "$logs/tune_slot_t4_${s%%:*}.json"
  done
}

for part in "${parts[@]}"; do
  "part_$part"
done

echo
printf '%-26s %-10s %s\n' step result seconds
failed=0
for i in "${!names[@]}"; do
  printf '%-26s %-10s %s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
  [ "${results[$i]}" = pass ] || failed=1
done
[ ${#names[@]} -gt 0 ] || { echo "no step ran (--only '$only' matched none)"; failed=1; }
echo "$(($(date +%s) - started)) s in all"
exit $failed
