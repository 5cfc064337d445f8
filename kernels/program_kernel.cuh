// The program kernel: one block per channel runs this rank's Program through
// the shared step runner (executor/step_runner.h) with the device primitives
// of one protocol (Simple: kernels/device_prims.cuh; LL: device_prims_ll.cuh).
// Instantiated per (type, op) from the single type list in
// executor/reduce_ops.h, one protocol per .cu file so the two compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include "kernels/launch.h"
#include "kernels/program_block.cuh"

namespace collie {

template <typename T, ReduceOp Op, bool LL>
__global__ void __launch_bounds__(kKernelThreads) programKernel(const __grid_constant__ KernelArgs a) {
  extern __shared__ __align__(16) uint64_t counters[];  // then, for LL, the staged slices
  __shared__ int handoff;
  programBlock<T, Op, LL>(a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), counters, &handoff);
}

/// Loads (see preloadProgramKernels) or launches every (type, op) of one protocol.
template <bool LL>
int preloadProtocol() {
  // Dynamic shared memory: 32 bytes per rank (both protocols), plus two LL
  // slices' payload; allow as much as the GPU lets a block opt in to, beyond
  // the default 48 KiB (rank counts in the thousands, 64 KiB LL slots).
  int device = 0, optin = 48 * 1024;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return static_cast<int>(cudaGetLastError());
  int rc = 0;
  for (int t = 0; t < collieNumTypes; ++t)
    visitType(static_cast<collieDataType_t>(t), [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin})
        visitOp(op, [&](auto opc) {
          auto kernel = programKernel<T, decltype(opc)::value, LL>;
          cudaFuncAttributes attr;
          cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
          if (e == cudaSuccess)
            e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     optin - static_cast<int>(attr.sharedSizeBytes));
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
      // cudaLaunchKernel answers for this launch alone; after <<<>>>, cudaGetLastError would also return an
      // error the caller's own code left in this thread, and a launch that happened would count as failed.
      void* params[] = {const_cast<KernelArgs*>(&args)};
      rc = static_cast<int>(cudaLaunchKernel(programKernel<T, decltype(opc)::value, LL>, dim3(args.layout.nchannels),
                                             dim3(kKernelThreads), params, programSharedBytes(args, LL),
                                             static_cast<cudaStream_t>(stream)));
    });
  });
  return rc;
}

int preloadSimple();
int preloadLL();
int launchSimple(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream);
int launchLL(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream);

}  // namespace collie
