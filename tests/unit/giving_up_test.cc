// Giving up without leaving a peer in freed memory (executor/protocol.h, "Giving up"). Ranks that are threads of
// one process read each other's sends in place, from the sender's buffers; a call that fails returns those
// buffers to a caller who may free them at once. So a rank that gives up withdraws what it posted and waits for
// a peer that may be reading it; a peer never takes a withdrawn slice. Both executors that read in place run the
// same protocol: the host executor (HostPrims) and the CUDA kernels' own code (DevicePrims), here on host
// threads (COLLIE_TEST_EMULATE_KERNELS). Rank 0 calls a ring allgather; the test plays its peers through the windows.
// On a GPU (or the fake runtime): collectives_gpu_test, CudaBackend.ALatePeerNeverReadsTheFreedBufferOfARankThatGaveUp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "core/comm.h"
#include "executor/protocol.h"
#include "transport/shm/shm_window.h"

namespace {

using collie::test::ScopedEnv;

// Reading in place on for every size; one channel, Simple; 30 s to give up, which no test here waits for.
struct InPlacePeers {
  ScopedEnv emulate;
  ScopedEnv timeout{"COLLIE_TIMEOUT", "30"};
  ScopedEnv algo{"COLLIE_ALGO", "allgather:ring"};
  ScopedEnv proto{"COLLIE_PROTO", "simple"};
  ScopedEnv direct{"COLLIE_DIRECT_READ_BYTES", "0"};
  ScopedEnv channels{"COLLIE_CHANNELS", "1"};
  collie::test::Comms c;
  collie::WindowLayout layout;
  InPlacePeers(int n, bool emulated) : emulate("COLLIE_TEST_EMULATE_KERNELS", emulated ? "2" : "0"), c(n) {
    if (c.result != collieSuccess) return;
    collie::WindowHeader h;
    std::memcpy(&h, window(0), sizeof(h));
    layout = collie::layoutOf(h);
  }
  uint8_t* window(int r) const { return c[0]->windows->window(r); }
  // A counter in rank `owner`'s window at `offset`.
  uint64_t load(int owner, uint64_t offset) const {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(window(owner) + offset), __ATOMIC_ACQUIRE);
  }
  void store(int owner, uint64_t offset, uint64_t v) const {
    __atomic_store_n(reinterpret_cast<uint64_t*>(window(owner) + offset), v, __ATOMIC_RELEASE);
  }
};

// The parameter: the kernels' code on host threads, or the host executor.
class GivingUp : public ::testing::TestWithParam<bool> {};

// Rank 1 gave up (its counter to rank 0 withdrawn) after posting a slice that lies in its own memory, which its
// owner may have freed since: rank 0 never reads it, fails at once instead of after COLLIE_TIMEOUT, says who gave
// up first, and gives up in turn: it tells rank 1 it reads nothing more and withdraws its own slice.
TEST_P(GivingUp, AWithdrawnSliceIsNeverReadAndTheCallFailsAtOnce) {
  InPlacePeers f(2, GetParam());
  ASSERT_EQ(f.c.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t count = 1000;
  std::vector<float> freed(count, 42.0f);  // stands for the buffer rank 1 handed over, then freed
  f.store(0, f.layout.sourceOffset(0, 1, 0), reinterpret_cast<uintptr_t>(freed.data()));
  f.store(0, f.layout.readyOffset(0, 1), 1 | collie::kFlagWithdrawn);
  std::vector<float> in(count, 1.0f), out(2 * count, -1.0f);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(collieAllGather(in.data(), out.data(), count, collieFloat32, f.c[0], nullptr), collieRemoteError);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string text = collieGetLastError(f.c[0]);
  EXPECT_NE(text.find("rank 0 waiting on rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 had given up this call first"), std::string::npos) << text;
  EXPECT_LT(secs, 10.0) << "the call waited for COLLIE_TIMEOUT (30 s) instead of failing on the withdrawal";
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[count + i], -1.0f) << "rank 1's block, element " << i;
  // In rank 1's window: rank 0 credits nothing more ever (kFlagWithdrawn), and withdrew the one slice it posted.
  const uint64_t credit = f.load(1, f.layout.creditOffset(0, 0));
  EXPECT_NE(credit & collie::kFlagWithdrawn, 0u) << credit;
  EXPECT_EQ(f.load(1, f.layout.readyOffset(0, 0)), 1 | collie::kFlagWithdrawn);
}

