// A randomized soak, ranks as threads (host backend; or CUDA, below). Each iteration draws
// one case from (seed, iteration) alone: a collective (the eight of
// runCollectiveCase, all-to-all-v, grouped send/recv), an algorithm registered
// for it or the tuner's choice, a type, an operator, a count (0, 1, odd, not
// dividing the rank count, large enough for several rounds), 1..8 ranks, in
// place or not, a root, and the slot geometry (default, tiny slots, tiny slots
// over 3 channels). Every result is compared with an independent reference.
//
//   COLLIE_TEST_SOAK_SEED      seed (default: from the clock; printed at start)
//   COLLIE_TEST_SOAK_ITERS     iterations (default 20000, about 40 s on 2 cores, cut at COLLIE_TEST_SOAK_SECONDS,
//                              default 45, so the ctest entry stays under a minute on a busy machine; when set,
//                              every iteration runs)
//   COLLIE_TEST_SOAK_ONLY      run this one iteration (a replay; fresh communicators instead of reused ones)
//   COLLIE_TEST_SOAK_MEMORY    host (default), or device: every buffer in GPU memory and every clique a CUDA
//                              communicator (skipped, saying why, without a usable GPU; scripts/fake_gpu.sh runs
//                              it on the fake CUDA runtime, tests/gpu/run.sh on a GPU)
//
// Other COLLIE_* settings apply to every communicator: ctest's soak_emulated runs the same soak on the CUDA
// kernels' own code (COLLIE_TEST_EMULATE_KERNELS) with LL flags that come round every 16 slices, and then also
// checks after every case that no LL line in the windows is old enough to pass for new.
//
// A failure prints the seed, the iteration, the full case and the command lines that replay it, with the
// COLLIE_* settings of the run.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "collie.h"
#include "common/collective_case.h"
#include "common/ll_lines.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_skip.h"

// Present when a sanitizer runtime is linked (weak: null otherwise).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

using collie::Collective;
using collie::test::Coll;
using collie::test::Comms;
using collie::test::Memory;
using collie::test::onRanks;
using collie::test::ScopedEnv;

// What a case may run: the eight collectives runCollectiveCase checks, then two with checks of their own here.
struct Kind {
  const char* name;
  Collective collective;
  Coll coll;  // for the first eight only
};
const Kind kKinds[] = {
    {"allreduce", Collective::kAllReduce, Coll::kAllReduce},
    {"reducescatter", Collective::kReduceScatter, Coll::kReduceScatter},
    {"allgather", Collective::kAllGather, Coll::kAllGather},
    {"broadcast", Collective::kBroadcast, Coll::kBroadcast},
    {"reduce", Collective::kReduce, Coll::kReduce},
    {"alltoall", Collective::kAllToAll, Coll::kAllToAll},
    {"gather", Collective::kGather, Coll::kGather},
    {"scatter", Collective::kScatter, Coll::kScatter},
    {"alltoallv", Collective::kAllToAllv, Coll::kAllReduce},
    {"sendrecv", Collective::kSendRecv, Coll::kAllReduce},
};
constexpr int kKindCount = sizeof(kKinds) / sizeof(kKinds[0]);
constexpr int kAllToAllv = 8, kSendRecv = 9;  // indices in kKinds

// Where the buffers live (COLLIE_TEST_SOAK_MEMORY): device memory makes every clique a CUDA communicator.
Memory gMemory = Memory::kHost;

// Slot geometry of a clique, fixed at init (COLLIE_SLOT_BYTES, COLLIE_SLOTS, COLLIE_CHANNELS).
enum Geometry { kDefaultSlots, kTinySlots, kTinySlotsThreeChannels, kGeometries };
const char* const kGeometryNames[] = {"default slots", "tiny slots (2 x 4 KiB)", "tiny slots over 3 channels"};

struct Case {
  int kind = 0;
  const collie::AlgorithmInfo* algo = nullptr;  // nullptr: the tuner's choice
  int nranks = 1;
  Geometry geometry = kDefaultSlots;
  collieDataType_t type = collieFloat32;
  collieRedOp_t op = collieSum;
  size_t count = 0;
  bool inPlace = false;
  int root = 0;
  uint64_t dataSeed = 0;  // inputs, and the splits of all-to-all-v and send/recv
};

