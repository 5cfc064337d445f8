// The device side of the shared reduction header: the kernel's results must
// equal the host operators' bit for bit, for every type and op. Skips, saying
// why, when no GPU is usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/test_util.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_skip.h"
#include "kernels/reduce_check.h"

namespace {

TEST(ReduceOpsGpu, DeviceMatchesHostForEveryTypeAndOp) {
  SKIP_WITHOUT_GPU();
  const size_t n = 4099;
  const uint64_t seed = collie::test::testSeed();
  for (collieDataType_t type : collie::test::allTypes()) {
    for (collieRedOp_t op : collie::test::allOps()) {
      const size_t bytes = n * collie::typeSize(type);
      std::vector<char> a(bytes), b(bytes), want(bytes), got(bytes);
      collie::test::fillInput(type, op, 0, seed, a.data(), n);
      collie::test::fillInput(type, op, 1, seed, b.data(), n);
      const int divisor = op == collieAvg ? 2 : 0;
      collie::ReduceOp rop;
      ASSERT_TRUE(collie::toReduceOp(op, &rop));
      collie::visitType(type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        collie::visitOp(rop, [&](auto o) {
          for (size_t i = 0; i < n; ++i) {
            T r = collie::applyOp<decltype(o)::value>(reinterpret_cast<T*>(a.data())[i],
                                                      reinterpret_cast<T*>(b.data())[i]);
            reinterpret_cast<T*>(want.data())[i] = divisor ? collie::divideBy(r, divisor) : r;
          }
        });
      });
      void *da, *db, *dout;
      ASSERT_EQ(cudaMalloc(&da, bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&db, bytes), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dout, bytes), cudaSuccess);
      cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice);
      cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice);
      ASSERT_EQ(collie::launchReduceCheck(type, op, da, db, dout, n, divisor, nullptr), 0);
      ASSERT_EQ(cudaMemcpy(got.data(), dout, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(da);
      cudaFree(db);
      cudaFree(dout);
      EXPECT_EQ(memcmp(got.data(), want.data(), bytes), 0)
          << collie::typeName(type) << " " << collie::opName(op) << " (seed " << seed << ")";
    }
  }
}

}  // namespace
