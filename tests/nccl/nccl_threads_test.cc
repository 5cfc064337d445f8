// A C++ program written only against nccl.h, in the shapes PyTorch and
// benchmark drivers use NCCL: one thread per rank initialised from a unique
// id, a watchdog thread polling ncclCommGetAsyncError in a tight loop while
// collectives run, a rank that never arrives (the others time out, the
// watchdog sees it, ncclCommAbort cleans up), ncclCommSplit with
// NCCL_SPLIT_NOCOLOR from rank threads, every rank's init queued by one
// thread inside a group, configs from older and newer headers, and the calls
// of later NCCL versions. Run with COLLIE_TIMEOUT=2 (ctest sets it) so the
// late-rank case ends quickly.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef NCCL_COLLIE
// Built against NVIDIA's nccl.h (tests/nccl/nccl_abi_test.sh runs it on Collie's libnccl.so.2): Collie's
// additions to the header by value, as such a binary receives them.
#define NCCL_API_MAGIC 0xcafebeef
static const ncclResult_t ncclTimeout = static_cast<ncclResult_t>(8);
#endif

namespace {

int failures = 0;

#define NCCLCHECK(call)                                                                                    \
  do {                                                                                                     \
    ncclResult_t r_ = (call);                                                                              \
    if (r_ != ncclSuccess) {                                                                               \
      std::fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
                   ncclGetLastError(nullptr));                                                             \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

#define EXPECT(cond, what)                                                                                \
  do {                                                                                                    \
    if (!(cond)) {                                                                                        \
      std::fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, std::string(what).c_str()); \
      ++failures;                                                                                         \
    }                                                                                                     \
  } while (0)

template <typename F>
void onThreads(int n, F f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(f, r);
  for (std::thread& t : threads) t.join();
}

// One communicator per rank thread, from one unique id (the multi-process pattern, in threads).
std::vector<ncclComm_t> initByThreads(int n) {
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  std::vector<ncclComm_t> comms(n, nullptr);
  onThreads(n, [&](int r) { NCCLCHECK(ncclCommInitRank(&comms[r], n, id, r)); });
  return comms;
}

void watchdogWhileCollectivesRun() {
  const int n = 4, iterations = 300;
  std::vector<ncclComm_t> comms = initByThreads(n);
  std::atomic<bool> done{false};
  std::atomic<long> polls{0};
  std::atomic<int> bad{0};
  std::thread watchdog([&] {
    while (!done.load()) {
      for (ncclComm_t c : comms) {
        ncclResult_t state = ncclInternalError;
        if (ncclCommGetAsyncError(c, &state) != ncclSuccess || state != ncclSuccess) bad.fetch_add(1);
        polls.fetch_add(1);
      }
    }
  });
  std::vector<int> wrong(n, 0);
  onThreads(n, [&](int r) {
    std::vector<float> buf(257);
    for (int it = 0; it < iterations; ++it) {
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>(r + it + static_cast<int>(i));
      NCCLCHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comms[r], nullptr));
      for (size_t i = 0; i < buf.size(); ++i)
        if (buf[i] != static_cast<float>(n * (it + static_cast<int>(i)) + n * (n - 1) / 2)) ++wrong[r];
    }
  });
  done.store(true);
  watchdog.join();
  for (int r = 0; r < n; ++r) EXPECT(wrong[r] == 0, "rank " + std::to_string(r) + " got wrong sums");
  EXPECT(bad.load() == 0, "the watchdog saw an error on healthy communicators");
  EXPECT(polls.load() > 0, "the watchdog never polled");
  for (ncclComm_t c : comms) NCCLCHECK(ncclCommDestroy(c));
}

