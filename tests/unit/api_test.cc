// The C API surface: every result has a string, and calls reject bad
// arguments with a sentence naming the call and the argument.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"

namespace {

class Api : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(collieCommInitAll(&comm_, 1, nullptr), collieSuccess) << collieGetLastError(nullptr);
  }
  void TearDown() override { EXPECT_EQ(collieCommDestroy(comm_), collieSuccess); }
  collieComm_t comm_ = nullptr;
};

TEST_F(Api, ResourceCallsRejectBadArgumentsWithASentence) {
  char buf[64] = {0};
  void* handle = buf;
  collieRedOp_t op = collieSum;
  collieComm_t newcomm = reinterpret_cast<collieComm_t>(0x1);
  // Each entry is evaluated in order; the comm's last error is checked right after.
  std::vector<std::pair<const char*, std::function<collieResult_t()>>> calls = {
      {"collieCommSplit", [&] { return collieCommSplit(comm_, -5, 0, &newcomm, nullptr); }},
      {"collieCommRegister", [&] { return collieCommRegister(comm_, nullptr, sizeof(buf), &handle); }},
      {"collieCommDeregister", [&] { return collieCommDeregister(comm_, buf); }},
      {"collieRedOpCreatePreMulSum",
       [&] { return collieRedOpCreatePreMulSum(&op, nullptr, collieFloat32, collieScalarHostImmediate, comm_); }},
      {"collieRedOpDestroy", [&] { return collieRedOpDestroy(collieNumOps, comm_); }},
  };
  for (auto& c : calls) {
    EXPECT_EQ(c.second(), collieInvalidArgument) << c.first;
    EXPECT_NE(std::string(collieGetLastError(comm_)).find(c.first), std::string::npos) << collieGetLastError(comm_);
  }
  EXPECT_EQ(newcomm, nullptr);
  EXPECT_EQ(handle, nullptr);
  // Calls without a communicator record the error for the calling thread.
  EXPECT_EQ(collieMemFree(buf), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("was not returned by collieMemAlloc"), std::string::npos);
  EXPECT_EQ(collieMemAlloc(nullptr, 16), collieInvalidArgument);
  // A rejected call leaves the communicator usable.
  float x = 2;
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comm_, nullptr), collieSuccess);
  EXPECT_EQ(x, 2.0f);
}

TEST_F(Api, Queries) {
  int count = 0, rank = -1, device = 0;
  EXPECT_EQ(collieCommCount(comm_, &count), collieSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(collieCommUserRank(comm_, &rank), collieSuccess);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(collieCommCuDevice(comm_, &device), collieSuccess);
  EXPECT_EQ(device, -1);  // host communicator
  collieBackend_t backend = collieBackendAuto;
  EXPECT_EQ(collieCommGetBackend(comm_, &backend), collieSuccess);
  EXPECT_EQ(backend, collieBackendHost);
  collieResult_t async = collieInternalError;
  EXPECT_EQ(collieCommGetAsyncError(comm_, &async), collieSuccess);
  EXPECT_EQ(async, collieSuccess);
  EXPECT_EQ(collieCommCount(comm_, nullptr), collieInvalidArgument);
}

TEST(ApiStatic, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(collieGetVersion(&v), collieSuccess);
  EXPECT_EQ(v, COLLIE_VERSION_CODE);
  EXPECT_EQ(collieGetVersion(nullptr), collieInvalidArgument);
  for (int r = 0; r <= collieNumResults; ++r) {
    const char* s = collieGetErrorString(static_cast<collieResult_t>(r));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::string(s).size(), 3u);
  }
  EXPECT_STREQ(collieGetErrorString(static_cast<collieResult_t>(99)), "unknown result code");
}

TEST(ApiStatic, NcclNumericValues) {
  EXPECT_EQ(collieInvalidUsage, 5);
  EXPECT_EQ(collieTimeout, 8);
  EXPECT_EQ(collieBfloat16, 9);
  EXPECT_EQ(collieFloat8e5m2, 11);
  EXPECT_EQ(collieAvg, 4);
  EXPECT_EQ(sizeof(collieUniqueId), 128u);
}

TEST(ApiStatic, InitRejectsBadArguments) {
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  collieComm_t comm = reinterpret_cast<collieComm_t>(0x1);
  EXPECT_EQ(collieCommInitRank(&comm, 0, id, 0), collieInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("nranks 0"), std::string::npos);
  EXPECT_EQ(collieCommInitRank(&comm, 2, id, 2), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("rank 2 is not in [0, 2)"), std::string::npos);
  EXPECT_EQ(collieCommInitRank(nullptr, 1, id, 0), collieInvalidArgument);
  collieUniqueId garbage;
  memset(&garbage, 0x42, sizeof(garbage));
  EXPECT_EQ(collieCommInitRank(&comm, 1, garbage, 0), collieInvalidArgument);
  EXPECT_EQ(collieCommInitAll(nullptr, 1, nullptr), collieInvalidArgument);
  collieComm_t comms[2];
  EXPECT_EQ(collieCommInitAll(comms, 0, nullptr), collieInvalidArgument);
}