// Rank 1 has begun reading rank 0's slice in place (its mark, reading[][], in rank 0's window) when rank 2 gives up
// and rank 0's call fails: rank 0 must not return, handing its buffer back to a caller who may free it, before
// rank 1's credit says the read is over. Rank 1 credits 0.2 s after rank 2 gave up.
TEST_P(GivingUp, ACallThatGivesUpWaitsForThePeerReadingItsBufferInPlace) {
  InPlacePeers f(3, GetParam());
  ASSERT_EQ(f.c.result, collieSuccess) << collieGetLastError(nullptr);
  std::atomic<bool> credited{false};
  std::string seen;
  std::thread peers([&] {
    // Rank 0's first step hands its block to rank 1 in place: the counter says so, the source word says where.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    uint64_t ready = 0;
    while (((ready = f.load(1, f.layout.readyOffset(0, 0))) & collie::kFlagCount) == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if ((ready & collie::kFlagInPlace) == 0 || f.load(1, f.layout.sourceOffset(0, 0, 0)) == 0)
      seen = "rank 0's first slice to rank 1 was not handed over in place (counter " + std::to_string(ready) + ")";
    f.store(0, f.layout.readingOffset(0, 1), 1);                     // rank 1 reads slice 0 in place
    f.store(0, f.layout.readyOffset(0, 2), collie::kFlagWithdrawn);  // rank 2 gives up
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    credited = true;
    f.store(0, f.layout.creditOffset(0, 1), 1);  // rank 1 is done with it
  });
  const size_t count = 999;
  std::vector<float> in(count, 1.0f), out(3 * count, -1.0f);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(collieAllGather(in.data(), out.data(), count, collieFloat32, f.c[0], nullptr), collieRemoteError);
  const bool waited = credited.load();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  peers.join();
  EXPECT_EQ(seen, "");
  EXPECT_TRUE(waited) << "rank 0's call returned while rank 1 still read its buffer in place";
  EXPECT_LT(secs, 10.0) << "the call waited for COLLIE_TIMEOUT (30 s), not for the credit";
  const std::string text = collieGetLastError(f.c[0]);
  EXPECT_NE(text.find("rank 0 waiting on rank 2"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2 had given up this call first"), std::string::npos) << text;
}

// Real ranks, all calling: rank 2 is late by more than COLLIE_TIMEOUT (1 s). Ranks 0 and 1 give up; rank 1 had
// read rank 0's block in place before, so nothing waits long; rank 2, calling late, takes nothing the others
// withdrew, fails at once naming a rank that gave up first, and no result claims success.
TEST_P(GivingUp, ALateRankFailsAtOnceWithoutReadingWhatTheOthersWithdrew) {
  ScopedEnv timeout("COLLIE_TIMEOUT", "1");
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", GetParam() ? "2" : "0");
  ScopedEnv algo("COLLIE_ALGO", "allgather:ring");
  ScopedEnv proto("COLLIE_PROTO", "simple");
  ScopedEnv direct("COLLIE_DIRECT_READ_BYTES", "0");
  collie::test::Comms c(3);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t count = 5000;
  std::vector<collieResult_t> rc(3, collieSuccess);
  std::vector<std::string> text(3);
  std::vector<double> secs(3);
  collie::test::onRanks(3, [&](int r) {
    if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::vector<float> in(count, static_cast<float>(r)), out(3 * count, -1.0f);
    const auto start = std::chrono::steady_clock::now();
    rc[static_cast<size_t>(r)] = collieAllGather(in.data(), out.data(), count, collieFloat32, c[r], nullptr);
    secs[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    text[static_cast<size_t>(r)] = collieGetLastError(c[r]);
  });
  for (int r = 0; r < 3; ++r) EXPECT_NE(rc[static_cast<size_t>(r)], collieSuccess) << "rank " << r;
  EXPECT_EQ(rc[2], collieRemoteError) << text[2];
  EXPECT_NE(text[2].find("had given up this call first"), std::string::npos) << text[2];
  EXPECT_LT(secs[2], 0.9) << "rank 2 waited out its own timeout instead of seeing that its peers had given up";
}

INSTANTIATE_TEST_SUITE_P(Executors, GivingUp, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Emulated" : "Host"; });

}  // namespace
