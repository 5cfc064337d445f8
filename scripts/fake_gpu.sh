#!/usr/bin/env bash
# The GPU suite on the CPU: builds Collie against the fake CUDA runtime
# (tests/fake_cuda; -DCOLLIE_FAKE_CUDA=ON) in build-fakecuda/ and runs the
# tests of tests/gpu there, plus collie-bench's CUDA backend. The CUDA
# executor's host code (device windows, cudaIpc between processes, launches on
# the user's stream, graph capture, the proxy's pinned memory, the error paths)
# runs for real; the kernels are their own code on host threads. It shows
# nothing about the GPU itself (memory model, speed): that is tests/gpu/run.sh
# on a lent GPU. scripts/sanitize.sh runs part of it under ThreadSanitizer.
# Run after scripts/setup.sh (or scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bounded.sh
build=build-fakecuda
if [ ! -f "$build/build.ninja" ]; then
  # -g1: line tables only (backtraces keep file and line; about a third less compile time than -g).
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DCOLLIE_FAKE_CUDA=ON -DCOLLIE_WITH_MPI=OFF >/dev/null
fi
cmake --build "$build" --target fake_cudart_test collectives_gpu_test program_cache_gpu_test collectives_gpu_mp \
  faults_gpu_mp direct_gpu_mp collie-run nccl_gpu_test collie-bench soak_test exchange_floor ceilings launch_floor \
  collectives_mp
