// All-to-all-v, send/recv and groups on the host backend, ranks as threads:
// random, skewed and all-zero splits with gaps between blocks; grouped
// send/recv rings, all-pairs exchanges with uneven sizes, self and zero bytes,
// several messages per pair in order, one thread driving every rank inside a
// group, and the errors of misuse. Inputs random (seed printed), outputs and
// gaps poisoned.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

enum class Split { kRandom, kSkewed, kZeros };

// counts[i][j]: elements rank i sends to rank j.
std::vector<std::vector<size_t>> makeSplit(Split kind, int n, size_t maxCount, std::mt19937_64& rng) {
  std::vector<std::vector<size_t>> c(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n), 0));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      size_t& v = c[static_cast<size_t>(i)][static_cast<size_t>(j)];
      if (kind == Split::kRandom) v = rng() % 4 == 0 ? 0 : rng() % (maxCount + 1);
      if (kind == Split::kSkewed) v = j == 0 ? maxCount : (rng() % 8 == 0 ? 1 : 0);  // everyone floods rank 0
    }
  return c;
}

// Displacements for `counts` in a shuffled order with a gap of 0..2 elements after each block.
std::vector<size_t> displs(const std::vector<size_t>& counts, std::mt19937_64& rng, size_t* extent) {
  std::vector<size_t> order(counts.size()), d(counts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  size_t at = 0;
  for (size_t i : order) {
    d[i] = at;
    at += counts[i] + rng() % 3;
  }
  *extent = at;
  return d;
}

std::string runAllToAllv(const Comms& comms, Split kind, collieDataType_t type, size_t maxCount, uint64_t seed) {
  const int n = comms.size();
  const size_t es = collie::typeSize(type);
  std::mt19937_64 rng(seed + static_cast<uint64_t>(type) * 131 + maxCount);
  const auto counts = makeSplit(kind, n, maxCount, rng);
  std::vector<std::vector<size_t>> sc(n), sd(n), rc(n), rd(n);
  std::vector<std::vector<char>> in(n), out(n), want(n);
  for (int r = 0; r < n; ++r) {
    sc[r] = counts[static_cast<size_t>(r)];
    for (int j = 0; j < n; ++j) rc[r].push_back(counts[static_cast<size_t>(j)][static_cast<size_t>(r)]);
    size_t inExtent = 0, outExtent = 0;
    sd[r] = displs(sc[r], rng, &inExtent);
    rd[r] = displs(rc[r], rng, &outExtent);
    in[r].resize(inExtent * es + 1);
    collie::test::fillInput(type, collieSum, r, seed, in[r].data(), inExtent);
    out[r].resize(outExtent * es + 1);
    collie::test::poison(out[r].data(), out[r].size());
  }
  for (int r = 0; r < n; ++r) {
    want[r] = out[r];  // gaps stay poisoned
    for (int j = 0; j < n; ++j)
      memcpy(want[r].data() + rd[r][j] * es, in[j].data() + sd[j][static_cast<size_t>(r)] * es, rc[r][j] * es);
  }
  const auto inCopy = in;
  std::vector<collieResult_t> res(n);
  onRanks(n, [&](int r) {
    res[r] = collieAllToAllv(in[r].data(), sc[r].data(), sd[r].data(), out[r].data(), rc[r].data(), rd[r].data(), type,
                             comms[r], nullptr);
  });
  for (int r = 0; r < n; ++r) {
    if (res[r] != collieSuccess) return "rank " + std::to_string(r) + ": " + collieGetLastError(comms[r]);
    if (in[r] != inCopy[r]) return "rank " + std::to_string(r) + " modified sendbuff";
    if (out[r] != want[r]) {
      size_t i = 0;
      while (out[r][i] == want[r][i]) ++i;
      return "rank " + std::to_string(r) + ": first wrong byte " + std::to_string(i) + " of " +
             std::to_string(out[r].size());
    }
  }
  return "";
}

class AllToAllvTest : public ::testing::TestWithParam<std::pair<int, bool>> {};

TEST_P(AllToAllvTest, RandomSkewedAndZeroSplitsEveryType) {
  const int n = GetParam().first;
  const bool tiny = GetParam().second;
  const uint64_t seed = collie::test::testSeed();
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", tiny ? "4096" : nullptr);
  ScopedEnv slots("COLLIE_SLOTS", tiny ? "2" : nullptr);
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  int cases = 0;
  for (collieDataType_t type : collie::test::allTypes())
    for (Split kind : {Split::kRandom, Split::kSkewed, Split::kZeros})
      for (size_t maxCount : {size_t{1}, size_t{37}, size_t{20011}}) {
        const std::string err = runAllToAllv(comms, kind, type, maxCount, seed);
        ASSERT_EQ(err, "") << "nranks " << n << " " << collie::typeName(type) << " split " << static_cast<int>(kind)
                           << " max " << maxCount << (tiny ? " tiny slots" : "") << " (seed " << seed << ")";
        ++cases;
      }
  printf("%d all-to-all-v cases exact\n", cases);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllvTest,
                         ::testing::Values(std::make_pair(1, false), std::make_pair(2, false), std::make_pair(3, false),
                                           std::make_pair(4, false), std::make_pair(5, false), std::make_pair(7, false),
                                           std::make_pair(8, false), std::make_pair(5, true)),
                         [](const auto& info) {
                           return "n" + std::to_string(info.param.first) + (info.param.second ? "_tinyslots" : "");
                         });

TEST(AllToAllv, BadArgumentsAreRejected) {
  Comms comms(1);
  ASSERT_EQ(comms.result, collieSuccess);
  size_t one = 1, zero = 0;
  float a = 1, b = 0;
  EXPECT_EQ(collieAllToAllv(&a, nullptr, &zero, &b, &one, &zero, collieFloat32, comms[0], nullptr),
            collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("sendcounts"), std::string::npos);
  EXPECT_EQ(collieAllToAllv(&a, &one, &zero, &a, &one, &zero, collieFloat32, comms[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("overlap"), std::string::npos);
  size_t huge = SIZE_MAX;
  EXPECT_EQ(collieAllToAllv(&a, &one, &huge, &b, &one, &zero, collieFloat32, comms[0], nullptr), collieInvalidArgument);
  EXPECT_EQ(collieAllToAllv(nullptr, &one, &zero, &b, &one, &zero, collieFloat32, comms[0], nullptr),
            collieInvalidArgument);
  EXPECT_EQ(collieAllToAllv(&a, &one, &zero, &b, &zero, &zero, collieFloat32, comms[0], nullptr),
            collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("own block"), std::string::npos);
  EXPECT_EQ(collieAllToAllv(&a, &one, &zero, &b, &one, &zero, collieFloat32, comms[0], nullptr), collieSuccess);
  EXPECT_EQ(b, 1.0f);
}

// Grouped send/recv in the pattern torch.distributed.all_to_all_single uses
// with uneven splits: every rank sends to every rank (itself included), zeros allowed.
TEST(SendRecv, GroupedAllPairsWithUnevenSizesSelfAndZeros) {
  const uint64_t seed = collie::test::testSeed();
  for (int n : {1, 2, 3, 5, 8}) {
    Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess);
    std::mt19937_64 rng(seed + static_cast<uint64_t>(n));
    const auto counts = makeSplit(Split::kRandom, n, 3000, rng);
    std::vector<std::vector<std::vector<int32_t>>> sendb(n), recvb(n);
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < n; ++j) {
        sendb[r].emplace_back(counts[r][j]);
        for (size_t i = 0; i < counts[r][j]; ++i) sendb[r][j][i] = static_cast<int32_t>(rng());
        recvb[r].emplace_back(counts[j][r], -1);
      }
    std::vector<collieResult_t> res(n);
    onRanks(n, [&](int r) {
      collieGroupStart();
      for (int j = 0; j < n; ++j) {
        collieSend(sendb[r][j].data(), sendb[r][j].size(), collieInt32, j, comms[r], nullptr);
        collieRecv(recvb[r][j].data(), recvb[r][j].size(), collieInt32, j, comms[r], nullptr);
      }
      res[r] = collieGroupEnd();
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(res[r], collieSuccess) << collieGetLastError(comms[r]);
      for (int j = 0; j < n; ++j) ASSERT_EQ(recvb[r][j], sendb[j][r]) << "n " << n << " rank " << r << " from " << j;
    }
  }
}

TEST(SendRecv, SeveralMessagesPerPairArriveInOrderAndTypesMayDiffer) {
  const int n = 3;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess);
  std::vector<std::vector<float>> got(n, std::vector<float>(3000 + 1 + 2, 0));
  onRanks(n, [&](int r) {
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<float> a(3000, static_cast<float>(r)), b(1, 100.0f + r), c(2, 200.0f + r);
    collieGroupStart();
    collieSend(a.data(), a.size(), collieFloat32, next, comms[r], nullptr);
    collieSend(b.data(), b.size(), collieFloat32, next, comms[r], nullptr);
    collieSend(c.data(), c.size() * 4, collieUint8, next, comms[r], nullptr);  // bytes on the wire match
    collieRecv(got[r].data(), 3000, collieFloat32, prev, comms[r], nullptr);
    collieRecv(got[r].data() + 3000, 1, collieFloat32, prev, comms[r], nullptr);
    collieRecv(got[r].data() + 3001, 2, collieFloat32, prev, comms[r], nullptr);
    EXPECT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(comms[r]);
  });
  for (int r = 0; r < n; ++r) {
    const float prev = static_cast<float>((r + n - 1) % n);
    EXPECT_EQ(got[r][0], prev);
    EXPECT_EQ(got[r][2999], prev);
    EXPECT_EQ(got[r][3000], 100.0f + prev);
    EXPECT_EQ(got[r][3002], 200.0f + prev);
  }
}

TEST(SendRecv, OutsideAGroupEachCallIsItsOwnGroup) {
  Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess);
  double x = 42, y = 0;
  onRanks(2, [&](int r) {
    const collieResult_t rc = r == 0 ? collieSend(&x, 1, collieFloat64, 1, comms[0], nullptr)
                                     : collieRecv(&y, 1, collieFloat64, 0, comms[1], nullptr);
    EXPECT_EQ(rc, collieSuccess);
  });
  EXPECT_EQ(y, 42);
}

