#include "algorithms/registry.h"

#include <cstring>

namespace collie {

const std::vector<AlgorithmInfo>& algorithms() {
  static const std::vector<AlgorithmInfo> list = {
      {Collective::kAllReduce, "ring", "ring reduce-scatter then ring allgather; bandwidth-optimal",
       buildAllReduceRing},
  };
  return list;
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