void lateRankTimesOutAndAbortCleansUp() {
  ncclComm_t comms[2];
  NCCLCHECK(ncclCommInitAll(comms, 2, nullptr));
  std::atomic<bool> seen{false};
  std::atomic<bool> stop{false};
  std::thread watchdog([&] {
    while (!stop.load()) {
      ncclResult_t state = ncclSuccess;
      NCCLCHECK(ncclCommGetAsyncError(comms[0], &state));
      if (state != ncclSuccess && state != ncclInProgress) {
        seen.store(true);
        return;
      }
    }
  });
  // Rank 1 never calls: rank 0's allreduce must end with an error, not hang.
  float x = 1;
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t rc = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], nullptr);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT(rc == ncclTimeout, std::string("the lone allreduce returned ") + ncclGetErrorString(rc));
  EXPECT(waited < 60, "the wait is bounded by COLLIE_TIMEOUT");
  EXPECT(std::string(ncclGetLastError(comms[0])).find("waiting on rank 1") != std::string::npos,
         std::string("the sentence names the late rank: ") + ncclGetLastError(comms[0]));
  for (int i = 0; i < 2000 && !seen.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop.store(true);
  watchdog.join();
  EXPECT(seen.load(), "the watchdog saw the broken communicator");
  float y = 2;
  EXPECT(ncclAllReduce(&y, &y, 1, ncclFloat32, ncclSum, comms[0], nullptr) != ncclSuccess,
         "a broken communicator refuses further calls");
  NCCLCHECK(ncclCommAbort(comms[0]));
  NCCLCHECK(ncclCommAbort(comms[1]));
}

void splitFromRankThreads() {
  const int n = 5;
  std::vector<ncclComm_t> comms = initByThreads(n);
  std::vector<ncclComm_t> child(n, nullptr);
  std::vector<int> rank(n, -1), size(n, -1), sum(n, -1);
  onThreads(n, [&](int r) {
    // Ranks 0..3 in two colours by r / 2, rank 4 out; key orders by descending parent rank.
    const int colour = r == 4 ? NCCL_SPLIT_NOCOLOR : r / 2;
    NCCLCHECK(ncclCommSplit(comms[r], colour, 10 - r, &child[r], nullptr));
    if (child[r] == nullptr) return;
    NCCLCHECK(ncclCommUserRank(child[r], &rank[r]));
    NCCLCHECK(ncclCommCount(child[r], &size[r]));
    sum[r] = r;
    NCCLCHECK(ncclAllReduce(&sum[r], &sum[r], 1, ncclInt32, ncclSum, child[r], nullptr));
  });
  EXPECT(child[4] == nullptr, "NCCL_SPLIT_NOCOLOR gives NULL");
  for (int r = 0; r < 4; ++r) {
    EXPECT(size[r] == 2, "two ranks per colour");
    EXPECT(rank[r] == (r % 2 == 0 ? 1 : 0), "rank " + std::to_string(r) + " became " + std::to_string(rank[r]));
    EXPECT(sum[r] == (r / 2 == 0 ? 1 : 5), "allreduce over the child");
    NCCLCHECK(ncclCommDestroy(child[r]));
  }
  for (ncclComm_t c : comms) NCCLCHECK(ncclCommDestroy(c));
}

void oneThreadInitsEveryRankInAGroup() {
  const int n = 6;
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  std::vector<ncclComm_t> comms(n, nullptr);
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) NCCLCHECK(ncclCommInitRank(&comms[r], n, id, r));
  NCCLCHECK(ncclGroupEnd());
  std::vector<double> v(n);
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    v[r] = 0.5 * r;
    NCCLCHECK(ncclAllReduce(&v[r], &v[r], 1, ncclFloat64, ncclMax, comms[r], nullptr));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) EXPECT(v[r] == 2.5, "max over the group-initialised clique");
  for (ncclComm_t c : comms) NCCLCHECK(ncclCommDestroy(c));
}

