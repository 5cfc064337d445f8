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
  ncclWindow_t win = reinterpret_cast<ncclWindow_t>(0x1);
  char buf[64];
  EXPECT(ncclCommWindowRegister(comms[0], buf, sizeof(buf), &win, NCCL_WIN_DEFAULT) == ncclInvalidUsage,
         "windows unsupported");
  EXPECT(win == nullptr, "no window handed out");
  EXPECT(std::string(ncclGetLastError(comms[0])).find("not supported by Collie") != std::string::npos,
         ncclGetLastError(comms[0]));
  ncclComm_t shrunk = comms[0];
  int exclude = 1;
  EXPECT(ncclCommShrink(comms[0], &exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT) == ncclInvalidUsage,
         "shrink unsupported");
  EXPECT(shrunk == nullptr, "no communicator handed out");
  // The pnccl names are the same functions.
  int version = 0;
  EXPECT(pncclGetVersion(&version) == ncclSuccess && version == 21903, "pncclGetVersion");
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
