// The launcher headers (launch.h, scale.h, reduce_check.h, exchange_floor.h, direct_kernels.h, ceiling_kernels.h)
// in a fake-CUDA build (COLLIE_FAKE_CUDA, tests/fake_cuda): instead of a kernel, each launch
// enqueues host work on the fake runtime's stream, so it runs in stream order,
// is recorded by a stream capture and replayed by a graph, like a kernel. The
// program kernel is the real one's body run by kernels/emulator.h; scale and
// reduce-check are plain loops over the shared operators (executor/reduce_ops.h); the exchange floor's body
// (exchange_floor_block.cuh), the direct kernels' (direct_allreduce_block.cuh) and the ceilings'
// (ceiling_block.cuh) run emulated too.
//
// Host threads per emulated block: COLLIE_TEST_FAKE_CUDA_THREADS (default 2: enough
// for the block barrier and the threads' split of a slice to matter).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "executor/reduce_ops.h"
#include "kernels/ceiling_kernels.h"
#include "kernels/direct_kernels.h"
#include "kernels/emulator.h"
#include "kernels/exchange_floor_block.cuh"
#include "kernels/launch.h"
#include "kernels/reduce_check.h"
#include "kernels/scale.h"
#include "kernels/store.h"
#include "tests/fake_cuda/fake_cuda.h"

namespace collie {

namespace {

int threadsPerBlock() {
  const char* s = getenv("COLLIE_TEST_FAKE_CUDA_THREADS");
  const int n = s != nullptr ? atoi(s) : 2;
  return n >= 1 && n <= 64 ? n : 2;
}

// The threads that play a launch's blocks. Work runs on its stream's one
// worker thread, so a launcher per worker thread is a launcher per stream, and
// two streams (two ranks) run their launches at once, as on a GPU.
emu::Launcher* launcherFor(int blocks) {
  thread_local std::unique_ptr<emu::Launcher> launcher;
  const int threads = threadsPerBlock();
  if (launcher == nullptr || launcher->blocks() != blocks || launcher->threadsPerBlock() != threads)
    launcher.reset(new emu::Launcher(blocks, threads));
  return launcher.get();
}

}  // namespace

int preloadProgramKernels() { return static_cast<int>(cudaSuccess); }

int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream) {
  const int blocks = static_cast<int>(args.layout.nchannels);
  // A launch with a bad configuration fails at once, as cudaLaunchKernel does.
  if (blocks < 1 || blocks > kMaxChannels || typeSize(type) == 0) return static_cast<int>(cudaErrorInvalidValue);
  // The arguments are copied into the work, as kernel parameters are at launch.
  auto copy = std::make_shared<KernelArgs>(args);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [copy, type, op, blocks]() {
    const int rc = emu::launchProgram(*copy, type, op, launcherFor(blocks));
    return rc == 0 ? cudaSuccess : cudaErrorLaunchFailure;
  }));
}

int launchScale(collieDataType_t type, void* dst, const void* src, size_t n, const void* hostScalar,
                const void* deviceScalar, void* stream) {
  if (n == 0) return static_cast<int>(cudaSuccess);
  if (typeSize(type) == 0) return static_cast<int>(cudaErrorInvalidValue);
  // A host-immediate scalar is taken now; a device-resident one is read when the work runs.
  uint64_t immediate = 0;
  if (hostScalar != nullptr) memcpy(&immediate, hostScalar, typeSize(type));
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [=]() {
    visitType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T s;
      memcpy(&s, deviceScalar != nullptr ? deviceScalar : static_cast<const void*>(&immediate), sizeof(T));
      const T* in = static_cast<const T*>(src);
      T* out = static_cast<T*>(dst);
      for (size_t i = 0; i < n; ++i) out[i] = scaleBy(in[i], s);
    });
    return cudaSuccess;
  }));
}

int preloadStoreKernel() { return static_cast<int>(cudaSuccess); }

int launchStore(void* dst, const void* src, size_t bytes, void* stream) {
  // The bytes are taken now, as a launch copies its parameters; one work item stands for all the chunks' launches.
  auto data = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                           static_cast<const unsigned char*>(src) + bytes);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [data, dst]() {
    memcpy(dst, data->data(), data->size());
    return cudaSuccess;
  }));
}