// What collieCommInitAll users do: one thread issues a call on every rank inside one group.
TEST(Groups, OneThreadDrivesEveryRank) {
  const int n = 4;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess);
  std::vector<std::vector<int64_t>> buf(n, std::vector<int64_t>(5000));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < buf[r].size(); ++i) buf[r][i] = r + static_cast<int64_t>(i);
  std::vector<int64_t> ring(n, -1), token(n);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(collieAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), collieInt64, collieSum, comms[r], nullptr),
              collieSuccess);
    token[r] = 10 * r;
    ASSERT_EQ(collieSend(&token[r], 1, collieInt64, (r + 1) % n, comms[r], nullptr), collieSuccess);
    ASSERT_EQ(collieRecv(&ring[r], 1, collieInt64, (r + n - 1) % n, comms[r], nullptr), collieSuccess);
    ASSERT_EQ(collieBarrier(comms[r], nullptr), collieSuccess);
  }
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(buf[r][7], 6 + 4 * 7);  // 0+1+2+3 + 4*i
    EXPECT_EQ(ring[r], 10 * ((r + n - 1) % n));
  }
}

TEST(Groups, MisuseIsReported) {
  Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess);
  EXPECT_EQ(collieGroupEnd(), collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("without collieGroupStart"), std::string::npos);
  float x = 0;
  EXPECT_EQ(collieSend(&x, 1, collieFloat32, 2, comms[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("peer 2"), std::string::npos);
  EXPECT_EQ(collieRecv(nullptr, 1, collieFloat32, 1, comms[0], nullptr), collieInvalidArgument);
  // A send to self with no receive cannot complete: an error, not a hang.
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  EXPECT_EQ(collieSend(&x, 1, collieFloat32, 0, comms[0], nullptr), collieSuccess);
  EXPECT_EQ(collieGroupEnd(), collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("send to self"), std::string::npos);
  // Nested groups run at the outermost end; zero-byte pairs complete.
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  EXPECT_EQ(collieSend(nullptr, 0, collieFloat32, 0, comms[1], nullptr), collieSuccess);
  EXPECT_EQ(collieRecv(nullptr, 0, collieFloat32, 0, comms[1], nullptr), collieSuccess);
  EXPECT_EQ(collieGroupEnd(), collieSuccess);
  EXPECT_EQ(collieGroupEnd(), collieSuccess);
}

}  // namespace
