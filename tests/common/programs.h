// Program helpers for the algorithm shape tests (unit tests that link the
// internals): every rank's program of a registered algorithm, looked up by
// name, and how many steps of a program do one op. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verify_sweep.h"

namespace collie {
namespace test {

/// The programs of ranks 0..n-1 for one call of `c`'s algorithm `name` (rank
/// blocks `count` apart; all-to-all-v: `count` to every peer). Empty, with a
/// test failure, when `c` has no such algorithm.
/// `ranksPerNode` as in ProgramArgs, for node-aware algorithms.
inline std::vector<Program> buildPrograms(Collective c, const char* name, int n, uint64_t count, int root = 0,
                                          int ranksPerNode = 0) {
  const AlgorithmInfo* algo = findAlgorithm(c, name);
  EXPECT_NE(algo, nullptr) << collectiveName(c) << " " << name;
  if (algo == nullptr) return {};
  return collie::buildPrograms(*algo, n, count, count, root, ranksPerNode);
}

/// The number of steps of `p` that do `op`.
inline size_t countOps(const Program& p, StepOp op) {
  size_t k = 0;
  for (const Step& s : p.steps) k += s.op == op;
  return k;
}

}  // namespace test
}  // namespace collie
