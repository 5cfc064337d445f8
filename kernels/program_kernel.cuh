// The program kernel: one block per channel runs this rank's Program through
// the shared step runner (executor/step_runner.h) with the device primitives
// of one protocol (Simple: kernels/device_prims.cuh; LL: device_prims_ll.cuh).
// Instantiated per (type, op) from the single type list in
// executor/reduce_ops.h, one protocol per .cu file so the two compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "executor/step_runner.h"
#include "kernels/device_prims.cuh"
#include "kernels/device_prims_ll.cuh"
#include "kernels/launch.h"

namespace collie {

template <typename Prims>
__device__ Prims makePrims(const KernelArgs& a, int c, uint64_t* counters, int* handoff) {
  if constexpr (std::is_constructible<Prims, const KernelArgs&, int, uint64_t*, int*, uint32_t*>::value) {
    // LL: the two staged slices follow the counters in dynamic shared memory.
    return Prims(a, c, counters, handoff, reinterpret_cast<uint32_t*>(counters + 2 * a.layout.nranks));
  } else {
    return Prims(a, c, counters, handoff);
  }
}

/// Elements one slice carries: a Simple slot, or an LL slot's payload.
template <typename T, bool LL>
__device__ uint64_t slicePerStep(const KernelArgs& a) {
  return LL ? llPayloadBytes(a.layout.llSlotBytes) / sizeof(T) : a.layout.slotBytes / sizeof(T);
}

template <typename T, ReduceOp Op, bool LL>
__global__ void __launch_bounds__(kKernelThreads) programKernel(const __grid_constant__ KernelArgs a) {
  // This block's counters (posted[n], consumed[n]) live in shared memory for
  // the launch and in a.counters between launches: kernels of one
  // communicator run in stream order, so each starts where the last stopped.
  extern __shared__ __align__(16) uint64_t counters[];  // then, for LL, the staged slices
  __shared__ int handoff;
  const int n = static_cast<int>(a.layout.nranks);
  const int c = static_cast<int>(blockIdx.x), C = static_cast<int>(gridDim.x);
  const int prog = a.channelProgram[c];
  if (prog < 0) return;  // no work on this channel: its counters stay as they are
  uint64_t* const posted = a.counters + static_cast<size_t>(c) * n;
  uint64_t* const consumed = a.counters + static_cast<size_t>(C + c) * n;
  for (int p = threadIdx.x; p < n; p += blockDim.x) {
    counters[p] = posted[p];
    counters[n + p] = consumed[p];
  }
  // A communicator that failed once is broken: later launches do nothing.
  if (threadIdx.x == 0) handoff = *reinterpret_cast<volatile uint32_t*>(a.failed);
  __syncthreads();
  if (handoff != 0) return;

  using Prims = typename std::conditional<LL, DevicePrimsLL<T, Op>, DevicePrims<T, Op>>::type;
  Prims prims = makePrims<Prims>(a, c, counters, &handoff);
  const uint64_t off = a.channelOffset[c];
  T* const bufs[3] = {a.bufs[0] ? static_cast<T*>(a.bufs[0]) + off : nullptr,
                      a.bufs[1] ? static_cast<T*>(a.bufs[1]) + off : nullptr,
                      reinterpret_cast<T*>(static_cast<char*>(a.bufs[2]) + a.scratchPerChannel * c)};
  const Step* steps = a.steps[prog] != nullptr ? a.steps[prog] : a.inlineSteps + a.inlineAt[prog];
  StepFailure f = runSteps<T>(prims, steps, a.nsteps[prog], bufs, slicePerStep<T, LL>(a), a.divisor,
                              a.splitSteps ? c : 0, a.splitSteps ? C : 1, 16 / sizeof(T));
  if (f.code == 0) {
    f.code = prims.drain(&f.peer);
    f.step = a.nsteps[prog];  // "after the last step"
  }
  if (threadIdx.x != 0) return;
  if (f.code != 0) {
    // The first block to fail records where; the host reads it through
    // collieCommGetAsyncError.
    if (atomicCAS(a.failed, 0u, 1u) == 0u) {
      a.status->step = f.step;
      a.status->peer = f.peer;
      a.status->channel = c;
      a.status->seq = a.seq;
      __threadfence_system();
      a.status->code = static_cast<uint32_t>(f.code);
      __threadfence_system();
    }
    return;
  }
  for (int p = 0; p < n; ++p) {
    posted[p] = counters[p];
    consumed[p] = counters[n + p];
  }
}

/// Dynamic shared memory of a launch: counters, and for LL two staged slices.
inline size_t programSharedBytes(const KernelArgs& a, bool ll) {
  return 2 * sizeof(uint64_t) * a.layout.nranks + (ll ? 2 * llPayloadBytes(a.layout.llSlotBytes) : 0);
}

/// Loads (see preloadProgramKernels) or launches every (type, op) of one protocol.
template <bool LL>
int preloadProtocol() {
  int rc = 0;
  for (int t = 0; t < collieNumTypes; ++t)
    visitType(static_cast<collieDataType_t>(t), [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin})
        visitOp(op, [&](auto opc) {
          auto kernel = programKernel<T, decltype(opc)::value, LL>;
          cudaFuncAttributes attr;
          cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
          // LL stages two slices in shared memory: allow more than the default 48 KiB.
          if (e == cudaSuccess && LL)
            e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024);
          if (e != cudaSuccess && rc == 0) rc = static_cast<int>(e);
        });
    });
  return rc;
}

template <bool LL>
int launchProtocol(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream) {
  int rc = static_cast<int>(cudaErrorInvalidValue);
  visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(op, [&](auto opc) {
      programKernel<T, decltype(opc)::value, LL>
          <<<args.layout.nchannels, kKernelThreads, programSharedBytes(args, LL), static_cast<cudaStream_t>(stream)>>>(
              args);
      rc = static_cast<int>(cudaGetLastError());
    });
  });
  return rc;
}

int preloadSimple();
int preloadLL();
int launchSimple(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream);
int launchLL(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream);

}  // namespace collie
