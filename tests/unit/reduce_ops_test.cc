// The shared reduction operators (executor/reduce_ops.h) against values worked
// out by hand: wrap-around of integers, rounding of the narrow float types at
// every step, avg's truncating division.
#include "executor/reduce_ops.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using collie::applyOp;
using collie::divideBy;
using collie::ReduceOp;

TEST(ReduceOps, IntegersWrapWithoutUndefinedBehaviour) {
  EXPECT_EQ((applyOp<ReduceOp::kSum, int8_t>(int8_t{100}, int8_t{100})), int8_t{-56});
  EXPECT_EQ((applyOp<ReduceOp::kProd, int8_t>(int8_t{16}, int8_t{16})), int8_t{0});
  EXPECT_EQ((applyOp<ReduceOp::kSum, int64_t>(INT64_MAX, int64_t{1})), INT64_MIN);
  EXPECT_EQ((applyOp<ReduceOp::kProd, int64_t>(INT64_MAX, int64_t{2})), int64_t{-2});
  EXPECT_EQ((applyOp<ReduceOp::kSum, uint8_t>(uint8_t{200}, uint8_t{100})), uint8_t{44});
  EXPECT_EQ((applyOp<ReduceOp::kMax, int32_t>(-5, 3)), 3);
  EXPECT_EQ((applyOp<ReduceOp::kMin, uint32_t>(5u, 3u)), 3u);
  EXPECT_EQ((applyOp<ReduceOp::kMin, int64_t>(-5, 3)), -5);
}

TEST(ReduceOps, AvgDivisionTruncatesIntegers) {
  EXPECT_EQ(divideBy<int32_t>(-7, 2), -3);
  EXPECT_EQ(divideBy<uint8_t>(uint8_t{7}, 2), uint8_t{3});
  EXPECT_FLOAT_EQ(divideBy<float>(7.0f, 2), 3.5f);
  EXPECT_DOUBLE_EQ(divideBy<double>(1.0, 3), 1.0 / 3.0);
}

TEST(ReduceOps, HalfRoundsAtEveryStep) {
  // 2048 + 1 is not representable in fp16 (11-bit significand): it rounds to 2048 (ties to even).
  const __half a = __float2half(2048.0f), b = __float2half(1.0f);
  EXPECT_EQ(__half2float(applyOp<ReduceOp::kSum>(a, b)), 2048.0f);
  EXPECT_EQ(__half2float(applyOp<ReduceOp::kSum>(__float2half(1.5f), __float2half(2.25f))), 3.75f);
  EXPECT_EQ(__half2float(applyOp<ReduceOp::kMax>(__float2half(-1.0f), __float2half(-2.0f))), -1.0f);
}

TEST(ReduceOps, Bfloat16AndFp8) {
  // bf16 has an 8-bit significand: 256 + 1 rounds back to 256.
  EXPECT_EQ(__bfloat162float(applyOp<ReduceOp::kSum>(__float2bfloat16(256.0f), __float2bfloat16(1.0f))), 256.0f);
  EXPECT_EQ(float(applyOp<ReduceOp::kSum>(__nv_fp8_e4m3(8.0f), __nv_fp8_e4m3(8.0f))), 16.0f);
  // e4m3: between 16 and 32 the step is 2, so 16 + 1 = 17 rounds to 16 (ties to even).
  EXPECT_EQ(float(applyOp<ReduceOp::kSum>(__nv_fp8_e4m3(16.0f), __nv_fp8_e4m3(1.0f))), 16.0f);
  EXPECT_EQ(float(applyOp<ReduceOp::kProd>(__nv_fp8_e5m2(4.0f), __nv_fp8_e5m2(-2.0f))), -8.0f);
  EXPECT_EQ(float(applyOp<ReduceOp::kMin>(__nv_fp8_e5m2(4.0f), __nv_fp8_e5m2(-2.0f))), -2.0f);
  EXPECT_EQ(float(divideBy(__nv_fp8_e4m3(6.0f), 4)), 1.5f);
}

TEST(ReduceOps, TypeTableMatchesNccl) {
  EXPECT_EQ(collie::typeSize(collieInt8), 1u);
  EXPECT_EQ(collie::typeSize(collieFloat16), 2u);
  EXPECT_EQ(collie::typeSize(collieBfloat16), 2u);
  EXPECT_EQ(collie::typeSize(collieFloat8e4m3), 1u);
  EXPECT_EQ(collie::typeSize(collieUint64), 8u);
  EXPECT_EQ(collie::typeSize(static_cast<collieDataType_t>(12)), 0u);
  EXPECT_STREQ(collie::typeName(collieFloat32), "float");
  EXPECT_STREQ(collie::opName(collieAvg), "avg");
  collie::ReduceOp op;
  EXPECT_TRUE(collie::toReduceOp(collieAvg, &op));
  EXPECT_EQ(op, ReduceOp::kSum);
  EXPECT_FALSE(collie::toReduceOp(static_cast<collieRedOp_t>(7), &op));
}

}  // namespace
