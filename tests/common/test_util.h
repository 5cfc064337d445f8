// Test helpers shared by the unit, multi-process and GPU tests: seeded inputs
// chosen so that every reduction is exact, an independent reference (computed
// in double / wrapping 64-bit integers, not with the library's operators), and
// poisoning of outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collie.h"

namespace collie {
namespace test {

/// COLLIE_TEST_SEED when set, else a random seed; printed once per process.
uint64_t testSeed();

/// Fills `count` elements of `type` with rank `rank`'s input for `op`, such that
/// the reduction over up to 8 ranks is exactly representable in the type.
void fillInput(collieDataType_t type, collieRedOp_t op, int rank, uint64_t seed, void* buf, size_t count);

/// expected[i] = op over ranks of inputs[r][i] (avg divides the sum by the rank count, in the type).
void referenceAllReduce(collieDataType_t type, collieRedOp_t op, const std::vector<const void*>& inputs, size_t count,
                        void* expected);

/// The collectives the references below cover.
enum class Coll { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kGather, kScatter };
const char* collName(Coll c);
bool collHasOp(Coll c);
/// All-to-all has no in-place form.
bool collHasInPlace(Coll c);
/// The output exists on the root only (reduce, gather).
bool collRootOutputOnly(Coll c);
/// Elements of the input and output of one rank, for `count` as passed to the API.
size_t collInputCount(Coll c, int nranks, size_t count);
size_t collOutputCount(Coll c, int nranks, size_t count);

/// What rank `rank` must hold in its output (collOutputCount elements) after `c`
/// over `inputs` (one per rank, collInputCount elements each). For reduce and
/// gather, only the root's is meaningful; for broadcast and scatter only the root's input is read.
void referenceCollective(Coll c, collieDataType_t type, collieRedOp_t op, const std::vector<const void*>& inputs,
                         size_t count, int root, int rank, void* expected);

/// Calls collective `c` through the public API with the arguments it takes.
collieResult_t callCollective(Coll c, const void* send, void* recv, size_t count, collieDataType_t type,
                              collieRedOp_t op, int root, collieComm_t comm, collieStream_t stream = nullptr);

/// Fills bytes with a pattern no correct result has in all elements.
void poison(void* buf, size_t bytes);

/// Number of elements whose values differ; the first difference is described in *first.
size_t countWrong(collieDataType_t type, const void* got, const void* expected, size_t count, std::string* first);

/// Element i of buf as a double (integers beyond 2^53 lose precision; used for messages only).
double elementAsDouble(collieDataType_t type, const void* buf, size_t i);

/// All 12 types and all 5 built-in operators, for loops in tests.
const std::vector<collieDataType_t>& allTypes();
const std::vector<collieRedOp_t>& allOps();

/// The types the exhaustive sweeps loop over: all 12, or with COLLIE_TEST_TYPES=sizes one per element size
/// (int8, bfloat16, float32, uint64). The sweeps' reruns under another path (proxy, direct reads, staged,
/// emulated LL) and the sanitizer passes use the latter: what they test is how bytes move, which depends on the
/// element size and not on the arithmetic, and the plain runs keep every type. Any other value is refused.
const std::vector<collieDataType_t>& sweepTypes();
/// One type per element size: int8, bfloat16, float32, uint64 (what COLLIE_TEST_TYPES=sizes selects).
const std::vector<collieDataType_t>& sizeTypes();
/// The types a sweep's case on `nranks` ranks loops over: sweepTypes() on 1-6 ranks with the default slots,
/// sizeTypes() on 7 and 8 ranks and with tiny slots. What those add is how slices, rounds and roots land, which
/// depends on the element size; every type's arithmetic, its tails within a slice and across rounds included,
/// runs on 1-6 ranks. (Every type there would take a third of the suite's sweep time.)
const std::vector<collieDataType_t>& sweepTypes(int nranks, bool tinySlots);
/// sweepTypesLabel() for the types sweepTypes(nranks, tinySlots) gives.
std::string sweepTypesLabel(int nranks, bool tinySlots);
/// "12 types" or "4 types (COLLIE_TEST_TYPES=sizes)", for the sweeps' summary lines.
std::string sweepTypesLabel();

/// Whether a sweep's case with this type, operator and key (any number that varies with the other coordinates:
/// count, placement, collective) runs. float32 and int32 take every operator; every other type one operator per
/// key, rotated, so that it still meets all five over a sweep's counts and placements. The full product repeats
/// the same reduction code per type at several times the cost.
bool sweepTakesOp(collieDataType_t type, collieRedOp_t op, size_t key);

/// A file holding `text` in /tmp, its name ending in `suffix` (".json", ".xml"), removed when this goes.
struct TempFile {
  TempFile(const std::string& text, const char* suffix);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  std::string path;
};

}  // namespace test
}  // namespace collie
