#!/usr/bin/env bash
# The ThreadSanitizer stage, in one build (build-fakecuda-tsan/: against the fake CUDA runtime of tests/fake_cuda):
#  1. the suites with ranks as threads on the host backend (collectives, every algorithm, send/recv and groups,
#     bootstrap, shm windows, the proxy thread, the kernels' own code on host threads), with the fake runtime
#     showing no GPU, as a machine without one;
#  2. the CUDA executor's host code on fake GPUs, whose streams run launches on threads of their own while the
#     rank threads poll for errors, abort and make the next calls.
# A sequencing or memory-ordering bug in the slot/flag protocol shows up here on the CPU. The sweeps among them
# are sampled (scripts/bounded.sh, `sampled`). Run after scripts/setup.sh (or scripts/test.sh) has installed the
# dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bounded.sh
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export CUDACXX=/usr/local/cuda/bin/nvcc; fi
build=build-fakecuda-tsan
if [ ! -f "$build/build.ninja" ]; then
  # -g1: line tables only, as in scripts/asan.sh (reports name file and line; about a third less compile time).
  # One build for both parts: a second TSan build of the library without the fake runtime would cost some
  # 4 minutes of CI for the same host code.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCOLLIE_FAKE_CUDA=ON \
    -DCOLLIE_WITH_MPI=OFF -DCOLLIE_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
fi
cmake --build "$build" --target allreduce_test collectives_test bootstrap_test shm_window_test p2p_test algorithms_api_test \
  comm_create_test shrink_test revoke_test premulsum_test call_check_test call_signature_test abort_test remote_proxy_test \
  emulator_test giving_up_test ll_flags_test direct_sends_test soak_test collectives_gpu_test program_cache_gpu_test \
  direct_kernels_test
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
# The tests link UCX, whose libucm patches mmap at load time; under TSan, which
# intercepts mmap too, every test then crashes at start. Collie registers no
# memory with UCX, so its memory hooks are not needed here.
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
# The sweeps loop over one type per element size (COLLIE_TEST_TYPES=sizes, tests/common/test_util.h): the
# interleavings TSan looks at are those of flags and slices, the same for every type of a size. Every type runs
# in the plain suite. With all 12 this pass takes some 25 minutes, more than CI's time allows.
export COLLIE_TEST_TYPES=sizes
start=$(date +%s)
# Part 1: no GPU (the fake runtime shows none), so every communicator is a host one.
export COLLIE_TEST_FAKE_CUDA_DEVICES=0
bounded "$build/tests/bootstrap_test" --gtest_brief=1
bounded "$build/tests/shm_window_test" --gtest_brief=1
# The 64 MiB cases only repeat the smaller ones' interleavings, at 10x the cost under TSan; so do 5 to 7 ranks with
# the default slots (tiny slots on 5 ranks stay), between 3 and 8 ranks.
sampled "$build/tests/allreduce_test" --gtest_brief=1 --gtest_filter='-AllReduceLarge.*:*/n5:*/n6:*/n7'
# The other collectives at two rank counts, one of them with tiny slots (many rounds).
sampled "$build/tests/collectives_test" --gtest_brief=1 --gtest_filter='*/n3:*/n5_tinyslots:Collectives.*'
# Send/recv, groups (one thread per communicator at GroupEnd) and all-to-all-v.
bounded "$build/tests/p2p_test" --gtest_brief=1
# The same with each step split across 3 channels (the GPU's plan for all-to-all-v and send/recv).
COLLIE_CHANNELS=3 COLLIE_SLOT_BYTES=4096 COLLIE_SLOTS=2 bounded "$build/tests/p2p_test" --gtest_brief=1
# Every algorithm once, with tiny slots over 3 channels: full FIFOs and many rounds. (One channel on 6 ranks runs
# with reads in place below.)
sampled "$build/tests/algorithms_api_test" --gtest_brief=1 --gtest_filter='*_n5_tinyslots_3channels'
# Every send that may be read in place is (executor/direct_sends.h): a receiver loads the sender's buffer,
# ordered only by the flags, and the sender must not return before its peers are done with it.
# On 6 ranks with one channel; 3 channels of 5 ranks run in the pass above and with the emulated kernels below.
COLLIE_DIRECT_READ_BYTES=0 sampled "$build/tests/algorithms_api_test" --gtest_brief=1 --gtest_filter='*_n6_tinyslots'
COLLIE_DIRECT_READ_BYTES=0 COLLIE_CHANNELS=3 COLLIE_SLOT_BYTES=4096 COLLIE_SLOTS=2 \
  bounded "$build/tests/p2p_test" --gtest_brief=1
bounded "$build/tests/direct_sends_test" --gtest_brief=1 --gtest_filter='*ACallReturnsOnly*'
# Split, shrink and init inside groups (a thread per queued init), pre-multiplied sums queued in groups.
bounded "$build/tests/comm_create_test" --gtest_brief=1
bounded "$build/tests/shrink_test" --gtest_brief=1
# collieCommRevoke from other threads while calls wait.
bounded "$build/tests/revoke_test" --gtest_brief=1
bounded "$build/tests/premulsum_test" --gtest_brief=1
# COLLIE_CHECK's comparison (inside groups too) and collieCommAbort from another thread while a call waits.
bounded "$build/tests/call_check_test" --gtest_brief=1
# Slices signed with their call: a receiver refuses one of another call, and its refusal stops the peers waiting.
bounded "$build/tests/call_signature_test" --gtest_brief=1
bounded "$build/tests/abort_test" --gtest_brief=1
# The proxy thread (executor/remote_proxy.h): alone, then between ranks as threads cut into 2 fake nodes over UCX
# shared memory, with send/recv and all-to-all-v split across 3 channels of tiny slots.
bounded "$build/tests/remote_proxy_test" --gtest_brief=1
COLLIE_FAKE_NODES=2 COLLIE_TEST_PROXY_HOST=1 UCX_TLS=sm,self COLLIE_CHANNELS=3 COLLIE_SLOT_BYTES=4096 COLLIE_SLOTS=2 \
  sampled "$build/tests/p2p_test" --gtest_brief=1