start=$(date +%s)
# The fake's device memory is POSIX shared memory, unlinked by cudaFree and at exit; a process that ends
# by _exit or a signal leaves its objects behind. Remove those of processes that are gone.
sweep() {
  local f pid
  for f in /dev/shm/fakecuda-collie-*; do
    [ -e "$f" ] || continue
    pid=${f#/dev/shm/fakecuda-collie-}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null || rm -f "$f"
  done
}
sweep
trap sweep EXIT
# Few channels and 2 host threads per block: every rank's blocks are host threads on 2 cores. A hang
# costs a minute, not five.
export COLLIE_CHANNELS=2 COLLIE_TEST_FAKE_CUDA_THREADS=2 COLLIE_TIMEOUT=60
# The sweeps loop over one type per element size (COLLIE_TEST_TYPES=sizes, tests/common/test_util.h): what runs
# for real here is the executor's host code, which sees bytes; every type runs on a lent GPU (tests/gpu/run.sh)
# and, on the kernels' own code, in algorithms_emulated (scripts/test.sh).
export COLLIE_TEST_TYPES=sizes
every_test "$build/tests/fake_cuda/fake_cudart_test"
# Ranks as threads: the CudaBackend cases (tiny slots, all-to-all-v, grouped send/recv, graph capture, wrong
# buffers, a rank that never joins), then the sweep of every algorithm at 3 ranks (8 ranks for ring allreduce),
# sampled (scripts/bounded.sh). Every send that may be read in place is (COLLIE_DIRECT_READ_BYTES=0;
# executor/direct_sends.h), whatever its size: the runs below keep the default, under which these tests' sends
# mostly go through slots.
COLLIE_DIRECT_READ_BYTES=0 every_test "$build/tests/collectives_gpu_test" \
  --gtest_filter="CudaBackend.*:Pinned*:PreMulSumGpu.*-$two_gpus$(no_ucx $build)"
COLLIE_DIRECT_READ_BYTES=0 GTEST_TOTAL_SHARDS=$sweep_parts GTEST_SHARD_INDEX=$sweep_part every_test \
  "$build/tests/collectives_gpu_test" --gtest_filter="*_n3:*allreduce_ring_n8"
# Every stream in one hardware queue (the fake's model of CUDA_DEVICE_MAX_CONNECTIONS=1): a call of many
# rounds, a group of sends and receives, or a group of pre-multiplied sums (each rank's call from a thread of
# its own), must not hold back a peer's kernel (docs/cuda-executor.md, "Ranks sharing hardware queues"); nor a
# rank's next collective, made before its peers have queued the last (without the wait for them it deadlocks here).
COLLIE_TEST_FAKE_CUDA_QUEUES=1 every_test "$build/tests/collectives_gpu_test" \
  --gtest_filter='*allreduce_ring_n3:CudaBackend.ACallInManyRoundsIsOneLaunchPerRank:CudaBackend.AllToAllvAndGroupedSendRecv:CudaBackend.ARankAhead*:PreMulSumGpu.*'
# Streams dealt to 2 and 3 hardware queues: a destroy or a split beside a peer's kernel that waits for this rank
# must not wait for the pool's own stream either, which may share a queue with that peer's next launch, held
# back behind the kernel (docs/cuda-executor.md, "No wait for the device in init or destroy"). A destroy that
# waits so times out here with 2 and 3 queues. (The filter takes in the destroys of staged and proxied
# communicators too, whose pinned memory must not go back through cudaFreeHost, which waits for the device.)
for q in 2 3; do
  COLLIE_TEST_FAKE_CUDA_QUEUES=$q every_test "$build/tests/collectives_gpu_test" \
    --gtest_filter="CudaBackend.*BesideAWaitingKernel-$(no_ucx $build)"
done
# Random cases on long-lived CUDA communicators (tests/unit/soak_test.cc), every buffer in device memory: the
# CUDA executor's launches, program cache, scratch and rounds under any mix of collective, algorithm, type,
# count and 1-8 ranks, with LL flags coming round every 16 slices (the counters kept in device memory between
# launches): about 200 cases in 20 s here.
COLLIE_TEST_SOAK_SECONDS=20 COLLIE_TEST_SOAK_MEMORY=device COLLIE_TEST_LL_FLAG_PERIOD=16 every_test "$build/tests/soak_test"
# The same with every stream in one hardware queue: nothing is queued behind a rank's call before its peers
# have queued theirs, so every call, grouped send/recv included, must be one launch per rank that holds back
# no peer (a launch per exchange times out). About 190 cases in 20 s.
COLLIE_TEST_FAKE_CUDA_QUEUES=1 COLLIE_TEST_SOAK_MEMORY=device COLLIE_TEST_LL_FLAG_PERIOD=16 COLLIE_TEST_SOAK_SECONDS=20 \
  every_test "$build/tests/soak_test"
# The same with the tuner weighing the direct kernels (COLLIE_DIRECT_TUNE=1): about one case in ten runs on them,
# the rest on the interpreted algorithms as before, between them on the same communicators.
COLLIE_DIRECT_TUNE=1 COLLIE_TEST_SOAK_MEMORY=device COLLIE_TEST_LL_FLAG_PERIOD=16 COLLIE_TEST_SOAK_SECONDS=20 \
  every_test "$build/tests/soak_test"
# Uploaded programs reused across changing counts, kept while queued launches or captured graphs read them; 22
# ranks with the streams dealt to 32 hardware queues, as run.sh runs them on a GPU. A program copy the enqueue
# waits for on a stream of the executor's own times out here: with 44 streams that stream shares a queue with a
# peer's kernel waiting for this rank's launch. The same wait for a captured launch's copy passes here (the
# peers' next kernels come later), so only a GPU shows that one (ACapturedProgramIsNeverOverwritten).
COLLIE_TEST_FAKE_CUDA_QUEUES=32 CUDA_DEVICE_MAX_CONNECTIONS=32 every_test "$build/tests/program_cache_gpu_test"
# Two fake GPUs: a stream of another GPU than the communicator's; a devlist naming a third; ranks on both, by P2P,
# then (GPUs without P2P) staged through host memory.
COLLIE_TEST_FAKE_CUDA_DEVICES=2 every_test "$build/tests/collectives_gpu_test" \
  --gtest_filter='CudaBackend.AStreamOfAnotherGpuIsAnError:CudaBackend.RanksOnTwoGpus*:CudaBackend.InitAllRefuses*'
COLLIE_TEST_FAKE_CUDA_DEVICES=2 COLLIE_TEST_FAKE_CUDA_P2P=0 every_test "$build/tests/collectives_gpu_test" \
  --gtest_filter='CudaBackend.RanksOnTwoGpus*'
# Ranks as processes: device windows exported and opened through cudaIpc handles.
for np in 2 3; do
  bounded "$build/tools/collie-run" -np "$np" "$build/tests/collectives_gpu_mp"
done
# The direct kernels across processes: peers' buffers in registered windows reached in place, others staged
# through the communicator's buffer, and what must be refused.
for np in 2 3; do
  bounded "$build/tools/collie-run" -np "$np" "$build/tests/direct_gpu_mp"
done
# Two processes of one job on different backends (COLLIE_DEVICE cuda and host): init refuses it on both.
bounded bash tests/gpu/backends_differ_test.sh "$build/tests/collectives_gpu_mp" "$build/tests/collectives_mp"
# A rank process killed after init: the survivors' kernels, waiting on its window, stop within milliseconds because
# its process is gone (executor/peer_watch.h), with COLLIE_TIMEOUT at 60 s; without the watch they would wait it out.
bounded bash tests/gpu/faults_gpu_test.sh "$build/tests/faults_gpu_mp" 3 1
# The same staged through host memory, as without P2P, asked for by rank 1 alone: the others must follow it
# (a rank on the staged path cannot reach a peer's device window, nor the peer its).
bounded "$build/tools/collie-run" -np 3 sh -c '[ "$COLLIE_RANK" != 1 ] || export COLLIE_P2P=0; exec "$0" "$@"' \
  "$build/tests/collectives_gpu_mp"
if has_ucx "$build"; then
  # 2 fake nodes x 2 processes: the staged path, then the proxy thread (pinned outboxes and inbox).
  UCX_TLS=sm,self bounded "$build/tools/collie-run" --nodes 2 -np 4 "$build/tests/collectives_gpu_mp"
  UCX_TLS=sm,self COLLIE_GPU_REMOTE=proxy bounded "$build/tools/collie-run" --nodes 2 -np 4 \
    "$build/tests/collectives_gpu_mp"
fi
# The drop-in libnccl.so.2 on "device" buffers; then with the streams dealt to 1 and 3 hardware queues. Its 4
# ranks are threads that each run a group's calls: a pre-multiplied sum that allocates its staging before the
# kernel and frees it after, on the caller's stream, times out so on every rank (the free waits for our kernel,
# which waits for a peer's kernel queued behind the free); the executor scales into a buffer of its own.
bounded "$build/tests/nccl/nccl_gpu_test"
for q in 1 3; do
  COLLIE_TEST_FAKE_CUDA_QUEUES=$q bounded "$build/tests/nccl/nccl_gpu_test"
done
# collie-bench's CUDA backend: ranks as threads, the copy limit, and graphs (-G).
bounded "$build/bench/collie-bench" allreduce -t 3 --backend cuda -b 8 -e 64K -f 16 -n 3 -w 1 --limit
bounded "$build/bench/collie-bench" allreduce -t 2 --backend cuda -b 8 -e 4K -f 8 -n 3 -w 1 -G 2
# Two commands whose first calls a rank that gets ahead can hold back, with the streams dealt to 3 hardware
# queues: the warm-up calls of such a rank would hold its peers' first kernels back behind its own ("rank 1 had
# started no kernel yet") unless a rank's next collective waits for its peers to queue the last
# (docs/cuda-executor.md, "Ranks sharing hardware queues"). tests/gpu/run.sh runs both, 12 and 6 processes, as
# gpu_first_calls.
COLLIE_TEST_FAKE_CUDA_QUEUES=3 COLLIE_TIMEOUT=10 bounded "$build/bench/collie-bench" allreduce -t 8 --backend cuda \
  -b 8 -e 8 -n 50 -w 10 --algo oneshot
COLLIE_TEST_FAKE_CUDA_QUEUES=3 COLLIE_TIMEOUT=10 bounded "$build/bench/collie-bench" allreduce -t 4 --backend cuda \
  -b 8M -e 8M -n 20 -w 5 --algo ring
# The exchange floor's tool (tests/gpu/exchange_floor.cc: every way, 1 and 3 ranks, 8 and 1000 bytes, few
# iterations), so that its launches, the order it queues them in and its checks have run before a GPU times
# them; its figures mean nothing here. The kernel's body runs in exchange_floor_test too.
bounded "$build/tests/exchange_floor" --sizes 8,1000 20 1 3
# tests/gpu/run.sh itself, on this tree, so that its plumbing (paths, which libnccl.so.2 is loaded, the
# summary and logs packed into $OUT, the deadline) is tested before a lent GPU's minutes are spent on it.
rehearsal=$(mktemp -d)
OUT=$rehearsal GPU_BUILD=$build bounded tests/gpu/run.sh \
  --only 'gpu_processes_np2,gpu_nccl,bench_small_t2_graphs,bench_direct_oneshot_t2,tune_algos_small_t4' test bench tune
grep -q '^gpu_nccl  *pass' "$rehearsal/summary.txt"
grep -q '^tune_algos_small_t4  *pass' "$rehearsal/summary.txt"
grep -q '^bench_direct_oneshot_t2  *pass' "$rehearsal/summary.txt"
# (grep reads all of a pipe here: grep -q would stop at the match, and tar, writing on, would end on SIGPIPE, which
# pipefail reports as a failure.)
tar -tzf "$rehearsal/gpu-logs.tar.gz" | grep 'gpu-logs/small_t2_graphs.json' >/dev/null
tar -tzf "$rehearsal/gpu-logs.tar.gz" | grep 'gpu-logs/tune_algos_small_t4.json' >/dev/null
# The tuner's picks against the fastest algorithm, a line per size (-b 8 -e 64K -f 8: 8 B to 32 KiB, 5 sizes).
[ "$(tar -xzOf "$rehearsal/gpu-logs.tar.gz" gpu-logs/tune_algos_small_t4.log | sed -n '/^# Picks/,/^#$/p' |
  grep -cE '^# +[0-9]+  [a-z]+ +[a-z]+ +[0-9.]+$')" = 5 ]
# The perf part (the direct kernels' figures) at small sizes, and its table: every section the run feeds is there.
OUT=$rehearsal GPU_BUILD=$build PERF_LARGE="64K 256K" PERF_SMALL_MAX=1K bounded tests/gpu/run.sh --only \
  'perf_ceilings,perf_launch_floor,perf_small_t2,perf_large_allreduce_t2,perf_large_allgather_t4,perf_timing_*,'\
'perf_nccl_t2,perf_large_alltoallv_t4_uniform,perf_small_g2_one_launch' perf
python3 tests/gpu/perf_table.py "$rehearsal/perf.jsonl" >"$rehearsal/perf.md"
for section in Machine Ceilings 'Launch floor' 'Large calls' 'Small allreduce' 'Inside the direct' Notes; do
  grep -q "^## $section" "$rehearsal/perf.md" || { echo "perf_table.py: no $section section" >&2; exit 1; }
done
# The tuner with the direct kernels weighed (COLLIE_DIRECT_TUNE, --algo auto_direct) is timed beside the default.
grep -q '"implementation": *"collie:tuner+direct"' "$rehearsal/perf.jsonl" ||
  { echo "perf: no figure of collie:tuner+direct" >&2; exit 1; }
# And the copy-engine form of the copies beside the kernel's.
grep -q '"implementation": *"collie:direct_ce"' "$rehearsal/perf.jsonl" ||
  { echo "perf: no figure of collie:direct_ce" >&2; exit 1; }
# And all-to-all-v's direct kernel beside the interpreted exchanges.
grep -q '"collective": "alltoallv", .*"implementation": *"collie:direct"' "$rehearsal/perf.jsonl" ||
  { echo "perf: no figure of alltoallv collie:direct" >&2; exit 1; }
# And the one-shot with one launch serving every rank, driven by one thread through groups.
grep -q '"ranks_per_thread": 2, .*"implementation": *"collie:direct_oneshot+one_launch"' "$rehearsal/perf.jsonl" ||
  { echo "perf: no figure of collie:direct_oneshot+one_launch" >&2; exit 1; }
# A deadline already reached: every step is reported as not run, and the call fails.
if OUT=$rehearsal GPU_BUILD=$build tests/gpu/run.sh --deadline 5 --only gpu_nccl test; then
  echo "tests/gpu/run.sh passed with its only step not run" >&2
  exit 1
fi
grep -q '^gpu_nccl  *not-run' "$rehearsal/summary.txt"
rm -rf "$rehearsal"
echo "fake-GPU suite: passed in $(($(date +%s) - start)) s"