// Configs made by other headers: 2.14's ended after blocking, later ones grow at the end.
void configsOfOtherVersions() {
  struct Older {
    size_t size;
    unsigned int magic, version;
    int blocking;
  };
  struct Newer {
    ncclConfig_t base;
    int trafficClass;
    const char* commName;
  };
  for (int which = 0; which < 3; ++which) {
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    Older older = {sizeof(Older), NCCL_API_MAGIC, NCCL_VERSION(2, 14, 3), 1};
    Newer newer = {NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_UNDEF_INT, "named"};
    newer.base.size = sizeof(Newer);
    newer.base.cgaClusterSize = 2;  // accepted, no effect
    ncclConfig_t tooOld = NCCL_CONFIG_INITIALIZER;
    tooOld.version = NCCL_VERSION(2, 13, 0);
    ncclConfig_t* config = which == 0 ? reinterpret_cast<ncclConfig_t*>(&older)
                                      : (which == 1 ? reinterpret_cast<ncclConfig_t*>(&newer) : &tooOld);
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRankConfig(&comm, 1, id, 0, config);
    if (which < 2) {
      EXPECT(rc == ncclSuccess, std::string("config of another header: ") + ncclGetLastError(nullptr));
      if (comm != nullptr) NCCLCHECK(ncclCommDestroy(comm));
    } else {
      EXPECT(rc == ncclInvalidArgument, "a version before configs existed is refused");
    }
  }
}

// Whether `rc` is ncclInvalidUsage and comm's last error says Collie does not support the call.
bool refusedAsUnsupported(ncclResult_t rc, ncclComm_t comm) {
  return rc == ncclInvalidUsage &&
         std::string(ncclGetLastError(comm)).find("not supported by Collie") != std::string::npos;
}

// The host functions of NCCL 2.28's device API (nccl_device.h, not in nccl.h): a binary built against 2.28 names
// them, so the library must export them. Declared here by their C names and layouts.
struct DeviceTeam {
  int nRanks, rank, stride;
};
extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* requirements, void* devComm);
extern "C" int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
extern "C" DeviceTeam ncclTeamWorld(ncclComm_t comm);
extern "C" DeviceTeam ncclTeamLsa(ncclComm_t comm);
extern "C" DeviceTeam ncclTeamRail(ncclComm_t comm);
extern "C" int ncclTeamRankToWorld(ncclComm_t comm, DeviceTeam team, int rank);
extern "C" int ncclTeamRankToLsa(ncclComm_t comm, DeviceTeam team, int rank);

void deviceApiHostCalls(const std::vector<ncclComm_t>& comms) {
  char requirements[256] = {}, devComm[1024] = {};
  EXPECT(refusedAsUnsupported(ncclDevCommCreate(comms[0], requirements, devComm), comms[0]),
         std::string("ncclDevCommCreate: ") + ncclGetLastError(comms[0]));
  EXPECT(ncclLLA2ACalcSlots(1024, 16) == 0, "no LL all-to-all slots");
  const DeviceTeam world = ncclTeamWorld(comms[1]), lsa = ncclTeamLsa(comms[1]), rail = ncclTeamRail(comms[1]);
  EXPECT(world.nRanks == 2 && world.rank == 1 && world.stride == 1, "the world team is every rank");
  EXPECT(lsa.nRanks == 1 && lsa.rank == 0 && lsa.stride == 1, "each rank is its own LSA team");
  EXPECT(rail.nRanks == 2 && rail.rank == 1, "the rail team is the world");
  EXPECT(ncclTeamRankToWorld(comms[1], world, 0) == 0 && ncclTeamRankToWorld(comms[0], ncclTeamWorld(comms[0]), 1) == 1,
         "world ranks of the world team");
  EXPECT(ncclTeamRankToLsa(comms[1], world, 1) == 0 && ncclTeamRankToLsa(comms[1], world, 0) == -1,
         "only the rank itself is in its LSA team");
}

