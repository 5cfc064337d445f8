#include "algorithms/registry.h"

#include <cstring>

namespace collie {

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> list = {
      {Collective::kAllReduce, "ring", "ring reduce-scatter then ring allgather; bandwidth-optimal", buildAllReduceRing,
       RoundRule::kRankSlots},
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
  p.sendCounts = args.sendCounts;
  p.sendDispls = args.sendDispls;
  p.recvCounts = args.recvCounts;
  p.recvDispls = args.recvDispls;
  return p;
}

uint64_t roundCount(const AlgorithmInfo& a, int nranks, uint64_t slotElems) {
  switch (a.rounds) {
    case RoundRule::kOneSlot:
      return slotElems;
    case RoundRule::kRankSlots:
      return slotElems * static_cast<uint64_t>(nranks);
    case RoundRule::kNone:
      break;
  }
  return UINT64_MAX;
}

std::string algorithmNames(Collective c) {
  std::string out;
  for (const AlgorithmInfo& a : algorithms()) {
    if (a.collective != c) continue;
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
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
