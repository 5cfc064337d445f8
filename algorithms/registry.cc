#include "algorithms/registry.h"

#include <cstring>

namespace collie {

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> list = {
      {Collective::kAllReduce, "ring", "ring reduce-scatter then ring allgather; bandwidth-optimal",
       buildAllReduceRing},
      {Collective::kReduceScatter, "ring", "ring reduce-scatter: n-1 steps, each rank sends (n-1)/n of its input",
       buildReduceScatterRing},
      {Collective::kAllGather, "ring", "ring allgather: n-1 steps, each rank forwards every other rank's block",
       buildAllGatherRing},
      {Collective::kBroadcast, "chain", "pipelined chain from the root through every rank in ring order",
       buildBroadcastChain},
      {Collective::kReduce, "chain", "pipelined chain through every rank in ring order, ending at the root",
       buildReduceChain},
  };
  return list;
}

Program emptyProgram(const ProgramArgs& args, const char* algorithm) {
  Program p;
  p.collective = args.collective;
  p.algorithm = algorithm;
  p.nranks = args.nranks;
  p.rank = args.rank;
  p.count = args.count;
  p.stride = args.blockStride();
  p.root = args.root;
  return p;
}

const AlgorithmInfo* findAlgorithm(Collective c, const char* name) {
  for (const AlgorithmInfo& a : algorithms())
    if (a.collective == c && strcmp(a.name, name) == 0) return &a;
  return nullptr;
}

const AlgorithmInfo* defaultAlgorithm(Collective c) {
  for (const AlgorithmInfo& a : algorithms())
    if (a.collective == c) return &a;
  return nullptr;
}

}  // namespace collie
