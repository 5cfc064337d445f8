// The direct kernels (kernels/direct_kernels.h): one __global__ wrapper per body of direct_allreduce_block.cuh,
// instantiated from the one list of visitDirect (direct_kernels.h) and the allgather's per element size.
//
// Instantiations: 388 kernels per architecture. float, half and bfloat16 (what large calls are made of) get a
// kernel per rank count 2..8 for each operator and allreduce body, loops fully unrolled and U vectors per thread
// in flight (8 loads or more); the other nine types one kernel per operator and body for up to 8 ranks, its loops
// unrolled to 8 and guarded by the run-time count (still no arrays in local memory, but only n loads in flight).
// The reduce-scatter is the two-shot's body with one destination; allgather, all-to-all and broadcast share a
// kernel per element size and rank count, the kind a parameter. The one-shot has a second form, every rank in one
// grid (DirectGroupArgs): 120 of the 388. A kernel per rank count for all twelve types (700 kernels before the
// group form) takes three times as long to compile, about two and a half minutes per architecture on two cores, for
// types no large call of a model uses.
#include <cuda_runtime.h>

#include "kernels/direct_allreduce_block.cuh"
#include "kernels/direct_kernels.h"

namespace collie {

namespace {

// One block of kDirectMaxThreads per SM at least: up to 128 registers a thread. Given the block size alone, ptxas
// aims at 32 registers and spills where the vectors in flight and their conversions need more (half on 8 ranks);
// asked for two blocks (64 registers), it spills on 7 ranks (14 vectors in flight). directResidentBlocks says how
// many fit as compiled.
constexpr int kDirectMinBlocksPerSm = 1;

template <typename T, ReduceOp Op, int N, bool Exact>
__global__ void __launch_bounds__(kDirectMaxThreads, kDirectMinBlocksPerSm)
    directOneShotKernel(const __grid_constant__ DirectArgs a) {
  direct::oneShotAllReduce<T, Op, N, Exact>(a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

// Every rank's one-shot in one grid (DirectGroupArgs): a rank's blocks are a run of the grid.
template <typename T, ReduceOp Op, int N, bool Exact>
__global__ void __launch_bounds__(kDirectMaxThreads, kDirectMinBlocksPerSm)
    directOneShotGroupKernel(const __grid_constant__ DirectGroupArgs g) {
  const int r = static_cast<int>(blockIdx.x) / g.blocks;
  direct::oneShotAllReduce<T, Op, N, Exact>(g.args[r], static_cast<int>(blockIdx.x) - r * g.blocks, g.blocks);
}

template <typename T, ReduceOp Op, int N, bool Exact>
__global__ void __launch_bounds__(kDirectMaxThreads, kDirectMinBlocksPerSm)
    directReduceKernel(const __grid_constant__ DirectArgs a, int scatter) {
  direct::reduceStore<T, Op, N, Exact>(a, scatter != 0, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

// The kinds that move words: one kernel per element size, rank count and kind.
template <typename W, int N>
__global__ void __launch_bounds__(kDirectMaxThreads, kDirectMinBlocksPerSm)
    directWordsKernel(const __grid_constant__ DirectArgs a, int kind) {
  direct::moveWords<W, N>(a, static_cast<DirectKind>(kind), static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

/// Calls f(kernel) with the kernel of `kind` for (type, op, nranks), or with `group` its group form (the
/// one-shot's only); false where there is none.
template <typename F>
bool visitKernel(DirectKind kind, collieDataType_t type, ReduceOp op, int nranks, F&& f, bool group = false) {
  if (group && kind != DirectKind::kOneShotAllReduce) return false;
  if (directMovesWords(kind)) {
    bool found = false;
    visitType(type, [&](auto tag) {
      using W = direct::WordOf<typename decltype(tag)::type>;
      found = visitDirectRanks(
          nranks, [&](auto nc) { f(reinterpret_cast<const void*>(directWordsKernel<W, decltype(nc)::value>)); });
    });
    return found;
  }
  return visitDirect(type, op, nranks, [&](auto tag, auto opc, auto nc, auto exact) {
    using T = typename decltype(tag)::type;
    constexpr ReduceOp kOp = decltype(opc)::value;
    constexpr int kN = decltype(nc)::value;
    constexpr bool kExact = decltype(exact)::value;
    if (group)
      f(reinterpret_cast<const void*>(directOneShotGroupKernel<T, kOp, kN, kExact>));
    else if (kind == DirectKind::kOneShotAllReduce)
      f(reinterpret_cast<const void*>(directOneShotKernel<T, kOp, kN, kExact>));
    else
      f(reinterpret_cast<const void*>(directReduceKernel<T, kOp, kN, kExact>));
  });
}

}  // namespace

int preloadDirectKernels(int nranks) {
  // Lazy module loading loads a kernel at its first launch, which can wait for the context's running kernels:
  // querying each one loads it now (launch.h, preloadProgramKernels).
  int rc = 0;
  for (int k = 0; k < kDirectKinds; ++k) {
    const DirectKind kind = static_cast<DirectKind>(k);
    if (directKernelKind(kind) != kind) continue;  // another kind's kernel, loaded with it
    for (int t = 0; t < collieNumTypes; ++t)
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin}) {
        if (directMovesWords(kind) && op != ReduceOp::kSum) continue;  // no operator: one kernel per type
        auto load = [&](const void* kernel) {
          cudaFuncAttributes attr;
          const cudaError_t e = cudaFuncGetAttributes(&attr, kernel);
          if (e != cudaSuccess && rc == 0) rc = static_cast<int>(e);
        };
        visitKernel(kind, static_cast<collieDataType_t>(t), op, nranks, load);
        visitKernel(kind, static_cast<collieDataType_t>(t), op, nranks, load, true);
      }
  }
  return rc;
}

int directResidentBlocks(DirectKind kind, collieDataType_t type, int nranks, int threads, int ranksOnDevice,
                         int* blocks) {
  *blocks = 0;
  int device = 0, sms = 0, perSm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return static_cast<int>(e);
  // Any operator: the instantiations of one type differ little in registers.
  if (!visitKernel(kind, type, ReduceOp::kSum, nranks, [&](const void* kernel) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, threads, 0);
      }))
    return static_cast<int>(cudaErrorInvalidValue);
  if (e != cudaSuccess) return static_cast<int>(e);
  // The one-shot's group form too (its parameters are larger; its body is the same): either launch must fit.
  visitKernel(
      kind, type, ReduceOp::kSum, nranks,
      [&](const void* kernel) {
        int group = 0;
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&group, kernel, threads, 0);
        perSm = group < perSm ? group : perSm;
      },
      true);
  if (e != cudaSuccess) return static_cast<int>(e);
  const int fit = sms * perSm / (ranksOnDevice > 0 ? ranksOnDevice : 1);
  *blocks = fit < kDirectMaxBlocks ? fit : kDirectMaxBlocks;
  return 0;
}

int launchDirect(const DirectArgs& args, DirectKind kind, collieDataType_t type, ReduceOp op, int blocks, int threads,
                 void* stream) {
  const char* why = nullptr;
  if (checkDirectLaunch(args, kind, type, op, blocks, threads, &why) != 0 || threads % 32 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  // The reduce kernel's second parameter: scatter or not; the words kernel's: its kind.
  int second = directMovesWords(kind) ? static_cast<int>(kind) : kind == DirectKind::kReduceScatter ? 1 : 0;
  void* params[] = {const_cast<DirectArgs*>(&args), &second};
  int rc = static_cast<int>(cudaErrorInvalidValue);
  visitKernel(kind, type, op, args.nranks, [&](const void* kernel) {
    // cudaLaunchKernel answers for this launch alone (kernels/program_kernel.cuh, launchProtocol).
    rc = static_cast<int>(
        cudaLaunchKernel(kernel, dim3(blocks), dim3(threads), params, 0, static_cast<cudaStream_t>(stream)));
  });
  return rc;
}

int launchDirectGroup(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, int threads, void* stream) {
  const char* why = nullptr;
  if (checkDirectGroupLaunch(g, type, op, threads, &why) != 0 || threads % 32 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  void* params[] = {const_cast<DirectGroupArgs*>(&g)};
  int rc = static_cast<int>(cudaErrorInvalidValue);
  visitKernel(
      DirectKind::kOneShotAllReduce, type, op, g.nranks,
      [&](const void* kernel) {
        rc = static_cast<int>(cudaLaunchKernel(kernel, dim3(g.nranks * g.blocks), dim3(threads), params, 0,
                                               static_cast<cudaStream_t>(stream)));
      },
      true);
  return rc;
}

}  // namespace collie
