#include "algorithms/registry.h"

#include <cstring>

#include "algorithms/program_file.h"

namespace collie {

namespace {

// An algorithm of direct steps: one program per call at any count (no slots to fill), run only by executors
// whose ranks map each other's buffers.
AlgorithmInfo direct(Collective c, const char* name, const char* description, Program (*build)(const ProgramArgs&)) {
  AlgorithmInfo a{c, name, description, build, RoundRule::kNone};
  a.mapsPeers = true;
  return a;
}

// All-to-all-v's direct form, named only: a rank's choice by size would weigh its own counts, which its peers do
// not share, so ranks could choose differently.
AlgorithmInfo directNamedOnly(Collective c, const char* name, const char* description,
                              Program (*build)(const ProgramArgs&)) {
  AlgorithmInfo a = direct(c, name, description, build);
  a.namedOnly = true;
  return a;
}

// A direct algorithm's copy-engine form (AlgorithmInfo::namedOnly).
AlgorithmInfo copyEngine(Collective c, const char* description, Program (*build)(const ProgramArgs&)) {
  AlgorithmInfo a = direct(c, "direct_ce", description, build);
  a.namedOnly = true;
  return a;
}

Program renamedCe(Program p) {
  p.algorithm = "direct_ce";
  return p;
}

}  // namespace

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
      {Collective::kGather, "linear", "every rank sends its block straight to the root; n-1 receives at the root",
       buildGatherLinear, RoundRule::kNone},
      {Collective::kGather, "binomial", "binomial tree toward the root; ceil(log2 n) receive rounds at the root",
       buildGatherBinomial},
      {Collective::kScatter, "linear", "the root sends every rank its block directly; n-1 sends at the root",
       buildScatterLinear, RoundRule::kNone},
      {Collective::kScatter, "binomial", "binomial tree from the root, largest subtree first; ceil(log2 n) rounds",
       buildScatterBinomial},
      {Collective::kAllToAll, "pairwise", "n-1 pairwise exchanges: step k sends to rank+k, receives from rank-k",
       buildAllToAllPairwise, RoundRule::kNone},
      {Collective::kAllToAllv, "pairwise", "n-1 pairwise exchanges of per-peer counts; empty exchanges skipped",
       buildAllToAllPairwise, RoundRule::kNone},
      {Collective::kReduceScatter, "halving",
       "recursive halving: log2 n pairwise exchange phases, non-powers of two folded in pairs",
       buildReduceScatterHalving},
      {Collective::kAllGather, "bruck", "Bruck recursive doubling for any n: ceil(log2 n) phases of exchanges",
       buildAllGatherBruck, RoundRule::kNone},
      {Collective::kBroadcast, "binomial", "binomial tree from the root, largest subtree first; ceil(log2 n) rounds",
       buildBroadcastBinomial},
      {Collective::kReduce, "binomial", "binomial tree toward the root, smallest subtree first; ceil(log2 n) rounds",
       buildReduceBinomial},
      {Collective::kAllReduce, "rhd", "recursive halving-doubling (Rabenseifner): 2 log2 n exchanges, ring's bytes",
       buildAllReduceRhd, RoundRule::kNone},
      {Collective::kAllReduce, "tree", "double binary tree (NCCL): each tree reduces and broadcasts half; log2 n depth",
       buildAllReduceTree, RoundRule::kOneSlot},
      {Collective::kAllReduce, "oneshot", "small messages: every rank sends all to all, reduces n inputs in rank order",
       buildAllReduceOneShot, RoundRule::kOneSlot},
      {Collective::kAllReduce, "twoshot",
       "direct reduce-scatter, n inputs reduced in one pass, then direct allgather; two hops", buildAllReduceTwoShot,
       RoundRule::kRankSlots},
      {Collective::kAllReduce, "rd", "recursive doubling: log2 n exchanges of the whole buffer; small messages",
       buildAllReduceRd, RoundRule::kOneSlot},
      {Collective::kAllReduce, "hier", "hierarchical: reduce-scatter in the node, allreduce across nodes, allgather",
       buildAllReduceHier, RoundRule::kNodeSlots, true},
      {Collective::kBroadcast, "hier",
       "hierarchical: scatter in the root's node, a chain per piece across nodes, allgather", buildBroadcastHier,
       RoundRule::kNodeSlots, true},
      {Collective::kReduce, "hier", "hierarchical: reduce-scatter in each node, a chain per piece across nodes, gather",
       buildReduceHier, RoundRule::kNodeSlots, true},
      direct(Collective::kAllReduce, "direct_oneshot",
             "mapped peers: every rank reduces all n inputs from their buffers in rank order; 2 barriers",
             buildAllReduceDirectOneShot),
      direct(Collective::kAllReduce, "direct_twoshot",
             "mapped peers: rank r reduces chunk r of all inputs and stores it into every output; 2 barriers",
             buildAllReduceDirectTwoShot),
      direct(Collective::kReduceScatter, "direct",
             "mapped peers: rank r reduces block r of all n inputs from their buffers; 2 barriers",
             buildReduceScatterDirect),
      direct(Collective::kAllGather, "direct",
             "mapped peers: rank r stores its input into block r of every output; 2 barriers", buildAllGatherDirect),
      direct(Collective::kAllToAll, "direct",
             "mapped peers: rank r stores block q of its input into block r of rank q's output; 2 barriers",
             buildAllToAllDirect),
      direct(Collective::kBroadcast, "direct",
             "mapped peers: every rank reads the root's input from its buffer; 2 barriers", buildBroadcastDirect),
      directNamedOnly(Collective::kAllToAllv, "direct",
                      "mapped peers: rank r stores its block for q where q receives it (q announces where); "
                      "2 barriers",
                      buildAllToAllvDirect),
      copyEngine(Collective::kAllGather,
                 "direct's moves by the copy engine: a cudaMemcpyAsync per peer, ordered by events; one process",
                 buildAllGatherDirectCe),
      copyEngine(Collective::kAllToAll,
                 "direct's moves by the copy engine: a cudaMemcpyAsync per peer, ordered by events; one process",
                 buildAllToAllDirectCe),
      copyEngine(Collective::kBroadcast,
                 "direct's moves by the copy engine: a cudaMemcpyAsync per peer, ordered by events; one process",
                 buildBroadcastDirectCe),
      copyEngine(Collective::kAllToAllv,
                 "direct's moves by the copy engine: a cudaMemcpyAsync per peer, ordered by events; one process",
                 buildAllToAllvDirectCe),
  };
  return list;
}