std::string describe(const Case& c) {
  const Kind& k = kKinds[c.kind];
  char buf[512];
  snprintf(buf, sizeof(buf), "%s algorithm %s, %d ranks, %s, %s %s, count %zu, %s, root %d, data seed %" PRIu64, k.name,
           c.algo ? c.algo->name : "(tuner)", c.nranks, kGeometryNames[c.geometry], collie::typeName(c.type),
           collie::opName(c.op), c.count, c.inPlace ? "in place" : "out of place", c.root, c.dataSeed);
  return buf;
}

// The case of iteration `i`: a function of (seed, i) only, so one iteration replays alone.
Case drawCase(uint64_t seed, uint64_t i) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(i),
                    static_cast<uint32_t>(i >> 32)};
  std::mt19937_64 rng(seq);
  Case c;
  c.kind = static_cast<int>(rng() % kKindCount);
  const Kind& k = kKinds[c.kind];
  c.nranks = 1 + static_cast<int>(rng() % 8);
  const uint64_t g = rng() % 20;  // 60% default, 25% tiny, 15% tiny over 3 channels
  c.geometry = g < 12 ? kDefaultSlots : g < 17 ? kTinySlots : kTinySlotsThreeChannels;
  // An algorithm registered for the collective, or (one time in four) none: the tuner picks.
  std::vector<const collie::AlgorithmInfo*> algos;
  for (const collie::AlgorithmInfo& a : collie::algorithms())
    if (a.collective == k.collective && !a.mapsPeers) algos.push_back(&a);  // direct ones: not on the host
  if (!algos.empty() && rng() % 4 != 0) c.algo = algos[rng() % algos.size()];
  const auto& types = collie::test::allTypes();
  const auto& ops = collie::test::allOps();
  c.type = types[rng() % types.size()];
  c.op = ops[rng() % ops.size()];
  const bool reduces = c.kind < kAllToAllv && collie::test::collHasOp(k.coll);
  if (!reduces) c.op = collieSum;
  // Counts: 0 and 1, small odd-or-even, medium, and large enough for several rounds of
  // default slots. Block collectives pass a per-rank count: the large ones are cut by nranks.
  const uint64_t band = rng() % 100;
  size_t count = band < 6    ? 0
                 : band < 12 ? 1
                 : band < 45 ? 2 + rng() % 63
                 : band < 85 ? 65 + rng() % 4000
                             : 4065 + rng() % 66000;
  const bool blocks =
      c.kind >= kAllToAllv || (k.coll != Coll::kAllReduce && k.coll != Coll::kBroadcast && k.coll != Coll::kReduce);
  if (blocks && count > 4096) count /= static_cast<size_t>(c.nranks);
  c.count = count;
  c.inPlace = c.kind < kAllToAllv && collie::test::collHasInPlace(k.coll) && rng() % 2 == 0;
  c.root = static_cast<int>(rng() % static_cast<uint64_t>(c.nranks));
  c.dataSeed = rng();
  return c;
}

// The communicators of each (nranks, geometry) seen so far; the least recently used
// is destroyed beyond kMaxCliques, which bounds the shared memory held and exercises destroy.
class Cliques {
 public:
  static constexpr size_t kMaxCliques = 6;
  const Comms* get(int nranks, Geometry g) {
    const auto key = std::make_pair(nranks, static_cast<int>(g));
    auto it = cliques_.find(key);
    if (it == cliques_.end()) {
      if (cliques_.size() >= kMaxCliques) {
        auto oldest = cliques_.begin();
        for (auto c = cliques_.begin(); c != cliques_.end(); ++c)
          if (c->second.lastUse < oldest->second.lastUse) oldest = c;
        cliques_.erase(oldest);
      }
      // Tiny slots override the run's settings; the default geometry keeps them (fake_gpu.sh's COLLIE_CHANNELS).
      std::optional<ScopedEnv> slotBytes, slots, channels;
      if (g != kDefaultSlots) {
        slotBytes.emplace("COLLIE_SLOT_BYTES", "4096");
        slots.emplace("COLLIE_SLOTS", "2");
      }
      if (g == kTinySlotsThreeChannels) channels.emplace("COLLIE_CHANNELS", "3");
      ScopedEnv algo("COLLIE_ALGO", nullptr);  // chosen per call below
      Entry e;
      e.comms = std::make_unique<Comms>(nranks);
      if (e.comms->result != collieSuccess) return nullptr;
      it = cliques_.emplace(key, std::move(e)).first;
    }
    it->second.lastUse = ++clock_;
    return it->second.comms.get();
  }

