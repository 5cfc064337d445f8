// Ranks that made different calls, without COLLIE_CHECK (executor/protocol.h,
// signature[][][]): every slice carries the signature of the call it belongs
// to, and the receiver compares it with its own call's before it reads the
// slice. A count, type, operator, root or collective that differs, or a call
// one rank skipped, fails the ranks with collieInvalidUsage within moments,
// instead of results computed from the wrong bytes (returned as success;
// reads past the end of a shorter buffer where slices are read in place) or
// a wait until COLLIE_TIMEOUT. Calls that agree, in place or not, run
// unchanged. Ranks are threads of this process, on the host executor and
// on the CUDA kernels' own code run on host threads (COLLIE_TEST_EMULATE_KERNELS),
// with each protocol: Simple, where a kernel compares the first slice it takes
// from each peer in a launch (kernels/device_prims.cuh, sameCall), and LL,
// whose line flags carry 16 bits of the signature (executor/protocol.h,
// llOtherCall; counts too large for one LL round still run Simple).
// Processes: fault_mismatch (tests/mp/faults_mp.cc); the CUDA runtime:
// CudaBackend.ACallThatDiffersFailsEveryRank (collectives_gpu_test).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "common/test_util.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

constexpr int kRanks = 3;
constexpr double kPromptly = 10;  // seconds; COLLIE_TIMEOUT is 60

struct Outcome {
  std::vector<collieResult_t> result = std::vector<collieResult_t>(kRanks, collieSuccess);
  std::vector<std::string> text = std::vector<std::string>(kRanks);
  double seconds = 0;  // until the last rank returned
};

