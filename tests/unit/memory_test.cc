// collieMemAlloc / collieMemFree, collieCommRegister / collieCommDeregister and
// collieCommWindowRegister / collieCommWindowDeregister on a machine where the host backend runs: page-aligned host
// memory that the collectives accept, and checked bookkeeping (a pointer or handle that did not come from the library,
// or came back twice, is an error with a sentence).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"

namespace {

using collie::test::Comms;

bool gpuUsable() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

TEST(MemAlloc, HostMemoryWhenNoGpuIsUsable) {
  if (gpuUsable()) GTEST_SKIP() << "a GPU is usable: collieMemAlloc returns device memory (tests/gpu)";
  void* p = nullptr;
  ASSERT_EQ(collieMemAlloc(&p, 100000), collieSuccess) << collieGetLastError(nullptr);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(sysconf(_SC_PAGESIZE)), 0u);
  memset(p, 0x5a, 100000);  // host memory: writable here
  EXPECT_EQ(static_cast<unsigned char*>(p)[99999], 0x5a);
  EXPECT_EQ(collieMemFree(p), collieSuccess);
  EXPECT_EQ(collieMemFree(p), collieInvalidArgument);  // twice
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("freed already"), std::string::npos);
  int onStack = 0;
  EXPECT_EQ(collieMemFree(&onStack), collieInvalidArgument);
  EXPECT_EQ(collieMemFree(nullptr), collieSuccess);
  void* zero = &onStack;
  EXPECT_EQ(collieMemAlloc(&zero, 0), collieSuccess);
  EXPECT_EQ(zero, nullptr);
}

TEST(MemAlloc, CollectivesRunOnIt) {
  if (gpuUsable()) GTEST_SKIP() << "a GPU is usable: collieMemAlloc returns device memory (tests/gpu)";
  const int n = 3;
  const size_t count = 4099;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<float*> bufs(n);
  for (int r = 0; r < n; ++r) {
    void* p = nullptr;
    ASSERT_EQ(collieMemAlloc(&p, count * sizeof(float)), collieSuccess);
    bufs[r] = static_cast<float*>(p);
    for (size_t i = 0; i < count; ++i) bufs[r][i] = static_cast<float>(r * 1000 + i % 100);
  }
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(collieAllReduce(bufs[r], bufs[r], count, collieFloat32, collieSum, comms[r], nullptr), collieSuccess);
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(bufs[r][i], static_cast<float>(3000 + 3 * (i % 100))) << r << " " << i;
    EXPECT_EQ(collieMemFree(bufs[r]), collieSuccess);
  }
}

TEST(CommRegister, HandlesAreCheckedPerCommunicator) {
  Comms a(1), b(1);
  ASSERT_EQ(a.result, collieSuccess);
  ASSERT_EQ(b.result, collieSuccess);
  std::vector<char> buf(4096);
  void* h1 = nullptr;
  void* h2 = nullptr;
  ASSERT_EQ(collieCommRegister(a[0], buf.data(), buf.size(), &h1), collieSuccess) << collieGetLastError(a[0]);
  ASSERT_EQ(collieCommRegister(a[0], buf.data() + 100, 100, &h2), collieSuccess);
  ASSERT_NE(h1, nullptr);
  EXPECT_NE(h1, h2);
  // A registered buffer works in calls as any other.
  float x = 3;
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, a[0], nullptr), collieSuccess);
  EXPECT_EQ(collieCommDeregister(b[0], h1), collieInvalidArgument);  // not b's
  EXPECT_NE(std::string(collieGetLastError(b[0])).find("not returned by collieCommRegister"), std::string::npos);
  EXPECT_EQ(collieCommDeregister(a[0], h1), collieSuccess);
  EXPECT_EQ(collieCommDeregister(a[0], h1), collieInvalidArgument);  // twice
  EXPECT_EQ(collieCommDeregister(a[0], h2), collieSuccess);
  EXPECT_EQ(collieCommRegister(a[0], buf.data(), buf.size(), nullptr), collieInvalidArgument);
  // A communicator destroyed with registrations left frees them with itself.
  void* h3 = nullptr;
  ASSERT_EQ(collieCommRegister(b[0], buf.data(), buf.size(), &h3), collieSuccess);
}

// Windows on the host backend are bookkeeping, with the same checks as on the CUDA backend (which maps them
// between processes: tests/gpu/direct_gpu_mp.cc): every rank registers, arguments are refused with a sentence,
// and a handle is good once, on its own communicator.
TEST(CommWindowRegister, IsCollectiveAndChecked) {
  Comms a(2), b(1);
  ASSERT_EQ(a.result, collieSuccess);
  ASSERT_EQ(b.result, collieSuccess);
  std::vector<std::vector<float>> bufs(2, std::vector<float>(1024, 1.0f));
  std::vector<collieWindow_t> wins(2, nullptr);
  std::vector<collieResult_t> rcs(2, collieInternalError);
  collie::test::onRanks(2, [&](int r) {
    rcs[r] = collieCommWindowRegister(a[r], bufs[r].data(), bufs[r].size() * sizeof(float), &wins[r],
                                      COLLIE_WIN_COLL_SYMMETRIC);
    if (rcs[r] == collieSuccess)
      rcs[r] = collieAllReduce(bufs[r].data(), bufs[r].data(), 1024, collieFloat32, collieSum, a[r], nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(rcs[r], collieSuccess) << collieGetLastError(a[r]);
    ASSERT_NE(wins[r], nullptr);
    EXPECT_EQ(bufs[r][1023], 2.0f);  // a buffer in a window works in calls as any other
  }
  EXPECT_EQ(collieCommWindowDeregister(b[0], wins[0]), collieInvalidArgument);  // not b's
  EXPECT_NE(std::string(collieGetLastError(b[0])).find("not returned by collieCommWindowRegister"), std::string::npos);
  collie::test::onRanks(2, [&](int r) { rcs[r] = collieCommWindowDeregister(a[r], wins[r]); });
  EXPECT_EQ(rcs[0], collieSuccess) << collieGetLastError(a[0]);
  EXPECT_EQ(rcs[1], collieSuccess) << collieGetLastError(a[1]);
  EXPECT_EQ(collieCommWindowDeregister(a[0], wins[0]), collieInvalidArgument);  // twice
  collieWindow_t w = nullptr;
  EXPECT_EQ(collieCommWindowRegister(b[0], bufs[0].data(), 64, nullptr, 0), collieInvalidArgument);
  EXPECT_EQ(collieCommWindowRegister(b[0], nullptr, 64, &w, 0), collieInvalidArgument);
  EXPECT_EQ(w, nullptr);
  EXPECT_EQ(collieCommWindowRegister(b[0], bufs[0].data(), 0, &w, 0), collieInvalidArgument);
  EXPECT_EQ(collieCommWindowRegister(b[0], bufs[0].data(), 64, &w, 0x10), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(b[0])).find("only COLLIE_WIN_DEFAULT and COLLIE_WIN_COLL_SYMMETRIC"),
            std::string::npos);
  EXPECT_EQ(collieCommWindowRegister(nullptr, bufs[0].data(), 64, &w, 0), collieInvalidArgument);
  // A communicator destroyed with windows left frees them with itself.
  ASSERT_EQ(collieCommWindowRegister(b[0], bufs[0].data(), 64, &w, COLLIE_WIN_DEFAULT), collieSuccess);
}

}  // namespace