# The CUDA kernels' own code on host threads (COLLIE_TEST_EMULATE_KERNELS, kernels/emulator.h): block barriers, the LL
# lines, the drain, between ranks as threads; every algorithm with tiny slots, then through the proxy across 2 fake
# nodes with send/recv and all-to-all-v split over 3 channels.
bounded "$build/tests/emulator_test" --gtest_brief=1
# Giving up while peers read in place (executor/protocol.h, "Giving up"), both executors: the marks, fences and
# withdrawals between a rank that gives up and its readers.
bounded "$build/tests/giving_up_test" --gtest_brief=1
# LL flags through many wraps: the sender's rewrites of its LL slots race with the receiver's polls by design.
bounded "$build/tests/ll_flags_test" --gtest_brief=1
# The direct kernels (kernels/direct_allreduce_block.cuh) on 2-8 ranks, every kernel, type and operator in a mixed
# order: the one-shot's packets and parities, the barriers' epochs and the peers' buffers they carry, and each rank
# preparing its next call while its peers may still be in their launch of the last.
bounded "$build/tests/direct_kernels_test" --gtest_brief=1
# Every algorithm on the kernels' code, every Simple send that may be read in place so read, as ranks as threads
# on one GPU do: the windows' one mapping per process lets TSan see the flags order those reads.
# 5 ranks with 3 channels of tiny slots (not 6 ranks with one channel as well: 2 minutes more).
COLLIE_TEST_EMULATE_KERNELS=3 COLLIE_DIRECT_READ_BYTES=0 sampled "$build/tests/algorithms_api_test" --gtest_brief=1 \
  --gtest_filter='*_n5_tinyslots_3channels'
# Random cases on long-lived communicators (tests/unit/soak_test.cc), LL and Simple mixed, flags coming round
# every 16 slices, line ages checked after each case: about 200 cases in 20 s.
COLLIE_TEST_EMULATE_KERNELS=2 COLLIE_TEST_LL_FLAG_PERIOD=16 COLLIE_TEST_SOAK_SECONDS=20 bounded "$build/tests/soak_test" --gtest_brief=1
COLLIE_FAKE_NODES=2 COLLIE_TEST_EMULATE_KERNELS=3 UCX_TLS=sm,self COLLIE_CHANNELS=3 COLLIE_SLOT_BYTES=4096 COLLIE_SLOTS=2 \
  sampled "$build/tests/p2p_test" --gtest_brief=1
# Part 2: the CUDA executor's host code on one fake GPU (two-GPU tests run in scripts/fake_gpu.sh). Left out,
# as more than half of this part's time: the staged path's sweep of every collective to 2^20 elements (its
# copies and events on the fake's streams run here in DestroyOfAStagedCommunicatorBesideAWaitingKernel; the host
# executor under it is part 1's) and the tiny slots over 3 channels (the kernels' code so, part 1 too); both run
# without TSan in scripts/fake_gpu.sh, as do the program files' tests (files become the programs the other
# cases run; what they add is the choice of algorithm and protocol, made before any thread starts).
unset COLLIE_TEST_FAKE_CUDA_DEVICES
# The CudaBackend cases all run in scripts/fake_gpu.sh each time; here they are sampled as the sweeps are. The
# direct algorithms' cases (CudaBackend.Direct*, PreMulSumGpu.OnTheDirectKernels) are left out: their kernels'
# bodies run under TSan in direct_kernels_test above, and their launches take the program kernel's path through the
# executor, which the cases here run.
GTEST_TOTAL_SHARDS=$sweep_parts GTEST_SHARD_INDEX=$sweep_part COLLIE_TIMEOUT=120 every_test "$build/tests/collectives_gpu_test" \
  --gtest_filter="CudaBackend.*:Pinned*:*allreduce_ring_n3:*alltoall_pairwise_n3:PreMulSumGpu.*-$two_gpus:CudaBackend.P2POffStagesThroughHostMemory:CudaBackend.TinySlotsAndUnevenChannels:CudaBackend.*ProgramFile*:CudaBackend.Direct*:PreMulSumGpu.OnTheDirectKernels$(no_ucx $build)"
COLLIE_TIMEOUT=120 every_test "$build/tests/program_cache_gpu_test" --gtest_filter='*LongPrograms*:*Queued*:*GlobalCapture*:*Gone*'
# Random cases on CUDA communicators (about 20 in the 30 s here), every send that may be read in place so read.
COLLIE_TIMEOUT=120 COLLIE_DIRECT_READ_BYTES=0 COLLIE_TEST_SOAK_MEMORY=device COLLIE_TEST_LL_FLAG_PERIOD=16 \
  COLLIE_TEST_SOAK_SECONDS=30 every_test "$build/tests/soak_test"
echo "thread sanitizer: clean in $(( $(date +%s) - start )) s"
