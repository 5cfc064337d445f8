// Pre-multiplied sums on the host backend: result = sum over ranks of
// (rank's scalar * rank's input), for allreduce, reduce and reduce-scatter,
// every type, 1..4 ranks, in place and out of place, scalars held host-
// immediate or "device" (read when the call runs). The operator may be
// destroyed right after its call is queued in a group. Inputs are random
// (seed printed) and chosen so every product and sum is exact in the type;
// the reference is computed in double / wrapping 64-bit integers.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "collie.h"
#include "common/premulsum_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::premul::inputOf;
using collie::test::premul::Kind;
using collie::test::premul::kindName;
using collie::test::premul::referenceAt;
using collie::test::premul::scalarOf;

// Runs one pre-multiplied-sum case with one thread issuing every rank's call
// inside one group, destroying each operator right after queueing its call.
template <typename T>
std::string runCase(const Comms& comms, collieDataType_t type, Kind kind, size_t count, bool inPlace,
                    collieScalarResidence_t residence, uint64_t seed) {
  const int n = comms.size();
  const size_t inCount = kind == Kind::kReduceScatter ? count * static_cast<size_t>(n) : count;
  const int root = n - 1;
  std::vector<std::vector<T>> inputs(static_cast<size_t>(n)), bufs(static_cast<size_t>(n)),
      outs(static_cast<size_t>(n));
  std::vector<T> scalars(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    inputs[r] = inputOf<T>(type, r, seed, inCount);
    bufs[r] = inputs[r];
    outs[r].assign(count, T());
    collie::test::poison(outs[r].data(), count * sizeof(T));
    scalars[r] = scalarOf<T>(r);
  }
  std::vector<collieRedOp_t> ops(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (collieRedOpCreatePreMulSum(&ops[r], &scalars[r], type, residence, comms[r]) != collieSuccess)
      return std::string("create: ") + collieGetLastError(comms[r]);
    if (ops[r] < collieNumOps) return "create gave a built-in operator value";
  }
  if (collieGroupStart() != collieSuccess) return "group start";
  for (int r = 0; r < n; ++r) {
    T* send = bufs[r].data();
    T* recv = inPlace ? (kind == Kind::kReduceScatter ? send + static_cast<size_t>(r) * count : send) : outs[r].data();
    collieResult_t rc = collieSuccess;
    if (kind == Kind::kAllReduce) rc = collieAllReduce(send, recv, count, type, ops[r], comms[r], nullptr);
    if (kind == Kind::kReduce) rc = collieReduce(send, recv, count, type, ops[r], root, comms[r], nullptr);
    if (kind == Kind::kReduceScatter) rc = collieReduceScatter(send, recv, count, type, ops[r], comms[r], nullptr);
    if (rc != collieSuccess) return std::string("enqueue: ") + collieGetLastError(comms[r]);
    // Allowed as soon as the call naming it has returned, even though it runs at GroupEnd.
    if (collieRedOpDestroy(ops[r], comms[r]) != collieSuccess)
      return std::string("destroy: ") + collieGetLastError(comms[r]);
  }
  if (collieGroupEnd() != collieSuccess) return std::string("group end: ") + collieGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    if (kind == Kind::kReduce && r != root) continue;
    const T* got =
        inPlace ? bufs[r].data() + (kind == Kind::kReduceScatter ? static_cast<size_t>(r) * count : 0) : outs[r].data();
    const size_t base = kind == Kind::kReduceScatter ? static_cast<size_t>(r) * count : 0;
    std::vector<T> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = referenceAt<T>(type, inputs, base + i);
    std::string first;
    const size_t wrong = collie::test::countWrong(type, got, want.data(), count, &first);
    if (wrong != 0) return "rank " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong, first " + first;
    // count 0 leaves both vectors without storage: memcmp must not see their null pointers.
    if (!inPlace && inCount > 0 && memcmp(bufs[r].data(), inputs[r].data(), inCount * sizeof(T)) != 0)
      return "rank " + std::to_string(r) + ": sendbuff changed";
  }
  return "";
}

class PreMulSumTest : public ::testing::TestWithParam<int> {};

