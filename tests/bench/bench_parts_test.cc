// collie-bench's parts that need no ranks: traffic matrices, the shape of each
// collective's case, and the #wrong check itself (it must see a corrupted
// element, and accept the exact result built here independently).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>

#include "bench/cases.h"
#include "bench/check.h"
#include "bench/traffic.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace bench {
namespace {

uint64_t seedForTest() {
  static const uint64_t seed = [] {
    const uint64_t s = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    printf("bench_parts_test seed %llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

size_t rowSum(const std::vector<size_t>& m, int n, int r) {
  return std::accumulate(m.begin() + r * n, m.begin() + (r + 1) * n, size_t{0});
}

TEST(Traffic, ParsesEveryKindAndRejectsNonsense) {
  Traffic t;
  std::string err;
  EXPECT_TRUE(parseTraffic("uniform", &t, &err));
  EXPECT_TRUE(parseTraffic("zipf:1.5", &t, &err));
  EXPECT_EQ(t.zipfS, 1.5);
  EXPECT_TRUE(parseTraffic("moe:128,2,16", &t, &err));
  EXPECT_EQ(t.describe(4), "moe:128,2,16");
  EXPECT_TRUE(parseTraffic("moe", &t, &err));
  EXPECT_EQ(t.describe(12), "moe:1024,2,12");
  for (const char* bad : {"zipf:x", "moe:1,3,2", "moe:1,2", "file:", "gaussian", "uniform:3", "zipf:-1"})
    EXPECT_FALSE(parseTraffic(bad, &t, &err)) << bad;
}

TEST(Traffic, SameSeedSameMatrixAndMeanRowAsAsked) {
  const uint64_t seed = seedForTest();
  for (const char* spec : {"uniform", "random", "zipf", "zipf:2", "moe:256,2,7"}) {
    Traffic t;
    std::string err;
    ASSERT_TRUE(parseTraffic(spec, &t, &err)) << err;
    for (int n : {1, 3, 5, 8}) {
      const std::vector<size_t> a = trafficMatrix(t, n, 1000, seed), b = trafficMatrix(t, n, 1000, seed);
      ASSERT_EQ(a.size(), static_cast<size_t>(n * n));
      EXPECT_EQ(a, b) << spec << " n=" << n;
      EXPECT_EQ(std::accumulate(a.begin(), a.end(), size_t{0}), size_t{1000} * n) << spec << " n=" << n;
    }
  }
}

TEST(Traffic, ShapesDifferAsDocumented) {
  const uint64_t seed = seedForTest();
  Traffic uniform, zipf, moe, random;
  std::string err;
  parseTraffic("uniform", &uniform, &err);
  parseTraffic("zipf:2", &zipf, &err);
  parseTraffic("moe:4096,2,8", &moe, &err);
  parseTraffic("random", &random, &err);
  const int n = 4;
  const std::vector<size_t> u = trafficMatrix(uniform, n, 4000, seed);
  for (size_t v : u) EXPECT_EQ(v, 1000u);
  // Zipf: every sender has the same hottest receiver, with more than a quarter of its row.
  const std::vector<size_t> z = trafficMatrix(zipf, n, 4000, seed);
  const size_t hot = std::max_element(z.begin(), z.begin() + n) - z.begin();
  for (int s = 0; s < n; ++s) {
    EXPECT_EQ(std::max_element(z.begin() + s * n, z.begin() + (s + 1) * n) - (z.begin() + s * n),
              static_cast<long>(hot));
    EXPECT_GT(z[s * n + hot], 1000u * 2);
  }
  // MoE: every row holds tokens x topk pairs scaled alike; random: rows differ.
  const std::vector<size_t> m = trafficMatrix(moe, n, 8192, seed);
  for (int s = 0; s < n; ++s) EXPECT_NEAR(static_cast<double>(rowSum(m, n, s)), 8192.0, 1.0);
  const std::vector<size_t> r = trafficMatrix(random, n, 4000, seed);
  EXPECT_NE(r, u);
  EXPECT_NE(trafficMatrix(random, n, 4000, seed + 1), r);
}

TEST(Traffic, FileIsReadAsWrittenAndCheckedAgainstTheRankCount) {
  const std::string path = testing::TempDir() + "bench_traffic.txt";
  {
    std::ofstream f(path);
    f << "# sender rows\n0 5 7\n1 0 0  # a comment\n\n3 3 3\n";
  }
  Traffic t;
  std::string err;
  ASSERT_TRUE(parseTraffic("file:" + path, &t, &err));
  ASSERT_TRUE(loadTraffic(&t, 3, &err)) << err;
  EXPECT_EQ(trafficMatrix(t, 3, 12345, 1), (std::vector<size_t>{0, 5, 7, 1, 0, 0, 3, 3, 3}));
  EXPECT_FALSE(loadTraffic(&t, 4, &err));
  EXPECT_NE(err.find("expected 4"), std::string::npos) << err;
  {
    std::ofstream f(path);
    f << "1 2\n3 -4\n";
  }
  EXPECT_FALSE(loadTraffic(&t, 2, &err));
  EXPECT_NE(err.find("-4"), std::string::npos) << err;
  std::remove(path.c_str());
}

TEST(Cases, SizesAndBusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busFactor(Coll::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busFactor(Coll::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(Coll::kAllToAll, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(busFactor(Coll::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busFactor(Coll::kSendRecv, 8), 1.0);
  // 1 MiB of floats on 3 ranks: allgather's size column counts every rank's block.
  const Case ag = makeCase(Coll::kAllGather, collieFloat32, collieSum, 0, 3, 2, 1 << 20, nullptr);
  EXPECT_EQ(ag.count, (1u << 18) / 3);
  EXPECT_EQ(ag.rowCount, ag.count * 3);
  EXPECT_EQ(ag.rowBytes, ag.rowCount * 4);
  EXPECT_EQ(ag.sendOff, ag.count * 2);  // in place: this rank's block of the output
  const Case rs = makeCase(Coll::kReduceScatter, collieFloat64, collieMax, 0, 3, 1, 3000, nullptr);
  EXPECT_EQ(rs.recvOff, rs.count);
  EXPECT_EQ(rs.sendElems, rs.count * 3);
  const Case b = makeCase(Coll::kBroadcast, collieInt8, collieProd, 2, 3, 0, 100, nullptr);
  EXPECT_EQ(b.op, collieSum);  // no operator
  EXPECT_EQ(b.root, 2);
  EXPECT_EQ(makeCase(Coll::kAllReduce, collieInt8, collieSum, 2, 3, 0, 100, nullptr).root, -1);
  const std::vector<size_t> m = {1, 2, 3, 4};
  const Case v = makeCase(Coll::kAllToAllv, collieUint8, collieSum, 0, 2, 1, 0, &m);
  EXPECT_EQ(v.sendCounts, (std::vector<size_t>{3, 4}));
  EXPECT_EQ(v.recvCounts, (std::vector<size_t>{2, 4}));
  EXPECT_EQ(v.recvDispls, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(v.rowCount, 5u);
}

// The output a correct collective leaves on rank `rank`, built from every rank's
// filled input the plain way (not through check.cc's expected values).
std::vector<double> reference(const Case& me, uint64_t seed) {
  const int n = me.nranks;
  std::vector<std::vector<double>> in(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Case c = me;
    c.rank = r;
    if (c.coll == Coll::kAllToAllv) c = makeCase(me.coll, me.type, me.op, me.root, n, r, 0, &me.matrix);
    std::vector<char> buf(c.sendElems * c.typeBytes() + 1);
    fillInput(c, seed, buf.data());
    for (size_t j = 0; j < c.sendElems; ++j)
      visitType(c.type, [&](auto tag) {
        using T = typename decltype(tag)::type;
        in[static_cast<size_t>(r)].push_back(static_cast<double>(widen(reinterpret_cast<T*>(buf.data())[j])));
      });
  }
  std::vector<double> out;
  const size_t cnt = me.count;
  auto red = [&](size_t j) {
    double acc = in[0][j];
    for (int r = 1; r < n; ++r) {
      const double x = in[static_cast<size_t>(r)][j];
      acc = me.op == collieProd  ? acc * x
            : me.op == collieMax ? std::max(acc, x)
            : me.op == collieMin ? std::min(acc, x)
                                 : acc + x;
    }
    return me.op == collieAvg ? acc / n : acc;
  };
  switch (me.coll) {
    case Coll::kAllReduce:
      for (size_t j = 0; j < cnt; ++j) out.push_back(red(j));
      break;
    case Coll::kReduceScatter:
      for (size_t j = 0; j < cnt; ++j) out.push_back(red(me.rank * cnt + j));
      break;
    case Coll::kAllGather:
      for (int r = 0; r < n; ++r)
        for (size_t j = 0; j < cnt; ++j) out.push_back(in[static_cast<size_t>(r)][j]);
      break;
    case Coll::kAllToAllv:
      for (int r = 0; r < n; ++r) {
        const size_t from = alltoallvSendDispl(me.matrix, n, r, me.rank);
        for (size_t j = 0; j < me.recvCounts[static_cast<size_t>(r)]; ++j)
          out.push_back(in[static_cast<size_t>(r)][from + j]);
      }
      break;
    case Coll::kSendRecv:
      for (size_t j = 0; j < cnt; ++j) out.push_back(in[static_cast<size_t>((me.rank + n - 1) % n)][j]);
      break;
    default:
      break;
  }
  return out;
}

TEST(Check, AcceptsTheExactResultAndCountsEveryCorruptedElement) {
  const uint64_t seed = seedForTest();
  const std::vector<size_t> matrix = {0, 7, 3, 5, 0, 2, 1, 4, 6};  // zero blocks and self blocks included
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAllv, Coll::kSendRecv}) {
    for (collieDataType_t type : {collieFloat32, collieInt8, collieFloat8e5m2, collieBfloat16}) {
      for (collieRedOp_t op : {collieSum, collieProd, collieMax, collieMin}) {
        if (!collInfo(coll).reduces && op != collieSum) continue;
        const Case c = makeCase(coll, type, op, 0, 3, 1, 3 * 40 * typeSize(type), &matrix);
        const std::vector<double> want = reference(c, seed);
        ASSERT_EQ(want.size(), c.recvElems) << collInfo(coll).name;
        std::vector<char> out(c.recvElems * c.typeBytes() + 1);
        visitType(type, [&](auto tag) {
          using T = typename decltype(tag)::type;
          T* p = reinterpret_cast<T*>(out.data());
          for (size_t i = 0; i < want.size(); ++i) {
            if constexpr (IsNarrowFloat<T>::value)
              p[i] = narrow<T>(static_cast<float>(want[i]));
            else
              p[i] = static_cast<T>(want[i]);
          }
        });
        EXPECT_EQ(countWrong(c, seed, out.data()), 0u)
            << collInfo(coll).name << " " << typeName(type) << " " << opName(op);
        poison(out.data() + c.typeBytes() * (c.recvElems / 2), c.typeBytes());
        poison(out.data(), c.typeBytes());
        EXPECT_EQ(countWrong(c, seed, out.data()), 2u) << collInfo(coll).name << " " << typeName(type);
      }
    }
  }
}

TEST(Check, RootOnlyOutputsAndInPlaceInputs) {
  const uint64_t seed = seedForTest();
  const Case reduceOffRoot = makeCase(Coll::kReduce, collieFloat32, collieSum, 0, 3, 2, 64, nullptr);
  std::vector<char> junk(64);
  poison(junk.data(), junk.size());
  EXPECT_EQ(countWrong(reduceOffRoot, seed, junk.data()), 0u);  // nothing to check off the root
  // Broadcast off the root: its input is poison, so a rank that received nothing cannot pass.
  const Case bcast = makeCase(Coll::kBroadcast, collieInt32, collieSum, 0, 3, 1, 64, nullptr);
  std::vector<char> buf(64);
  fillInPlace(bcast, seed, buf.data());
  EXPECT_EQ(countWrong(bcast, seed, buf.data()), bcast.recvElems);
  // Allgather in place: poison everywhere but this rank's block.
  const Case ag = makeCase(Coll::kAllGather, collieInt32, collieSum, 0, 4, 2, 64, nullptr);
  std::vector<char> ip(ag.bufElems * 4);
  fillInPlace(ag, seed, ip.data());
  EXPECT_EQ(countWrong(ag, seed, ip.data()), ag.recvElems - ag.count);
}

}  // namespace
}  // namespace bench
}  // namespace collie
