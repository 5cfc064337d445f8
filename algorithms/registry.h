// The algorithm registry: every algorithm Collie has, by collective, with a
// name (what COLLIE_ALGO and `collie-bench --algo` take), a one-line
// description and the function that builds its Program.
#pragma once

#include <vector>

#include "algorithms/program.h"

namespace collie {

struct ProgramArgs {
  Collective collective = Collective::kAllReduce;
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;
  int root = 0;
};

struct AlgorithmInfo {
  Collective collective;
  const char* name;
  const char* description;
  Program (*build)(const ProgramArgs&);
};

const std::vector<AlgorithmInfo>& algorithms();

/// The registered algorithm `name` for `c`; nullptr when there is none.
const AlgorithmInfo* findAlgorithm(Collective c, const char* name);

/// The algorithm used for `c` when nothing overrides the choice (the tuner lands later).
const AlgorithmInfo* defaultAlgorithm(Collective c);

Program buildAllReduceRing(const ProgramArgs& args);

}  // namespace collie