int launchReduceCheck(collieDataType_t type, collieRedOp_t op, const void* a, const void* b, void* out, size_t n,
                      int divisor, void* stream) {
  ReduceOp rop;
  if (!toReduceOp(op, &rop) || typeSize(type) == 0) return static_cast<int>(cudaErrorInvalidValue);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [=]() {
    visitType(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      visitOp(rop, [&](auto opc) {
        const T* x = static_cast<const T*>(a);
        const T* y = static_cast<const T*>(b);
        T* r = static_cast<T*>(out);
        for (size_t i = 0; i < n; ++i) {
          const T v = applyOp<decltype(opc)::value>(x[i], y[i]);
          r[i] = divisor > 0 ? divideBy(v, divisor) : v;
        }
      });
    });
    return cudaSuccess;
  }));
}

int preloadExchangeFloor() { return static_cast<int>(cudaSuccess); }

int launchExchangeFloor(const FloorArgs& args, int threads, void* stream) {
  if (threads < 1 || threads > 1024) return static_cast<int>(cudaErrorInvalidValue);
  // Played by COLLIE_TEST_FAKE_CUDA_THREADS threads whatever `threads` says: the body shares its lines among those.
  auto copy = std::make_shared<FloorArgs>(args);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [copy]() {
    launcherFor(1)->run([&](int) { exchangeFloorBlock(*copy); });
    return cudaSuccess;
  }));
}

int preloadDirectKernels(int) { return static_cast<int>(cudaSuccess); }

int directResidentBlocks(DirectKind, collieDataType_t, int, int, int ranksOnDevice, int* blocks) {
  // The emulation runs every block on host threads of its own, so all are resident; a few, as on a small GPU.
  *blocks = ranksOnDevice >= 1 && ranksOnDevice < 8 ? 8 / ranksOnDevice : 1;
  return static_cast<int>(cudaSuccess);
}

int launchDirect(const DirectArgs& args, DirectKind kind, collieDataType_t type, ReduceOp op, int blocks, int threads,
                 void* stream) {
  const char* why = nullptr;
  if (checkDirectLaunch(args, kind, type, op, blocks, threads, &why) != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  // Played by COLLIE_TEST_FAKE_CUDA_THREADS threads per block whatever `threads` says, as the program kernel is.
  auto copy = std::make_shared<DirectArgs>(args);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [copy, kind, type, op, blocks]() {
    return emu::launchDirect(*copy, kind, type, op, launcherFor(blocks)) == 0 ? cudaSuccess : cudaErrorLaunchFailure;
  }));
}

int launchDirectGroup(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, int threads, void* stream) {
  const char* why = nullptr;
  if (checkDirectGroupLaunch(g, type, op, threads, &why) != 0) return static_cast<int>(cudaErrorInvalidValue);
  auto copy = std::make_shared<DirectGroupArgs>(g);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [copy, type, op]() {
    return emu::launchDirectGroup(*copy, type, op, launcherFor(copy->nranks * copy->blocks)) == 0
               ? cudaSuccess
               : cudaErrorLaunchFailure;
  }));
}

int ceilingBlocks(int, int, int sharers, int* blocks) {
  *blocks = sharers >= 1 && sharers < 8 ? 8 / sharers : 1;  // as directResidentBlocks above
  return static_cast<int>(cudaSuccess);
}

int launchCeiling(const CeilingArgs& args, int blocks, int threads, void* stream) {
  if (ceilingRefusal(args, blocks, threads) != nullptr) return static_cast<int>(cudaErrorInvalidValue);
  auto copy = std::make_shared<CeilingArgs>(args);
  return static_cast<int>(fakecuda::enqueue(static_cast<cudaStream_t>(stream), [copy, blocks]() {
    return emu::launchCeiling(*copy, launcherFor(blocks)) == 0 ? cudaSuccess : cudaErrorLaunchFailure;
  }));
}

}  // namespace collie