Outcome onEveryRank(const Comms& comms, const std::function<collieResult_t(int)>& call) {
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  onRanks(comms.size(), [&](int r) {
    o.result[static_cast<size_t>(r)] = call(r);
    o.text[static_cast<size_t>(r)] = collieGetLastError(comms[r]);
  });
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

bool names(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

// Every rank failed promptly with collieInvalidUsage: one found the difference, the others stopped with it.
void expectEveryRankRefused(const Outcome& o, const char* what) {
  EXPECT_LT(o.seconds, kPromptly) << what << ": a rank waited for its timeout";
  int found = 0;
  for (int r = 0; r < kRanks; ++r) {
    const std::string& t = o.text[static_cast<size_t>(r)];
    EXPECT_EQ(o.result[static_cast<size_t>(r)], collieInvalidUsage) << what << ", rank " << r << ": " << t;
    // The host executor's sentences, then the kernels' (which know the peer's call only by its signature's hash).
    const bool differs =
        names(t, "differs from rank") || names(t, "earlier call differed") || names(t, "data of another call");
    EXPECT_TRUE(differs || names(t, "stopped on finding")) << what << ", rank " << r << ": " << t;
    found += differs ? 1 : 0;
  }
  EXPECT_GE(found, 1) << what << ": no rank named the difference";
}

// The next call fails on every rank too, promptly: the communicator is broken, and a rank whose own call ran
// (a root that only sends) learns so from its peers' windows.
void expectBrokenEverywhere(const Comms& comms, const char* what) {
  std::vector<float> x(kRanks, 1.0f);
  const Outcome o = onEveryRank(comms, [&](int r) {
    return collieAllReduce(&x[static_cast<size_t>(r)], &x[static_cast<size_t>(r)], 1, collieFloat32, collieSum,
                           comms[r], nullptr);
  });
  EXPECT_LT(o.seconds, kPromptly) << what << ": the call after it waited for its timeout";
  for (int r = 0; r < kRanks; ++r)
    EXPECT_NE(o.result[static_cast<size_t>(r)], collieSuccess) << what << ", rank " << r << " ran the next call";
}

enum class Executor { kHost, kEmulatedSimple, kEmulatedLL };

class CallSignature : public ::testing::TestWithParam<Executor> {
 protected:
  ScopedEnv device_{"COLLIE_DEVICE", "host"};
  ScopedEnv timeout_{"COLLIE_TIMEOUT", "60"};
  ScopedEnv check_{"COLLIE_CHECK", "0"};
  ScopedEnv emulate_{"COLLIE_TEST_EMULATE_KERNELS", GetParam() == Executor::kHost ? "0" : "2"};
  ScopedEnv proto_{"COLLIE_PROTO", GetParam() == Executor::kEmulatedLL ? "ll" : "simple"};
};

// Counts of 1000 and 100000 floats (the latter's ring steps are read in place, from the sender's buffer), out of
// place and in place: rank 2's count is one more.
TEST_P(CallSignature, ACountThatDiffersFailsEveryRankPromptly) {
  const uint64_t seed = collie::test::testSeed();
  for (size_t count : {size_t{1000}, size_t{100000}}) {
    for (bool inPlace : {false, true}) {
      const std::string what = "count " + std::to_string(count) + (inPlace ? ", in place" : ", out of place");
      Comms comms(kRanks);
      ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
      std::vector<std::vector<float>> in(kRanks), out(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        const size_t n = r == 2 ? count + 1 : count;
        in[r].resize(n);
        out[r].assign(n, -7.0f);
        collie::test::fillInput(collieFloat32, collieSum, r, seed, in[r].data(), n);
      }
      const Outcome o = onEveryRank(comms, [&](int r) {
        float* src = in[r].data();
        return collieAllReduce(src, inPlace ? src : out[r].data(), in[r].size(), collieFloat32, collieSum, comms[r],
                               nullptr);
      });
      expectEveryRankRefused(o, what.c_str());
      for (int r = 0; r < kRanks; ++r) {
        collieResult_t async = collieSuccess;
        EXPECT_EQ(collieCommGetAsyncError(comms[r], &async), collieSuccess);
        EXPECT_EQ(async, collieInvalidUsage) << what << ", rank " << r;
      }
    }
  }
}

// One rank differs in type (same bytes), operator, collective, or root; each on a communicator of its own.
TEST_P(CallSignature, ATypeOpCollectiveOrRootThatDiffersFailsPromptly) {
  constexpr size_t kCount = 4096;
  struct Case {
    const char* what;
    std::function<collieResult_t(int, float*, float*, collieComm_t)> call;
    bool inTheCall;  // the ranks find out in this call; else in the next one
  };
  const std::vector<Case> cases = {
      {"int32 against float32",
       [](int r, float* b, float*, collieComm_t c) {
         return collieAllReduce(b, b, kCount, r == 1 ? collieInt32 : collieFloat32, collieSum, c, nullptr);
       },
       true},
      {"max against sum",
       [](int r, float* b, float*, collieComm_t c) {
         return collieAllReduce(b, b, kCount, collieFloat32, r == 0 ? collieMax : collieSum, c, nullptr);
       },
       true},
      {"reduce-scatter against allreduce",
       [](int r, float* b, float* out, collieComm_t c) {
         return r == 2 ? collieReduceScatter(b, out, kCount / kRanks, collieFloat32, collieSum, c, nullptr)
                       : collieAllReduce(b, out, kCount, collieFloat32, collieSum, c, nullptr);
       },
       true},
      // Rank 1 broadcasts as a root, into slots its peers never read in this call: all three may return, the
      // others with rank 0's data. Their next call finds rank 1's slices signed by the broadcast.
      {"broadcast from root 1 against root 0",
       [](int r, float* b, float*, collieComm_t c) {
         return collieBroadcast(b, b, kCount, collieFloat32, r == 1 ? 1 : 0, c, nullptr);
       },
       false},
  };
  for (const Case& k : cases) {
    Comms comms(kRanks);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<std::vector<float>> buf(kRanks, std::vector<float>(kCount, 1.0f)), out = buf;
    const Outcome o = onEveryRank(comms, [&](int r) { return k.call(r, buf[r].data(), out[r].data(), comms[r]); });
    if (k.inTheCall) {
      expectEveryRankRefused(o, k.what);
    } else {
      EXPECT_LT(o.seconds, kPromptly) << k.what;
    }
    expectBrokenEverywhere(comms, k.what);
  }
}

// Rank 2 skips a broadcast the others make, then all make an allreduce: rank 2's allreduce meets the others'
// broadcast, and their allreduce meets data of its earlier collective.
TEST_P(CallSignature, ASkippedCallFailsEveryRankPromptly) {
  Comms comms(kRanks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(1024, 1.0f));
  const Outcome o = onEveryRank(comms, [&](int r) {
    float* b = buf[r].data();
    if (r != 2) {
      const collieResult_t res = collieBroadcast(b, b, 1024, collieFloat32, 0, comms[r], nullptr);
      if (res != collieSuccess) return res;
    }
    return collieAllReduce(b, b, 1024, collieFloat32, collieSum, comms[r], nullptr);
  });
  EXPECT_LT(o.seconds, kPromptly);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(o.result[static_cast<size_t>(r)], collieInvalidUsage) << "rank " << r << ": " << o.text[r];
  expectBrokenEverywhere(comms, "a skipped broadcast");
}

// What ranks may legitimately differ in: in place on one rank and not on the others, and all-to-all-v's
// per-peer counts. Both run, exactly, call after call.
TEST_P(CallSignature, CallsThatAgreeRunAsBefore) {
  Comms comms(kRanks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t count = 100000;
  std::vector<std::vector<int32_t>> in(kRanks, std::vector<int32_t>(count)), out(kRanks);
  const Outcome o = onEveryRank(comms, [&](int r) {
    for (int call = 0; call < 3; ++call) {
      for (size_t i = 0; i < count; ++i) in[r][i] = r + static_cast<int32_t>(i % 7) + call;
      out[r].assign(count, -1);
      int32_t* dst = r == 0 ? in[r].data() : out[r].data();
      collieResult_t res = collieAllReduce(in[r].data(), dst, count, collieInt32, collieSum, comms[r], nullptr);
      if (res != collieSuccess) return res;
      for (size_t i = 0; i < count; i += 997)
        if (dst[i] != 3 + 3 * static_cast<int32_t>(i % 7) + 3 * call) return collieInternalError;
      // All-to-all-v: rank r sends s + 1 elements to rank s, and receives r + 1 from each.
      std::vector<size_t> sc(kRanks), sd(kRanks), rc(kRanks), rd(kRanks);
      for (int s = 0; s < kRanks; ++s) {
        sc[s] = static_cast<size_t>(s + 1);
        sd[s] = s == 0 ? 0 : sd[s - 1] + sc[s - 1];
        rc[s] = static_cast<size_t>(r + 1);
        rd[s] = static_cast<size_t>(s * (r + 1));
      }
      std::vector<int32_t> send(6, 10 * r), recv(static_cast<size_t>(kRanks * (r + 1)), -1);
      res = collieAllToAllv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data(), collieInt32, comms[r],
                            nullptr);
      if (res != collieSuccess) return res;
      for (int s = 0; s < kRanks; ++s)
        if (recv[rd[s]] != 10 * s) return collieInternalError;
    }
    return collieSuccess;
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(o.result[static_cast<size_t>(r)], collieSuccess) << "rank " << r << ": " << o.text[r];
}

// Pre-multiplied sums agree whatever their handles: rank 0 made another operator first, so its handle names
// another slot of its table than its peers' do, and each rank's scalar is its own (r + 1). A pre-multiplied sum
// runs as a sum over the scaled input (core/collectives.cc, executeScaled), and that sum is what is signed, so
// neither the handle nor the scalar is compared. Both counts (the first fits LL where the kernels run it) run,
// exactly.
TEST_P(CallSignature, PreMulSumsWithHandlesThatDifferRunAsBefore) {
  Comms comms(kRanks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieRedOp_t> op(kRanks), extra(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    float other = 5.0f, mine = static_cast<float>(r + 1);
    if (r == 0) {
      ASSERT_EQ(collieRedOpCreatePreMulSum(&extra[r], &other, collieFloat32, collieScalarHostImmediate, comms[r]),
                collieSuccess);
    }
    ASSERT_EQ(collieRedOpCreatePreMulSum(&op[r], &mine, collieFloat32, collieScalarHostImmediate, comms[r]),
              collieSuccess);
  }
  ASSERT_NE(op[0], op[1]) << "the handles should differ for this test";
  for (size_t count : {size_t{1000}, size_t{100000}}) {
    std::vector<std::vector<float>> in(kRanks, std::vector<float>(count)), out(kRanks);
    const Outcome o = onEveryRank(comms, [&](int r) {
      for (size_t i = 0; i < count; ++i) in[r][i] = 1.0f + static_cast<float>(i % 3);
      out[r].assign(count, -1.0f);
      const collieResult_t res =
          collieAllReduce(in[r].data(), out[r].data(), count, collieFloat32, op[r], comms[r], nullptr);
      if (res != collieSuccess) return res;
      for (size_t i = 0; i < count; ++i)  // (1 + 2 + 3) x the input: small integers, exact in any order
        if (out[r][i] != 6.0f * (1.0f + static_cast<float>(i % 3))) return collieInternalError;
      return collieSuccess;
    });
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(o.result[static_cast<size_t>(r)], collieSuccess)
          << "count " << count << ", rank " << r << ": " << o.text[r];
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(collieRedOpDestroy(op[r], comms[r]), collieSuccess);
    if (r == 0) {
      EXPECT_EQ(collieRedOpDestroy(extra[r], comms[r]), collieSuccess);
    }
  }
}

// Ranks whose calls fall on either side of the LL line (COLLIE_PROTO=auto: LL up to 64 KiB) run different
// protocols: an LL receiver meets a Simple sender, a Simple receiver an LL one. The receiver sees its peer's
// ready counter pass the slice it waits for, marked by the other protocol (protocol.h, kFlagLL), and refuses.
// Without the mark an LL receiver would wait out COLLIE_TIMEOUT, and a Simple receiver would take an LL sender's
// slice from a slot signed 0 (nothing has signed it yet) as data. One rank (first, last) runs the other protocol
// than the other two, each way round; 1000 floats run LL, 100000 Simple.
TEST(CallSignatureProtocols, CallsOnEitherSideOfTheLLLineFailEveryRankPromptly) {
  ScopedEnv device{"COLLIE_DEVICE", "host"};
  ScopedEnv timeout{"COLLIE_TIMEOUT", "60"};
  ScopedEnv check{"COLLIE_CHECK", "0"};
  ScopedEnv emulate{"COLLIE_TEST_EMULATE_KERNELS", "2"};
  ScopedEnv proto{"COLLIE_PROTO", "auto"};
  for (int lone : {0, kRanks - 1}) {
    for (bool loneLL : {true, false}) {
      const std::string what =
          "rank " + std::to_string(lone) + (loneLL ? " LL, the others Simple" : " Simple, the others LL");
      Comms comms(kRanks);
      ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
      std::vector<std::vector<float>> buf(kRanks);
      for (int r = 0; r < kRanks; ++r) buf[r].assign((r == lone) == loneLL ? 1000 : 100000, 1.0f);
      const Outcome o = onEveryRank(comms, [&](int r) {
        return collieAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), collieFloat32, collieSum, comms[r],
                               nullptr);
      });
      expectEveryRankRefused(o, what.c_str());
      expectBrokenEverywhere(comms, what.c_str());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Executors, CallSignature,
                         ::testing::Values(Executor::kHost, Executor::kEmulatedSimple, Executor::kEmulatedLL),
                         [](const ::testing::TestParamInfo<Executor>& i) {
                           return i.param == Executor::kHost         ? "Host"
                                  : i.param == Executor::kEmulatedLL ? "EmulatedLL"
                                                                     : "EmulatedSimple";
                         });

}  // namespace
