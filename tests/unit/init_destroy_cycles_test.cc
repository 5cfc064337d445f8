// Communicators created and destroyed 1000 times in one process must leave
// nothing behind: no file descriptor (bootstrap sockets, shm descriptors), no
// shared-memory segment (name under /dev/shm or mapping), no resident memory
// beyond a fixed slack. Ranks are threads: collieCommInitAll of several ranks,
// collieCommInitRank by unique id (the id's root thread and its socket), and
// collieCommSplit and collieCommShrink of a long-lived communicator. Each cycle runs one allreduce
// so the windows are touched, not only mapped. The figures are printed.
// The same across processes: tests/mp/init_destroy_cycles_mp.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "common/resource_usage.h"
#include "transport/bootstrap/bootstrap.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::Usage;

constexpr int kCycles = 1000;
// Cycles before the baseline: malloc's per-thread arenas, the thread stacks
// glibc caches, the tuner's tables and the loggers reach their steady size.
constexpr int kWarmup = 50;
// Resident memory may still move by a few pages after the warm-up: which
// arena a new thread gets, and how fragmented it is, varies from cycle to
// cycle (measured: under 50 KiB over 1000 cycles). 1 MiB over the 1000
// measured cycles still catches a leak of ~1 KiB per cycle, far less than one
// window (1 MiB or more with the default slots).
constexpr long kRssSlackKiB = 1024;

// Each rank allreduces its rank over `comms`; false when a call fails or the sum is wrong.
bool allreduceRanks(const std::vector<collieComm_t>& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<int> got(comms.size(), -1);
  onRanks(n, [&](int r) {
    int v = r;
    if (collieAllReduce(&v, &v, 1, collieInt32, collieSum, comms[static_cast<size_t>(r)], nullptr) == collieSuccess)
      got[static_cast<size_t>(r)] = v;
  });
  for (int v : got)
    if (v != n * (n - 1) / 2) return false;
  return true;
}

// The usage once every rendezvous root thread has finished: each closes its sockets on its own, after the
// ranks' init has returned, so the last cycle's roots may still hold some on a loaded machine. Bounded:
// a root that never finishes is counted as it stands.
Usage settledUsage() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (collie::liveRendezvousRoots() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return collie::test::sampleUsage();
}

// Runs `cycle` kWarmup + kCycles times and checks that nothing grew over the last kCycles.
void expectNoGrowth(const char* what, const std::function<bool()>& cycle) {
  const std::set<std::string> shmBefore = collie::test::shmNames();
  const Usage start = settledUsage();
  for (int i = 0; i < kWarmup; ++i) ASSERT_TRUE(cycle()) << what << ": warm-up cycle " << i;
  const Usage base = settledUsage();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCycles; ++i) ASSERT_TRUE(cycle()) << what << ": cycle " << i;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Usage end = settledUsage();
  EXPECT_EQ(collie::liveRendezvousRoots(), 0) << what << ": a rendezvous root thread is still running";
  const std::set<std::string> lingering = collie::test::lingeringShmNames(shmBefore);
  printf(
      "%s: %d cycles in %.1f s (%.2f ms each) after %d warm-up; fds %d -> %d -> %d, collie shm mappings %d -> %d -> "
      "%d, new /dev/shm/collie-* names left %zu, RSS %ld -> %ld -> %ld KiB (start -> after warm-up -> end)\n",
      what, kCycles, secs, 1e3 * secs / kCycles, kWarmup, start.fds, base.fds, end.fds, start.shmMaps, base.shmMaps,
      end.shmMaps, lingering.size(), start.rss, base.rss, end.rss);
  EXPECT_EQ(end.fds, base.fds) << what << ": file descriptors grew";
  EXPECT_EQ(end.shmMaps, start.shmMaps) << what << ": shared-memory windows still mapped";
  EXPECT_TRUE(lingering.empty()) << what << ": " << *lingering.begin() << " left in /dev/shm";
  if (collie::test::kAddressSanitizer)
    printf("%s: RSS not checked under AddressSanitizer (its quarantine holds freed memory; LeakSanitizer checks)\n",
           what);
  else
    EXPECT_LE(end.rss, base.rss + kRssSlackKiB) << what << ": resident memory grew by " << end.rss - base.rss << " KiB";
}

TEST(InitDestroyCycles, InitAllOfFourThreads) {
  expectNoGrowth("collieCommInitAll x4", [] {
    Comms comms(4);
    return comms.result == collieSuccess && allreduceRanks(comms.comms);
  });
}

TEST(InitDestroyCycles, InitRankByUniqueIdOfThreeThreads) {
  expectNoGrowth("collieCommInitRank x3 (unique id)", [] {
    const int n = 3;
    collieUniqueId id;
    if (collieGetUniqueId(&id) != collieSuccess) return false;
    std::vector<collieComm_t> comms(n, nullptr);
    std::vector<collieResult_t> rc(n, collieInternalError);
    onRanks(n, [&](int r) { rc[r] = collieCommInitRank(&comms[r], n, id, r); });
    bool ok = true;
    for (collieResult_t x : rc) ok = ok && x == collieSuccess;
    ok = ok && allreduceRanks(comms);
    for (collieComm_t c : comms) collieCommDestroy(c);
    return ok;
  });
}

TEST(InitDestroyCycles, SplitOfFiveIntoTwoColours) {
  const int n = 5;
  Comms parent(n);
  ASSERT_EQ(parent.result, collieSuccess) << collieGetLastError(nullptr);
  expectNoGrowth("collieCommSplit 5 -> 3 + 2", [&] {
    std::vector<collieComm_t> children(n, nullptr);
    std::vector<collieResult_t> rc(n, collieInternalError);
    onRanks(n, [&](int r) { rc[r] = collieCommSplit(parent[r], r % 2, r, &children[r], nullptr); });
    bool ok = true;
    for (collieResult_t x : rc) ok = ok && x == collieSuccess;
    std::vector<collieComm_t> even, odd;
    for (int r = 0; r < n; ++r) (r % 2 ? odd : even).push_back(children[r]);
    ok = ok && allreduceRanks(even) && allreduceRanks(odd);
    for (collieComm_t c : children) collieCommDestroy(c);
    return ok;
  });
}

// Each shrink also opens a connection from the first rank that stays to each of the others (Bootstrap::sendTo),
// besides the new communicator's rendezvous: none may stay open.
TEST(InitDestroyCycles, ShrinkOfFiveWithoutTwo) {
  const int n = 5;
  Comms parent(n);
  ASSERT_EQ(parent.result, collieSuccess) << collieGetLastError(nullptr);
  const int excluded[] = {3, 1};
  expectNoGrowth("collieCommShrink 5 -> 3", [&] {
    std::vector<collieComm_t> children(n, nullptr);
    std::vector<collieResult_t> rc(n, collieSuccess);
    onRanks(n, [&](int r) {
      if (r != 1 && r != 3) rc[r] = collieCommShrink(parent[r], excluded, 2, &children[r], nullptr, 0);
    });
    bool ok = true;
    for (collieResult_t x : rc) ok = ok && x == collieSuccess;
    ok = ok && allreduceRanks({children[0], children[2], children[4]});
    for (collieComm_t c : children) collieCommDestroy(c);
    return ok;
  });
}

}  // namespace