 private:
  struct Entry {
    std::unique_ptr<Comms> comms;
    uint64_t lastUse = 0;
  };
  std::map<std::pair<int, int>, Entry> cliques_;
  uint64_t clock_ = 0;
};

// Sets every rank's algorithm for `c` as COLLIE_ALGO would at init (collieComm::algoOverrides,
// read on each call), so one clique serves every algorithm. nullptr: back to the tuner.
void chooseAlgorithm(const Comms& comms, Collective c, const collie::AlgorithmInfo* algo) {
  for (collieComm_t comm : comms.comms) {
    if (algo)
      comm->algoOverrides[c] = algo;
    else
      comm->algoOverrides.erase(c);
  }
}

// counts[i][j]: elements rank i sends to rank j; a quarter of them zero.
std::vector<std::vector<size_t>> randomSplit(int n, size_t maxCount, std::mt19937_64& rng) {
  std::vector<std::vector<size_t>> c(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n), 0));
  for (auto& row : c)
    for (size_t& v : row) v = rng() % 4 == 0 ? 0 : rng() % (maxCount + 1);
  return c;
}

// All-to-all-v with a random split, blocks in a shuffled order with gaps (which must stay poisoned).
std::string runAllToAllv(const Comms& comms, const Case& c) {
  const int n = comms.size();
  const size_t es = collie::typeSize(c.type);
  std::mt19937_64 rng(c.dataSeed);
  const auto counts = randomSplit(n, c.count, rng);
  std::vector<std::vector<size_t>> sc(n), sd(n), rc(n), rd(n);
  std::vector<std::vector<char>> in(n), out(n), want(n);
  auto place = [&](const std::vector<size_t>& cnt, std::vector<size_t>* d) {
    std::vector<size_t> order(cnt.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    d->assign(cnt.size(), 0);
    size_t at = 0;
    for (size_t i : order) {
      (*d)[i] = at;
      at += cnt[i] + rng() % 3;
    }
    return at;
  };
  for (int r = 0; r < n; ++r) {
    sc[r] = counts[static_cast<size_t>(r)];
    for (int j = 0; j < n; ++j) rc[r].push_back(counts[static_cast<size_t>(j)][static_cast<size_t>(r)]);
    const size_t inExtent = place(sc[r], &sd[r]), outExtent = place(rc[r], &rd[r]);
    in[r].resize(inExtent * es + 1);
    collie::test::fillInput(c.type, collieSum, r, c.dataSeed, in[r].data(), inExtent);
    out[r].resize(outExtent * es + 1);
    collie::test::poison(out[r].data(), out[r].size());
  }
  for (int r = 0; r < n; ++r) {
    want[r] = out[r];
    for (int j = 0; j < n; ++j)
      memcpy(want[r].data() + rd[r][j] * es, in[j].data() + sd[j][static_cast<size_t>(r)] * es, rc[r][j] * es);
  }
  const auto inCopy = in;
  std::vector<collieResult_t> res(n);
  collie::test::RankBuffers bufs(comms, gMemory);
  std::vector<void*> inAt(n), outAt(n);
  for (int r = 0; r < n; ++r) {
    inAt[r] = bufs.at(r, in[r]);
    outAt[r] = bufs.at(r, out[r]);
  }
  bufs.run(
      [&](int r, collieStream_t stream) {
        return collieAllToAllv(inAt[r], sc[r].data(), sd[r].data(), outAt[r], rc[r].data(), rd[r].data(), c.type,
                               comms[r], stream);
      },
      &res);
  const std::string err = bufs.finish();
  if (!err.empty()) return err;
  for (int r = 0; r < n; ++r) {
    if (res[r] != collieSuccess) return "rank " + std::to_string(r) + ": " + collieGetLastError(comms[r]);
    if (in[r] != inCopy[r]) return "rank " + std::to_string(r) + " modified sendbuff";
    if (out[r] != want[r]) return "rank " + std::to_string(r) + ": recvbuff differs from the reference";
  }
  return "";
}

// Grouped send/recv: each ordered pair exchanges 0..2 messages of random sizes (self included), all
// posted in one group per rank; messages of a pair must arrive in order.
std::string runSendRecv(const Comms& comms, const Case& c) {
  const int n = comms.size();
  const size_t es = collie::typeSize(c.type);
  std::mt19937_64 rng(c.dataSeed);
  // sizes[i][j]: the element counts of the messages rank i sends to rank j, in order.
  std::vector<std::vector<std::vector<size_t>>> sizes(n, std::vector<std::vector<size_t>>(n));
  for (auto& row : sizes)
    for (auto& msgs : row)
      for (uint64_t m = rng() % 3; m > 0; --m) msgs.push_back(rng() % 4 == 0 ? 0 : rng() % (c.count + 1));
  // One buffer per message on each side; the receiver's poisoned plus a byte past the end.
  std::vector<std::vector<std::vector<std::vector<char>>>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r].resize(n);
    recv[r].resize(n);
    for (int j = 0; j < n; ++j) {
      for (size_t m = 0; m < sizes[r][j].size(); ++m) {
        std::vector<char> b(sizes[r][j][m] * es);
        collie::test::fillInput(c.type, collieSum, r * 64 + j, c.dataSeed + m, b.data(), sizes[r][j][m]);
        send[r][j].push_back(std::move(b));
      }
      for (size_t m = 0; m < sizes[j][r].size(); ++m) {
        std::vector<char> b(sizes[j][r][m] * es + 1);
        collie::test::poison(b.data(), b.size());
        recv[r][j].push_back(std::move(b));
      }
    }
  }
  std::vector<collieResult_t> res(n);
  collie::test::RankBuffers bufs(comms, gMemory);
  // Where each message's buffer is for the call: [rank][peer][message]. A receive of 0 elements names no buffer.
  std::vector<std::vector<std::vector<void*>>> sendAt(n), recvAt(n);
  for (int r = 0; r < n; ++r) {
    sendAt[r].resize(n);
    recvAt[r].resize(n);
    for (int j = 0; j < n; ++j) {
      for (std::vector<char>& b : send[r][j]) sendAt[r][j].push_back(bufs.at(r, b));
      for (std::vector<char>& b : recv[r][j]) recvAt[r][j].push_back(b.size() == 1 ? nullptr : bufs.at(r, b));
    }
  }
  bufs.run(
      [&](int r, collieStream_t stream) {
        collieGroupStart();
        // Peers in a rank-dependent order: only the order within a pair is defined.
        for (int k = 0; k < n; ++k) {
          const int j = (r + k) % n;
          for (size_t m = 0; m < send[r][j].size(); ++m)
            collieSend(sendAt[r][j][m], send[r][j][m].size() / es, c.type, j, comms[r], stream);
          for (size_t m = 0; m < recv[r][j].size(); ++m)
            collieRecv(recvAt[r][j][m], (recv[r][j][m].size() - 1) / es, c.type, j, comms[r], stream);
        }
        return collieGroupEnd();
      },
      &res);
  const std::string err = bufs.finish();
  if (!err.empty()) return err;
  for (int r = 0; r < n; ++r) {
    if (res[r] != collieSuccess) return "rank " + std::to_string(r) + ": " + collieGetLastError(comms[r]);
    for (int j = 0; j < n; ++j)
      for (size_t m = 0; m < recv[r][j].size(); ++m) {
        const std::vector<char>& got = recv[r][j][m];
        const std::vector<char>& sent = send[j][r][m];
        if ((!sent.empty() && memcmp(got.data(), sent.data(), sent.size()) != 0) || got.back() != 0x7b)
          return "rank " + std::to_string(r) + ": message " + std::to_string(m) + " from rank " + std::to_string(j) +
                 " (" + std::to_string(sent.size() / es) + " elements) differs or overran";
      }
  }
  return "";
}

