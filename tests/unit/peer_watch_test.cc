// PeerWatch (executor/peer_watch.h): every peer process of this machine that goes is reported once, by rank, and
// the watch goes on looking at the others; a rank that exits is not a failure of the ranks still running.
#include "executor/peer_watch.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// A child process that exits after `ms` milliseconds; reaped by the caller.
pid_t childFor(int ms) {
  const pid_t pid = fork();
  if (pid == 0) {
    usleep(static_cast<useconds_t>(ms) * 1000);
    _exit(0);
  }
  return pid;
}

TEST(PeerWatch, EachPeerThatGoesIsReportedOnceAndTheWatchGoesOn) {
  const pid_t early = childFor(50), late = childFor(400);
  ASSERT_GT(early, 0);
  ASSERT_GT(late, 0);
  std::mutex mu;
  std::vector<int> reported;
  // Rank 0 is this process (no pid), rank 3 never goes while the watch runs.
  collie::PeerWatch watch({0, early, late, static_cast<int>(getpid())}, [&](int r) {
    std::lock_guard<std::mutex> lock(mu);
    reported.push_back(r);
  });
  // Reaped as soon as they exit: a zombie still answers kill(pid, 0).
  ASSERT_EQ(waitpid(early, nullptr, 0), early);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!watch.gone(1) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(watch.gone(1));
  EXPECT_FALSE(watch.gone(2)) << "the late child is still running";
  EXPECT_EQ(watch.reason(1), "rank 1 (pid " + std::to_string(early) + ") exited");
  EXPECT_EQ(watch.reason(2), "");
  ASSERT_EQ(waitpid(late, nullptr, 0), late);
  while (!watch.gone(2) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(watch.gone(2)) << "the watch stopped after the first peer went";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time for a report too many
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(reported, (std::vector<int>{1, 2}));
  EXPECT_FALSE(watch.gone(0));
  EXPECT_FALSE(watch.gone(3));
  EXPECT_FALSE(watch.gone(-1));
  EXPECT_FALSE(watch.gone(4));
}

}  // namespace
