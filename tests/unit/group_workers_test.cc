// The workers collieGroupEnd runs a group's queues on (core/group_workers.h): every task at once on a thread of
// its own, not the caller's, even where the tasks wait for each other; the same workers from group to group, and
// from callers on several threads at once.
#include "core/group_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {

using collie::group::runTogether;
using collie::group::workersStarted;

// n tasks that each wait until all n have started: they pass only if every one runs at once. Returns the threads
// they ran on.
std::vector<std::thread::id> runWaitingTasks(int n) {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  std::vector<std::thread::id> ran(static_cast<size_t>(n));
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < n; ++i)
    tasks.emplace_back([&, i] {
      std::unique_lock<std::mutex> lock(mu);
      ran[static_cast<size_t>(i)] = std::this_thread::get_id();
      if (++started == n) cv.notify_all();
      cv.wait(lock, [&] { return started == n; });
    });
  EXPECT_TRUE(runTogether(tasks).ok());
  return ran;
}

TEST(GroupWorkers, RunEveryTaskAtOnceOnAThreadOfItsOwn) {
  for (int n : {1, 2, 5, 8}) {
    const std::vector<std::thread::id> ran = runWaitingTasks(n);
    const std::set<std::thread::id> distinct(ran.begin(), ran.end());
    EXPECT_EQ(distinct.size(), static_cast<size_t>(n)) << n << " tasks";
    EXPECT_EQ(distinct.count(std::this_thread::get_id()), 0u) << n << " tasks";
  }
}

TEST(GroupWorkers, AreReusedFromGroupToGroup) {
  runWaitingTasks(4);
  const size_t before = workersStarted();
  for (int k = 0; k < 200; ++k) runWaitingTasks(1 + k % 4);
  EXPECT_EQ(workersStarted(), before) << "a group of at most 4 after one of 4 started workers";
}

TEST(GroupWorkers, ServeCallersOnSeveralThreadsAtOnce) {
  std::atomic<int> groups{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int k = 0; k < 50; ++k) {
        runWaitingTasks(3);
        ++groups;
      }
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(groups.load(), 150);
}

}  // namespace