std::string runCase(const Comms& comms, const Case& c) {
  const Kind& k = kKinds[c.kind];
  if (k.collective != Collective::kSendRecv) chooseAlgorithm(comms, k.collective, c.algo);
  if (c.kind == kAllToAllv) return runAllToAllv(comms, c);
  if (c.kind == kSendRecv) return runSendRecv(comms, c);
  return collie::test::runCollectiveCase(comms, k.coll, c.type, c.op, c.count, c.inPlace, c.root, c.dataSeed, gMemory);
}

// The case being run, in words, for the crash handlers below: a crash (a signal, or a sanitizer
// report that ends the process) cannot reach the failure message of the loop.
char gCurrent[1024];

void printCurrent() {
  const ssize_t k = write(2, gCurrent, strnlen(gCurrent, sizeof(gCurrent)));
  (void)k;
}

struct sigaction gOldActions[NSIG];

// Prints the case, puts the previous handler back and lets the signal happen again there
// (a fault re-executes; an abort is raised anew), so ASan's or the default report follows.
void onCrash(int sig) {
  printCurrent();
  sigaction(sig, &gOldActions[sig], nullptr);
  if (sig == SIGABRT) raise(sig);
}

void installCrashHandlers() {
  struct sigaction sa {};
  sa.sa_handler = onCrash;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, &gOldActions[sig]);
  // Sanitizer reports end the process through their own exit path; the callback runs first.
  // GCC links ASan and UBSan as two shared runtimes, each with its own callback: set both.
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(printCurrent);
  for (const char* lib : {"libubsan.so.1", "libasan.so.8"}) {
    void* h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    if (void* f = dlsym(h, "__sanitizer_set_death_callback"))
      reinterpret_cast<void (*)(void (*)(void))>(f)(printCurrent);
    dlclose(h);
  }
}

