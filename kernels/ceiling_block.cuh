// The ceiling kernels' body (kernels/ceiling_kernels.h), over the direct kernels' move, so that the GPU and the
// CPU emulation (kernels/direct_emulated.cc) run the same text.
#pragma once

#include "kernels/ceiling_kernels.h"
#include "kernels/direct_allreduce_block.cuh"

namespace collie {
namespace direct {

/// Block `block` of `nblocks`: a grid-stride share of a.count elements from a.nsrc sources (at most N) reduced in
/// source order into a.ndst destinations.
template <int N>
__device__ void ceilingMove(const CeilingArgs& a, int block, int nblocks) {
  auto src = [&](int p) { return a.src[p]; };
  auto dst = [&](int q) { return a.dst[q]; };
  moveRange<float, ReduceOp::kSum, N, N>(src, a.nsrc, dst, a.ndst, static_cast<uint32_t>(a.count), 0,
                                         static_cast<uint32_t>(block) * dev::nthreads() + dev::tid(),
                                         static_cast<uint32_t>(nblocks) * dev::nthreads());
}

/// Calls f(integral_constant<int, N>) with N == n in 1..kCeilingMaxSources; false for any other n.
template <typename F>
bool visitCeilingSources(int n, F&& f) {
  if (n == 1) {
    f(std::integral_constant<int, 1>{});
    return true;
  }
  return visitDirectRanks(n, f);
}

}  // namespace direct
}  // namespace collie