#if defined(NCCL_COLLIE) || NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
// ncclGroupSimulateEnd closes the group and runs none of its calls; a bad simInfo leaves the group open.
void groupSimulateEndRunsNothing(const std::vector<ncclComm_t>& comms) {
  std::vector<int> v = {3, 4};
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) NCCLCHECK(ncclAllReduce(&v[r], &v[r], 1, ncclInt32, ncclSum, comms[r], nullptr));
  const ncclResult_t rc = ncclGroupSimulateEnd(&sim);
  const std::string why = ncclGetLastError(nullptr);
  EXPECT(rc == ncclInvalidUsage && why.find("2 operations were dropped without running") != std::string::npos, why);
  EXPECT(sim.estimatedTime == NCCL_UNDEF_FLOAT, "no estimate is made up");
  EXPECT(v[0] == 3 && v[1] == 4, "nothing of the simulated group ran");
  // The group is closed: this one runs at its own ncclGroupEnd.
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) NCCLCHECK(ncclAllReduce(&v[r], &v[r], 1, ncclInt32, ncclSum, comms[r], nullptr));
  EXPECT(ncclGroupSimulateEnd(&bad) == ncclInvalidArgument, "a simInfo without its initializer is refused");
  NCCLCHECK(ncclGroupEnd());
  EXPECT(v[0] == 7 && v[1] == 7, "the group a bad simInfo left open ran at ncclGroupEnd");
}
#endif

#if defined(NCCL_COLLIE) || NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
void callsOf229AndLater(const std::vector<ncclComm_t>& comms) {
  uint64_t bytes = 1;
  NCCLCHECK(ncclCommMemStats(comms[0], ncclStatGpuMemTotal, &bytes));
  EXPECT(bytes == 0, "a host communicator holds no device memory");
  EXPECT(ncclCommMemStats(comms[0], static_cast<ncclCommMemStat_t>(7), &bytes) == ncclInvalidArgument, "bad stat");
  ncclUniqueId id;
  ncclComm_t grown = comms[0];
  EXPECT(refusedAsUnsupported(ncclCommGetUniqueId(comms[0], &id), comms[0]), "get unique id");
  EXPECT(refusedAsUnsupported(ncclCommGrow(comms[0], 3, nullptr, -1, &grown, nullptr), comms[0]) && grown == nullptr,
         "grow");
  EXPECT(refusedAsUnsupported(ncclCommSuspend(comms[0], NCCL_SUSPEND_MEM), comms[0]), "suspend");
  EXPECT(refusedAsUnsupported(ncclCommResume(comms[0]), comms[0]), "resume");
  void* user = &bytes;
  EXPECT(ncclWinGetUserPtr(comms[0], nullptr, &user) == ncclInvalidArgument && user == nullptr, "no such window");
  int x = 0;
  ncclWaitSignalDesc_t desc = {1, 1, 0, 0};
  EXPECT(refusedAsUnsupported(ncclPutSignal(&x, 1, ncclInt32, 1, nullptr, 0, 0, 0, 0, comms[0], nullptr), comms[0]),
         "put");
  EXPECT(refusedAsUnsupported(ncclSignal(1, 0, 0, 0, comms[0], nullptr), comms[0]), "signal");
  EXPECT(refusedAsUnsupported(ncclWaitSignal(1, &desc, comms[0], nullptr), comms[0]), "wait signal");
}
#endif

void callsOfLaterVersions() {
  const int n = 2;
  ncclUniqueId ids[2];
  NCCLCHECK(ncclGetUniqueId(&ids[0]));
  NCCLCHECK(ncclGetUniqueId(&ids[1]));
  std::vector<ncclComm_t> comms(n, nullptr);
  onThreads(n, [&](int r) { NCCLCHECK(ncclCommInitRankScalable(&comms[r], n, r, 2, ids, nullptr)); });
  int sum = 0;
  std::vector<int> v = {3, 4};
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) NCCLCHECK(ncclAllReduce(&v[r], &v[r], 1, ncclInt32, ncclSum, comms[r], nullptr));
  NCCLCHECK(ncclGroupEnd());
  sum = v[0] + v[1];
  EXPECT(sum == 14, "allreduce on a communicator from ncclCommInitRankScalable");
  // Windows are Collie's (collieCommWindowRegister; bookkeeping on the host backend): every rank registers.
  std::vector<ncclWindow_t> wins(n, nullptr);
  char bufs[2][64];
  onThreads(n, [&](int r) {
    NCCLCHECK(ncclCommWindowRegister(comms[r], bufs[r], sizeof(bufs[r]), &wins[r], NCCL_WIN_COLL_SYMMETRIC));
  });
  EXPECT(wins[0] != nullptr && wins[1] != nullptr, "windows handed out");