uint64_t envU64(const char* name, uint64_t fallback, bool* set = nullptr) {
  const char* v = getenv(name);
  if (set) *set = v != nullptr;
  return v ? strtoull(v, nullptr, 0) : fallback;
}

// Whether the clique's host windows hold LL slots (the kernels emulated) whose flags come round often enough
// (COLLIE_TEST_LL_FLAG_PERIOD, as its window header says) for a look at every line's age after each case to be worth
// it (tests/common/ll_lines.h): a line kept too long is a fault even before a receiver takes it.
bool shortLLPeriod(const Comms& comms) {
  if (gMemory != Memory::kHost) return false;
  const collie::WindowLayout layout = collie::test::windowLayout(comms, 0);
  return layout.llSlotBytes > 0 && layout.llFlagPeriod <= 65536;
}

// The settings that say which iterations run: a replay line sets its own.
bool soakOwn(const char* setting) {
  for (const char* own :
       {"COLLIE_TEST_SOAK_SEED=", "COLLIE_TEST_SOAK_ITERS=", "COLLIE_TEST_SOAK_ONLY=", "COLLIE_TEST_SOAK_SECONDS="})
    if (strncmp(setting, own, strlen(own)) == 0) return true;
  return false;
}

// This binary, after the run's COLLIE_* settings but those: a replay needs both.
std::string replayCommand() {
  std::string cmd;
  for (char** e = environ; *e != nullptr; ++e)
    if (strncmp(*e, "COLLIE_", 7) == 0 && !soakOwn(*e)) cmd += std::string(*e) + " ";
  char buf[4096];
  const ssize_t k = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return cmd + (k > 0 ? std::string(buf, static_cast<size_t>(k)) : "soak_test");
}

