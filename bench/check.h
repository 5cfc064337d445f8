// The check run behind #wrong: every rank's input is a seeded function of
// (rank, element), chosen so that every reduction over any number of ranks is
// exact in every type, and every received element is compared with the value
// it must hold, computed here from the inputs (not with the library's
// operators).
#pragma once

#include <cstddef>
#include <cstdint>

#include "bench/cases.h"

namespace collie {
namespace bench {

/// Rank r's input element j as a double: small integers, so that sums (at most
/// 8 ranks add a one to any element), products (one rank holds 2, the others
/// 1), minima and maxima are exact even in fp8.
double inputValue(const Case& c, uint64_t seed, int r, size_t j);

/// Fills the out-of-place send buffer (c.sendElems elements) of rank c.rank.
void fillInput(const Case& c, uint64_t seed, void* send);

/// Prepares the in-place buffer (c.bufElems elements): poison, then this
/// rank's input at c.sendOff where the collective reads it.
void fillInPlace(const Case& c, uint64_t seed, void* buf);

/// Bytes no correct result holds in any element (0x7b in every byte).
void poison(void* buf, size_t bytes);

/// Elements of this rank's output (c.recvElems elements at out) that differ
/// from what they must hold; 0 where the rank has no output (reduce and gather
/// off the root).
size_t countWrong(const Case& c, uint64_t seed, const void* out);

}  // namespace bench
}  // namespace collie