TEST(ApiStatic, ConfigIsCheckedAndHonoured) {
  collieUniqueId id;
  collieComm_t comm = nullptr;
  collieConfig_t bad = COLLIE_CONFIG_INITIALIZER;
  bad.magic = 0;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  EXPECT_EQ(collieCommInitRankConfig(&comm, 1, id, 0, &bad), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("COLLIE_CONFIG_INITIALIZER"), std::string::npos);
  collieConfig_t cuda = COLLIE_CONFIG_INITIALIZER;
  cuda.backend = collieBackendCuda;
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  if (gpus == 0) {  // with a GPU this config is valid; tests/gpu covers it
    EXPECT_EQ(collieCommInitRankConfig(&comm, 1, id, 0, &cuda), collieInvalidUsage);
    EXPECT_NE(std::string(collieGetLastError(nullptr)).find("no GPU is usable"), std::string::npos);
  }
  collieConfig_t badBlocking = COLLIE_CONFIG_INITIALIZER;
  badBlocking.blocking = 7;
  EXPECT_EQ(collieCommInitRankConfig(&comm, 1, id, 0, &badBlocking), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("config.blocking 7"), std::string::npos);
  collieConfig_t badAlgo = COLLIE_CONFIG_INITIALIZER;
  badAlgo.algo = "allreduce:warp";
  EXPECT_EQ(collieCommInitRankConfig(&comm, 1, id, 0, &badAlgo), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("config.algo: allreduce has no algorithm 'warp'"),
            std::string::npos)
      << collieGetLastError(nullptr);
  collieConfig_t host = COLLIE_CONFIG_INITIALIZER;
  host.backend = collieBackendHost;
  host.algo = "allreduce:ring";
  host.timeoutMs = 5000;
  ASSERT_EQ(collieCommInitRankConfig(&comm, 1, id, 0, &host), collieSuccess) << collieGetLastError(nullptr);
  EXPECT_EQ(collieCommDestroy(comm), collieSuccess);
}

TEST(ApiStatic, DestroyAndAbortAcceptNull) {
  EXPECT_EQ(collieCommDestroy(nullptr), collieSuccess);
  EXPECT_EQ(collieCommAbort(nullptr), collieSuccess);
  collieComm_t comm;
  ASSERT_EQ(collieCommInitAll(&comm, 1, nullptr), collieSuccess);
  EXPECT_EQ(collieCommAbort(comm), collieSuccess);
}

}  // namespace

namespace {

// COLLIE_ALGO is parsed at init: a name that does not exist fails the init
// with the valid names listed, instead of a surprise at the first call.
TEST(ApiStatic, CollieAlgoIsCheckedAtInit) {
  collieComm_t comms[2] = {nullptr, nullptr};
  {
    collie::test::ScopedEnv algo("COLLIE_ALGO", "allreduce:nosuch");
    EXPECT_NE(collieCommInitAll(comms, 2, nullptr), collieSuccess);
    const std::string msg = collieGetLastError(nullptr);
    EXPECT_NE(msg.find("nosuch"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ring"), std::string::npos) << msg;
  }
  {
    collie::test::ScopedEnv algo("COLLIE_ALGO", "nosuchcollective:ring");
    EXPECT_NE(collieCommInitAll(comms, 2, nullptr), collieSuccess);
    EXPECT_NE(std::string(collieGetLastError(nullptr)).find("allreduce"), std::string::npos);
  }
  collie::test::ScopedEnv algo("COLLIE_ALGO", " allreduce : rhd ; broadcast:binomial");
  ASSERT_EQ(collieCommInitAll(comms, 2, nullptr), collieSuccess) << collieGetLastError(nullptr);
  for (collieComm_t c : comms) collieCommDestroy(c);
}

// COLLIE_GPU_REMOTE (how GPU buffers cross hosts) is checked on every init, so
// a typo shows on the first run rather than on the first multi-host one.
TEST(ApiStatic, CollieGpuRemoteIsCheckedAtInit) {
  collieComm_t comms[2] = {nullptr, nullptr};
  {
    collie::test::ScopedEnv remote("COLLIE_GPU_REMOTE", "proxi");
    EXPECT_EQ(collieCommInitAll(comms, 2, nullptr), collieInvalidArgument);
    const std::string msg = collieGetLastError(nullptr);
    EXPECT_NE(msg.find("COLLIE_GPU_REMOTE=proxi: expected staged or proxy"), std::string::npos) << msg;
  }
  collie::test::ScopedEnv remote("COLLIE_GPU_REMOTE", "proxy");
  ASSERT_EQ(collieCommInitAll(comms, 2, nullptr), collieSuccess) << collieGetLastError(nullptr);
  for (collieComm_t c : comms) collieCommDestroy(c);
}

}  // namespace