TEST(Soak, RandomCasesMatchTheReference) {
  bool itersSet = false, onlySet = false;
  const uint64_t seed = envU64("COLLIE_TEST_SOAK_SEED",
                               static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()));
  const uint64_t iters = envU64("COLLIE_TEST_SOAK_ITERS", 20000, &itersSet);
  const uint64_t only = envU64("COLLIE_TEST_SOAK_ONLY", 0, &onlySet);
  const double budget = itersSet ? 1e30 : static_cast<double>(envU64("COLLIE_TEST_SOAK_SECONDS", 45));
  const char* memory = getenv("COLLIE_TEST_SOAK_MEMORY");
  if (memory != nullptr && strcmp(memory, "device") != 0 && strcmp(memory, "host") != 0)
    FAIL() << "COLLIE_TEST_SOAK_MEMORY must be host or device, not '" << memory << "'";
  gMemory = memory != nullptr && strcmp(memory, "device") == 0 ? Memory::kDevice : Memory::kHost;
  if (gMemory == Memory::kDevice) SKIP_WITHOUT_GPU();
  std::optional<ScopedEnv> device;
  if (gMemory == Memory::kDevice) device.emplace("COLLIE_DEVICE", "cuda");
  // No call may wait on the host before it returns (all-to-all-v and grouped send/recv too): on a GPU such a wait
  // can sit behind a peer's kernel that waits for this rank (docs/cuda-executor.md, "Launch state"). Counted on
  // the fake CUDA runtime only (RankBuffers::run).
  collie::test::ExpectNoHostWaits noHostWaits;
  const std::string self = replayCommand();
  // A deadlock fails its case with the description below instead of running into ctest's timeout.
  ScopedEnv timeout("COLLIE_TIMEOUT", getenv("COLLIE_TIMEOUT") ? getenv("COLLIE_TIMEOUT") : "30");
  printf("soak seed %" PRIu64 " (rerun with COLLIE_TEST_SOAK_SEED=%" PRIu64 "), %" PRIu64 " iterations%s\n", seed, seed,
         onlySet ? 1 : iters, itersSet || onlySet ? "" : " or until the time budget");
  fflush(stdout);
  installCrashHandlers();
  Cliques cliques;
  std::map<std::string, int> perKind;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t done = 0, tunedDirect = 0;
  for (uint64_t i = onlySet ? only : 0; i < (onlySet ? only + 1 : iters); ++i) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > budget) break;
    const Case c = drawCase(seed, i);
    snprintf(gCurrent, sizeof(gCurrent),
             "SOAK CRASH at iteration %" PRIu64 " of seed %" PRIu64 ": %s\n  replay: COLLIE_TEST_SOAK_SEED=%" PRIu64
             " COLLIE_TEST_SOAK_ONLY=%" PRIu64 " (or COLLIE_TEST_SOAK_ITERS=%" PRIu64 ") %s\n",
             i, seed, describe(c).c_str(), seed, i, i + 1, self.c_str());
    const Comms* comms = cliques.get(c.nranks, c.geometry);
    std::string err = comms ? runCase(*comms, c) : std::string("init failed: ") + collieGetLastError(nullptr);
    if (err.empty() && shortLLPeriod(*comms)) err = collie::test::staleLLLine(*comms);
    if (!err.empty()) {
      printf("SOAK FAILURE at iteration %" PRIu64 " of seed %" PRIu64
             ":\n  case: %s\n  error: %s\n"
             "  replay this case alone:  COLLIE_TEST_SOAK_SEED=%" PRIu64 " COLLIE_TEST_SOAK_ONLY=%" PRIu64
             " %s\n"
             "  replay the run up to it: COLLIE_TEST_SOAK_SEED=%" PRIu64 " COLLIE_TEST_SOAK_ITERS=%" PRIu64 " %s\n",
             i, seed, describe(c).c_str(), err.c_str(), seed, i, self.c_str(), seed, i + 1, self.c_str());
      fflush(stdout);
      FAIL() << "iteration " << i << " of seed " << seed << ": " << describe(c) << ": " << err;
    }
    ++perKind[kKinds[c.kind].name];
    ++done;
    // With COLLIE_DIRECT_TUNE=1 on device memory, some of the tuner's cases run on the direct kernels.
    const Collective coll = kKinds[c.kind].collective;
    if (c.algo == nullptr && c.nranks > 1 && coll != Collective::kSendRecv && coll != Collective::kAllToAllv &&
        (*comms)[0]->algorithmForCall(coll, c.count, c.type, c.op)->mapsPeers)
      ++tunedDirect;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string mix;
  for (const auto& kv : perKind) mix += " " + kv.first + " " + std::to_string(kv.second);
  printf("soak seed %" PRIu64 ": %" PRIu64 " cases exact in %.1f s;%s; the tuner's on direct kernels: %" PRIu64 "\n",
         seed, done, secs, mix.c_str(), tunedDirect);
  EXPECT_GT(done, 0u);
}

}  // namespace
