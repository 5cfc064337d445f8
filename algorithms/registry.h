// The algorithm registry: every algorithm Collie has, by collective, with a
// name (what COLLIE_ALGO and `collie-bench --algo` take), a one-line
// description and the function that builds its Program.
#pragma once

#include <string>
#include <vector>

#include "algorithms/program.h"

namespace collie {

/// What a program is built for. `count` is the collective's count argument
/// (per-rank block for reduce-scatter and allgather). `stride` is the distance
/// between rank blocks in the block-structured buffer (reduce-scatter's input,
/// allgather's output); it equals count unless the caller runs the collective
/// in rounds over parts of each block. 0 means "same as count".
struct ProgramArgs {
  Collective collective = Collective::kAllReduce;
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;
  uint64_t stride = 0;
  int root = 0;
  // Consecutive ranks share a node, this many to a node (0: all on one node).
  // Only node-aware algorithms (AlgorithmInfo::nodeAware) read it.
  int ranksPerNode = 0;
  // All-to-all-v: this rank's counts and displacements per peer, in elements.
  std::vector<uint64_t> sendCounts, sendDispls, recvCounts, recvDispls;

  uint64_t blockStride() const { return stride ? stride : count; }
};

/// How core/collectives.cc cuts a call into rounds, each one Program. A step
/// that sends more slices than the receiver has slots blocks until the
/// receiver consumes; in a ring every rank would block so at once. Rounds keep
/// each such step to what fits, and the verifier proves the rule with one slot
/// (tests/unit/program_test.cc). Exchange-only algorithms need no rounds.
enum class RoundRule : uint8_t {
  kOneSlot,    // count <= one slot's elements (per rank block where the buffer has blocks)
  kRankSlots,  // count <= nranks slots' elements: steps move count/nranks (ring allreduce)
  kNodeSlots,  // count <= node-size slots' elements: the largest steps move count/node size (hier allreduce)
  kNone,       // any count in one program (pairwise exchanges, send/recv)
  kFile,       // a program file's rule (program_file.h, fileRoundCount): every step at most one slice
};

struct ProgramFile;

struct AlgorithmInfo {
  Collective collective;
  const char* name;
  const char* description;
  Program (*build)(const ProgramArgs&);
  RoundRule rounds = RoundRule::kOneSlot;
  bool nodeAware = false;             // reads ProgramArgs::ranksPerNode: the verifier proves it for every node size
  const ProgramFile* file = nullptr;  // an algorithm from a program file (program_file.h): build is null
  /// Its programs hold direct steps (program.h, "Direct steps"): only executors whose ranks map each other's
  /// buffers run them, the others refuse them (executor/executor.h, refuseDirectSteps), and the tuner weighs
  /// them only where the caller says the ranks map each other's buffers (tunedAlgorithm's `direct`).
  bool mapsPeers = false;
  /// Named only (COLLIE_ALGO, `collie-bench --algo`), never weighed by the tuner: a variant whose cost the
  /// model cannot tell from another's (direct_ce moves what direct moves, by the copy engine) until a GPU run
  /// says where it wins, or one the ranks could not agree on by size (all-to-all-v direct: each rank's size is
  /// its own counts').
  bool namedOnly = false;
};

/// `a`'s program for `args`: a.build(args), or the program file's scaled to args' count and stride.
Program buildProgram(const AlgorithmInfo& a, const ProgramArgs& args);

/// The largest count one round of `a` may be given when a slot holds `slotElems`
/// elements (UINT64_MAX when rounds are not needed); `ranksPerNode` as in ProgramArgs.
uint64_t roundCount(const AlgorithmInfo& a, int nranks, uint64_t slotElems, int ranksPerNode = 0);

const std::vector<AlgorithmInfo>& algorithms();

/// The names of `c`'s algorithms, comma-separated, for error messages.
std::string algorithmNames(Collective c);

/// The registered algorithm `name` for `c`; nullptr when there is none.
const AlgorithmInfo* findAlgorithm(Collective c, const char* name);

/// The algorithm used for `c` when nothing overrides the choice: the first registered that needs no mapped peers.
const AlgorithmInfo* defaultAlgorithm(Collective c);

/// An empty program of `args` for `algorithm`: the header fields every builder fills first.
Program emptyProgram(const ProgramArgs& args, const char* algorithm);

Program buildAllReduceRing(const ProgramArgs& args);
Program buildReduceScatterRing(const ProgramArgs& args);
Program buildAllGatherRing(const ProgramArgs& args);
Program buildBroadcastChain(const ProgramArgs& args);
Program buildReduceChain(const ProgramArgs& args);
Program buildGatherLinear(const ProgramArgs& args);
Program buildGatherBinomial(const ProgramArgs& args);
Program buildScatterLinear(const ProgramArgs& args);
Program buildScatterBinomial(const ProgramArgs& args);
/// All-to-all (uniform blocks) and all-to-all-v (ProgramArgs' per-peer counts): one builder for both.
Program buildAllToAllPairwise(const ProgramArgs& args);
Program buildReduceScatterHalving(const ProgramArgs& args);
Program buildAllGatherBruck(const ProgramArgs& args);
Program buildBroadcastBinomial(const ProgramArgs& args);
Program buildReduceBinomial(const ProgramArgs& args);
Program buildAllReduceRhd(const ProgramArgs& args);
Program buildAllReduceTree(const ProgramArgs& args);
Program buildAllReduceOneShot(const ProgramArgs& args);
Program buildAllReduceTwoShot(const ProgramArgs& args);
Program buildAllReduceHier(const ProgramArgs& args);
Program buildAllReduceRd(const ProgramArgs& args);
Program buildBroadcastHier(const ProgramArgs& args);
Program buildReduceHier(const ProgramArgs& args);
// Direct programs (AlgorithmInfo::mapsPeers).
Program buildAllReduceDirectOneShot(const ProgramArgs& args);
Program buildAllReduceDirectTwoShot(const ProgramArgs& args);
Program buildReduceScatterDirect(const ProgramArgs& args);
Program buildAllGatherDirect(const ProgramArgs& args);
Program buildAllToAllDirect(const ProgramArgs& args);
Program buildAllToAllvDirect(const ProgramArgs& args);
Program buildBroadcastDirect(const ProgramArgs& args);
/// direct_ce: the direct program of the same collective under that name (the CUDA executor moves it by
/// cudaMemcpyAsync instead of a kernel; executor/cuda_copy_engine.cc).
Program buildAllGatherDirectCe(const ProgramArgs& args);
Program buildAllToAllDirectCe(const ProgramArgs& args);
Program buildBroadcastDirectCe(const ProgramArgs& args);
Program buildAllToAllvDirectCe(const ProgramArgs& args);

/// `args` for a group of `nranks` ranks among which this one is `rank`, the
/// group's root `root`, on `count` elements: one phase of a composed
/// algorithm (e.g. one rank per node), built by a flat algorithm.
ProgramArgs groupArgs(const ProgramArgs& args, int nranks, int rank, int root, uint64_t count);

/// The node size a node-aware algorithm uses: ranksPerNode when it divides
/// nranks, else nranks (one node).
int nodeSize(int nranks, int ranksPerNode);

/// A gather run backwards is a scatter: the steps reversed, each send a receive
/// from the same peer and back, input and output swapped (scatter_linear.cc).
/// `gather` holds only kSend, kRecv and kCopy steps.
Program scatterFromGather(const Program& gather);

}  // namespace collie
