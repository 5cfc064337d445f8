// collieCommAbort from another thread: a call blocked on the communicator
// (waiting for a peer that never comes, in the data path or in COLLIE_CHECK's
// comparison) returns an error promptly, and the abort frees the communicator
// only after that call has left it. Ranks are threads of this process.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "collie.h"
#include "common/rank_threads.h"

namespace {

using collie::test::ScopedEnv;
using Clock = std::chrono::steady_clock;

struct Blocked {
  collieResult_t result = collieSuccess;
  std::string text;
  double seconds = 0;
};

// Rank 0 calls an allreduce that rank 1 never joins; another thread aborts rank 0 after 300 ms.
Blocked abortWhileWaiting() {
  collieComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(collieCommInitAll(comms, 2, nullptr), collieSuccess) << collieGetLastError(nullptr);
  Blocked b;
  std::thread caller([&] {
    float x[64] = {0};
    const Clock::time_point start = Clock::now();
    b.result = collieAllReduce(x, x, 64, collieFloat32, collieSum, comms[0], nullptr);
    b.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    b.text = collieGetLastError(nullptr);  // the comm is gone by now: the thread's copy
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(collieCommAbort(comms[0]), collieSuccess);
  caller.join();
  EXPECT_EQ(collieCommDestroy(comms[1]), collieSuccess);
  return b;
}

TEST(Abort, FromAnotherThreadUnblocksACallInTheDataPath) {
  ScopedEnv timeout("COLLIE_TIMEOUT", "60");
  const Blocked b = abortWhileWaiting();
  EXPECT_NE(b.result, collieSuccess);
  EXPECT_LT(b.seconds, 10.0) << "the call waited out COLLIE_TIMEOUT instead of seeing the abort";
  EXPECT_NE(b.text.find("waiting on rank 1"), std::string::npos) << b.text;
  EXPECT_NE(b.text.find("aborted"), std::string::npos) << b.text;
}

TEST(Abort, FromAnotherThreadUnblocksACallInTheCrossRankCheck) {
  ScopedEnv timeout("COLLIE_TIMEOUT", "60");
  ScopedEnv check("COLLIE_CHECK", "1");
  const Blocked b = abortWhileWaiting();
  EXPECT_NE(b.result, collieSuccess);
  EXPECT_LT(b.seconds, 10.0) << "the call waited out COLLIE_TIMEOUT instead of seeing the abort";
  EXPECT_NE(b.text.find("COLLIE_CHECK"), std::string::npos) << b.text;
}

TEST(Abort, ADestroyedCommunicatorIsRefusedNotTouched) {
  collieComm_t comm = nullptr;
  ASSERT_EQ(collieCommInitAll(&comm, 1, nullptr), collieSuccess);
  ASSERT_EQ(collieCommAbort(comm), collieSuccess);
  float x = 1;
  // The handle is dangling: the live-handle registry refuses it without reading it.
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comm, nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("not a live communicator"), std::string::npos);
  EXPECT_EQ(collieCommDestroy(comm), collieInvalidArgument);
}

// collieGetLastError(comm) hands out a copy: destroying the comm afterwards
// leaves the text readable (ASan in CI reports a use after free otherwise).
TEST(Abort, TheLastErrorTextOutlivesItsCommunicator) {
  collieComm_t comm = nullptr;
  ASSERT_EQ(collieCommInitAll(&comm, 1, nullptr), collieSuccess);
  float x = 1;
  ASSERT_EQ(collieAllReduce(nullptr, &x, 1, collieFloat32, collieSum, comm, nullptr), collieInvalidArgument);
  const char* text = collieGetLastError(comm);
  ASSERT_EQ(collieCommDestroy(comm), collieSuccess);
  EXPECT_NE(std::string(text).find("sendbuff is NULL"), std::string::npos) << text;
}

}  // namespace
