// The verifier's sweep: one algorithm proved over many shapes of a call, as
// tests/unit/verifier_test.cc and `collie-sim verify` run it. For n = 1..maxRanks
// ranks: each count of the list; roots 0, n/2 and n-1 for the rooted
// collectives (each distinct root once); rank blocks `count` and `count + 3`
// apart (as when a call runs in rounds over parts of each block); all-to-all-v
// with random splits, zeros included; for node-aware algorithms every node
// size that divides n (ranksPerNode); out of place and, where the collective
// has an in-place form, in place; with unbounded slots and with two slots of
// the tightest slice the algorithm's round rule allows (two, the fewest
// COLLIE_SLOTS accepts: with one, a ring that forwards deadlocks, each rank
// holding its successor's only slot while it waits for room to forward).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "base/status.h"

namespace collie {

struct SweepOptions {
  int maxRanks = 64;  // 1..64, the verifier's limit
  /// Counts tried at each rank count n: decimal numbers, or "n", "n-1", "n+1"
  /// (n-1 is 2 when n is 1).
  std::vector<std::string> counts = {"0", "1", "n-1", "n+1", "13"};
  uint64_t seed = 1;  // all-to-all-v's random splits
};

/// Proves `algo` for every shape of the sweep. `*proved` gets the number of
/// (n, root, count, stride, in-place, slots) combinations proved, up to the
/// first failure. Returns that failure, naming the algorithm, placement, slots,
/// n, root, count, stride and seed, then the verifier's message; or
/// collieInvalidArgument for maxRanks outside 1..64 or a count that is neither
/// a number nor n, n-1, n+1.
Status verifyAlgorithm(const AlgorithmInfo& algo, const SweepOptions& options, long* proved);

/// The programs of every rank 0..n-1 for one call of `algo`: rank blocks
/// `stride` apart (0: `count`), `root` for the rooted collectives; all-to-all-v
/// sends `count` elements to every peer, blocks packed in peer order.
/// `ranksPerNode` as in ProgramArgs (node-aware algorithms read it).
std::vector<Program> buildPrograms(const AlgorithmInfo& algo, int n, uint64_t count, uint64_t stride, int root,
                                   int ranksPerNode = 0);

/// Replaces the all-to-all-v counts and displacements of args[0..n-1] (one per
/// rank) with a random split: up to `maxCount` elements from each rank to each
/// rank, about a third of them zero, each rank's blocks packed in a shuffled
/// order with gaps.
void randomSplits(int n, uint64_t maxCount, std::mt19937_64& rng, std::vector<ProgramArgs>* args);

/// The largest slice with which `count` is one round of `algo` on `n` ranks
/// (see RoundRule); 1 for algorithms that need no rounds.
uint64_t tightestSlice(const AlgorithmInfo& algo, int n, uint64_t count, int ranksPerNode = 0);

}  // namespace collie