Program buildAllGatherDirectCe(const ProgramArgs& args) { return renamedCe(buildAllGatherDirect(args)); }
Program buildAllToAllDirectCe(const ProgramArgs& args) { return renamedCe(buildAllToAllDirect(args)); }
Program buildBroadcastDirectCe(const ProgramArgs& args) { return renamedCe(buildBroadcastDirect(args)); }
Program buildAllToAllvDirectCe(const ProgramArgs& args) { return renamedCe(buildAllToAllvDirect(args)); }

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

ProgramArgs groupArgs(const ProgramArgs& args, int nranks, int rank, int root, uint64_t count) {
  ProgramArgs group = args;
  group.nranks = nranks;
  group.rank = rank;
  group.root = root;
  group.count = count;
  group.stride = 0;
  group.ranksPerNode = 0;
  return group;
}

int nodeSize(int nranks, int ranksPerNode) {
  return ranksPerNode > 0 && ranksPerNode <= nranks && nranks % ranksPerNode == 0 ? ranksPerNode : nranks;
}

uint64_t roundCount(const AlgorithmInfo& a, int nranks, uint64_t slotElems, int ranksPerNode) {
  switch (a.rounds) {
    case RoundRule::kOneSlot:
      return slotElems;
    case RoundRule::kRankSlots:
      return slotElems * static_cast<uint64_t>(nranks);
    case RoundRule::kNodeSlots:
      return slotElems * static_cast<uint64_t>(nodeSize(nranks, ranksPerNode));
    case RoundRule::kFile:
      return a.file != nullptr ? fileRoundCount(*a.file, slotElems) : UINT64_MAX;
    case RoundRule::kNone:
      break;
  }
  return UINT64_MAX;
}

Program buildProgram(const AlgorithmInfo& a, const ProgramArgs& args) {
  return a.file != nullptr ? fileProgram(*a.file, args) : a.build(args);
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
    if (a.collective == c && !a.mapsPeers) return &a;
  return nullptr;
}

}  // namespace collie