#if defined(NCCL_COLLIE) || NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  void* user = nullptr;
  NCCLCHECK(ncclWinGetUserPtr(comms[1], wins[1], &user));
  EXPECT(user == bufs[1], "a window's user pointer");
#endif
  EXPECT(ncclCommWindowRegister(comms[0], bufs[0], sizeof(bufs[0]), nullptr, NCCL_WIN_DEFAULT) == ncclInvalidArgument,
         "a window needs its handle");
  onThreads(n, [&](int r) { NCCLCHECK(ncclCommWindowDeregister(comms[r], wins[r])); });
  EXPECT(ncclCommWindowDeregister(comms[0], wins[0]) == ncclInvalidArgument, "a window deregistered twice");
  // Rank 0 goes on alone: ncclCommShrink is collieCommShrink (tests/unit/shrink_test.cc has the many-rank cases).
  ncclComm_t shrunk = nullptr;
  int exclude = 1;
  EXPECT(ncclCommShrink(comms[0], &exclude, 1, &shrunk, nullptr, 7) == ncclInvalidArgument && shrunk == nullptr,
         "shrink with unknown flags");
  NCCLCHECK(ncclCommShrink(comms[0], &exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT));
  int count = 0, alone = 5;
  NCCLCHECK(ncclCommCount(shrunk, &count));
  NCCLCHECK(ncclAllReduce(&alone, &alone, 1, ncclInt32, ncclSum, shrunk, nullptr));
  EXPECT(count == 1 && alone == 5, "allreduce on a communicator from ncclCommShrink");
  NCCLCHECK(ncclCommDestroy(shrunk));
  deviceApiHostCalls(comms);
#if defined(NCCL_COLLIE) || NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  groupSimulateEndRunsNothing(comms);
#endif
#if defined(NCCL_COLLIE) || NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  callsOf229AndLater(comms);
#endif
  // The pnccl names are the same functions.
  int version = 0;
  EXPECT(pncclGetVersion(&version) == ncclSuccess && version == 21903, "pncclGetVersion");
  // Revoked, a communicator reports success and takes no more collectives (tests/unit/revoke_test.cc has more).
  EXPECT(ncclCommRevoke(comms[0], 3) == ncclInvalidArgument, "revoke with unknown flags");
  NCCLCHECK(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT));
  ncclResult_t async = ncclInternalError;
  NCCLCHECK(ncclCommGetAsyncError(comms[0], &async));
  EXPECT(async == ncclSuccess, "a revoked communicator is quiescent");
  EXPECT(ncclAllReduce(&v[0], &v[0], 1, ncclInt32, ncclSum, comms[0], nullptr) == ncclInvalidUsage,
         "no collective after revoke");
  for (ncclComm_t c : comms) NCCLCHECK(ncclCommDestroy(c));
}

}  // namespace

int main() {
  watchdogWhileCollectivesRun();
  lateRankTimesOutAndAbortCleansUp();
  splitFromRankThreads();
  oneThreadInitsEveryRankInAGroup();
  configsOfOtherVersions();
  callsOfLaterVersions();
  if (failures != 0) {
    std::printf("nccl_threads_test: %d failures\n", failures);
    return 1;
  }
  std::printf("PASS: nccl_threads_test\n");
  return 0;
}
