// Host-only interface to the ceiling kernels (kernels/ceiling_kernels.cu; body in kernels/ceiling_block.cuh): what a
// GPU's SMs can move with no synchronisation at all, for tests/gpu/ceilings.cc to time beside the copy engine. The
// collectives' figures are read against them (docs/PERFORMANCE.md). Not used by the library.
//
//   copy             one source into one destination (nsrc = ndst = 1)
//   ideal allreduce  n sources read once, reduced (float sum, in rank order), stored into n destinations: the byte
//                    floor of an allreduce of n ranks (2 n S) moved by one grid, with no barrier, flag or peer
//
// The move is the direct kernels' own (direct::moveRange, 16-byte vectors, at least 8 loads in flight per thread),
// so a gap between a direct kernel and its ceiling is what its synchronisation costs.
#pragma once

#include <cstdint>

namespace collie {

constexpr int kCeilingMaxSources = 8;

/// One launch's arguments: float elements, `count` of them at each source and destination.
struct CeilingArgs {
  int nsrc = 1;  // 1..kCeilingMaxSources; the kernel's bound is nsrc (ndst at most the same)
  int ndst = 1;
  uint64_t count = 0;  // at most kDirectMaxBytes / 4
  const float* src[kCeilingMaxSources] = {};
  float* dst[kCeilingMaxSources] = {};
};

/// Why these arguments cannot run (a sentence), or null.
const char* ceilingRefusal(const CeilingArgs& a, int blocks, int threads);

/// Blocks of `threads` threads of the kernel for `nsrc` sources that fit on the current device at once, divided
/// among `sharers` launches running together. Returns a cudaError_t as an int.
int ceilingBlocks(int nsrc, int threads, int sharers, int* blocks);

/// Launches the move on `stream` (a cudaStream_t). ceilingRefusal's cases are cudaErrorInvalidValue. Returns a
/// cudaError_t as an int.
int launchCeiling(const CeilingArgs& args, int blocks, int threads, void* stream);

namespace emu {
class Launcher;
/// The CPU emulation of one launch (kernels/emulator.h): returns when every block has finished; 0, or
/// collieInvalidArgument where ceilingRefusal refuses.
int launchCeiling(const CeilingArgs& args, Launcher* launcher);
}  // namespace emu

}  // namespace collie