TEST_P(PreMulSumTest, EveryTypeCollectiveAndPlacement) {
  const int n = GetParam();
  const uint64_t seed = collie::test::testSeed();
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  for (collieDataType_t type : collie::test::allTypes()) {
    for (Kind kind : {Kind::kAllReduce, Kind::kReduce, Kind::kReduceScatter}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{1013}}) {
        for (bool inPlace : {false, true}) {
          const collieScalarResidence_t residence =
              (count + (inPlace ? 1 : 0)) % 2 == 0 ? collieScalarHostImmediate : collieScalarDevice;
          std::string err;
          collie::visitType(type, [&](auto tag) {
            using T = typename decltype(tag)::type;
            err = runCase<T>(comms, type, kind, count, inPlace, residence, seed);
          });
          ASSERT_EQ(err, "") << kindName(kind) << " " << collie::typeName(type) << " n " << n << " count " << count
                             << (inPlace ? " in-place" : "") << " (seed " << seed << ")";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, PreMulSumTest, ::testing::Values(1, 3, 4));

// A device-resident scalar is read when the call runs (at GroupEnd), a
// host-immediate one when the operator is made.
TEST(PreMulSum, ScalarResidenceDecidesWhenItIsRead) {
  Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  for (collieScalarResidence_t residence : {collieScalarDevice, collieScalarHostImmediate}) {
    float scalar[2] = {1, 1};
    collieRedOp_t ops[2];
    for (int r = 0; r < 2; ++r)
      ASSERT_EQ(collieRedOpCreatePreMulSum(&ops[r], &scalar[r], collieFloat32, residence, comms[r]), collieSuccess);
    float buf[2][3] = {{1, 2, 3}, {10, 20, 30}};
    ASSERT_EQ(collieGroupStart(), collieSuccess);
    for (int r = 0; r < 2; ++r)
      ASSERT_EQ(collieAllReduce(buf[r], buf[r], 3, collieFloat32, ops[r], comms[r], nullptr), collieSuccess);
    scalar[0] = 3;  // after queueing, before the call runs
    scalar[1] = 0.5f;
    ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
    const float k0 = residence == collieScalarDevice ? 3.0f : 1.0f, k1 = residence == collieScalarDevice ? 0.5f : 1.0f;
    for (int r = 0; r < 2; ++r)
      for (int i = 0; i < 3; ++i) EXPECT_EQ(buf[r][i], k0 * (i + 1) + k1 * 10 * (i + 1)) << r << " " << i;
    for (int r = 0; r < 2; ++r) EXPECT_EQ(collieRedOpDestroy(ops[r], comms[r]), collieSuccess);
  }
}

TEST(PreMulSum, OperatorsAreCheckedPerCommunicatorAndType) {
  Comms a(1), b(1);
  ASSERT_EQ(a.result, collieSuccess);
  ASSERT_EQ(b.result, collieSuccess);
  double two = 2;
  collieRedOp_t op;
  ASSERT_EQ(collieRedOpCreatePreMulSum(&op, &two, collieFloat64, collieScalarHostImmediate, a[0]), collieSuccess);
  EXPECT_EQ(op, collieNumOps);
  double x = 21;
  // Made for float64: another type is refused, naming both.
  float f = 1;
  EXPECT_EQ(collieAllReduce(&f, &f, 1, collieFloat32, op, a[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(a[0])).find("made for double"), std::string::npos)
      << collieGetLastError(a[0]);
  // Another communicator has no such operator.
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat64, op, b[0], nullptr), collieInvalidArgument);
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat64, op, a[0], nullptr), collieSuccess);
  EXPECT_EQ(x, 42.0);
  EXPECT_EQ(collieRedOpDestroy(op, a[0]), collieSuccess);
  EXPECT_EQ(collieRedOpDestroy(op, a[0]), collieInvalidArgument);  // twice
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat64, op, a[0], nullptr), collieInvalidArgument);
  EXPECT_EQ(collieRedOpDestroy(collieSum, a[0]), collieInvalidArgument);
  // A freed slot is reused, so create/destroy per step does not grow the table.
  collieRedOp_t again;
  ASSERT_EQ(collieRedOpCreatePreMulSum(&again, &two, collieFloat64, collieScalarDevice, a[0]), collieSuccess);
  EXPECT_EQ(again, op);
  EXPECT_EQ(collieRedOpCreatePreMulSum(&again, &two, collieNumTypes, collieScalarDevice, a[0]), collieInvalidArgument);
  EXPECT_EQ(collieRedOpCreatePreMulSum(&again, &two, collieFloat64, static_cast<collieScalarResidence_t>(5), a[0]),
            collieInvalidArgument);
  EXPECT_EQ(collieRedOpCreatePreMulSum(nullptr, &two, collieFloat64, collieScalarDevice, a[0]), collieInvalidArgument);
}

TEST(PreMulSum, ScaleByRoundsOnceInTheType) {
  // 0.1 * 3 in bf16: the product of the two bf16 values, rounded once to bf16.
  const __nv_bfloat16 x = __float2bfloat16_rn(0.1f), s = __float2bfloat16_rn(3.0f);
  const float want = __bfloat162float(__float2bfloat16_rn(__bfloat162float(x) * 3.0f));
  EXPECT_EQ(__bfloat162float(collie::scaleBy(x, s)), want);
  EXPECT_EQ(collie::scaleBy<int8_t>(100, 3), static_cast<int8_t>(44));  // 300 mod 256, wrapped
  EXPECT_EQ(collie::scaleBy<uint32_t>(0x80000000u, 2u), 0u);
  EXPECT_EQ(collie::scaleBy(1.5, 4.0), 6.0);
}

}  // namespace
