#include "base/env.h"

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "base/log.h"

extern char** environ;

namespace collie {
namespace env {

const char* className(VarClass c) {
  switch (c) {
    case VarClass::kUser:
      return "user";
    case VarClass::kDeveloper:
      return "developer";
    case VarClass::kTest:
      return "test";
  }
  return "?";
}

// One row per variable: name, class, default, what it does. The defaults repeat those of the code that reads
// each variable; the descriptions are one line each (collie-run wraps them). Changing a row changes
// docs/environment.md: regenerate it with scripts/env_doc.sh.
const std::vector<VarInfo>& knownVars() {
  constexpr VarClass kUser = VarClass::kUser, kDev = VarClass::kDeveloper, kTest = VarClass::kTest;
  static const std::vector<VarInfo> vars = {
      // ---- user: logging, backend, time limits
      {"COLLIE_DEBUG", kUser, "WARN", "log level: NONE, WARN, INFO or TRACE"},
      {"COLLIE_DEBUG_FILE", kUser, "stderr",
       "file the log is appended to; %h stands for the host name, %p for the pid"},
      {"COLLIE_DEVICE", kUser, "auto",
       "backend of new communicators: host, cuda or auto (cuda when a GPU is usable); config.backend overrides it"},
      {"COLLIE_TIMEOUT", kUser, "300",
       "seconds any wait inside a collective may last before the call fails; config.timeoutMs overrides it"},
      {"COLLIE_INIT_TIMEOUT", kUser, "60", "seconds communicator init may last; config.initTimeoutMs overrides it"},
      // ---- user: environment init (collieCommInitFromEnv) and the bootstrap
      {"COLLIE_SOCKET_IFNAME", kUser, "first non-loopback interface, else lo",
       "interfaces the bootstrap may listen on: comma-separated name prefixes, ^ in front to exclude them, = in "
       "front for exact names"},
      {"COLLIE_ROOT", kUser, "", "host:port of the rendezvous of environment init; rank 0 serves it"},
      {"COLLIE_SECRET", kUser, "",
       "32 hex digits all ranks of an environment init share, so that no other job joins it (collie-run sets it)"},
      {"COLLIE_RANK", kUser, "", "rank of this process in environment init (collie-run sets it)"},
      {"COLLIE_WORLD_SIZE", kUser, "", "number of ranks of environment init (collie-run sets it)"},
      {"COLLIE_LOCAL_RANK", kUser, "", "rank among the processes of this host (collie-run sets it)"},
      {"COLLIE_HOSTID", kUser, "the machine's identity",
       "host identity of this rank: ranks with different ones talk as if on different hosts (collie-run --nodes "
       "sets it)"},
      {"COLLIE_FAKE_NODES", kUser, "0",
       "K > 0 splits one machine into K fake nodes of consecutive world ranks (the nodes' traffic goes over UCX), "
       "for mpirun, which cannot give each rank a COLLIE_HOSTID of its own"},
      // ---- user: algorithms and checks
      {"COLLIE_ALGO", kUser, "the tuner's choice",
       "algorithm per collective, COLLECTIVE:ALGORITHM entries separated by ; or , (allreduce:ring;broadcast:"
       "binomial); ALGORITHM may be file:PATH, a program file (docs/program-files.md); the same on every rank"},
      {"COLLIE_CHECK", kUser, "0",
       "1: ranks compare each collective's call, type, op, count and root before running it (debugging)"},
      // ---- user: buffers and protocol
      {"COLLIE_SLOT_BYTES", kUser, "262144", "bytes of one receive slot of a window; the same on every rank"},
      {"COLLIE_SLOTS", kUser, "4", "receive slots per peer and channel of a window, 2..64; the same on every rank"},
      {"COLLIE_WINDOW_BYTES", kUser, "16777216",
       "bound on the slot bytes of one rank's host window; slots shrink to fit it"},
      {"COLLIE_DEVICE_WINDOW_BYTES", kUser, "33554432",
       "bound on the slot bytes of one rank's device window; slots shrink to fit it"},
      {"COLLIE_CHANNELS", kUser, "GPU: SMs / (2 x ranks per GPU), 1..16; host: 1",
       "channels per collective, 1..32: the blocks of each rank's kernel on a GPU; on the host more than 1 only "
       "tests the GPU's split of steps"},
      {"COLLIE_PROTO", kUser, "auto",
       "protocol of the CUDA kernels: simple, ll (8-byte lines of data and flag) or auto (ll for calls up to 64 "
       "KiB); the same on every rank"},
      {"COLLIE_LL_SLOT_BYTES", kUser, "16384",
       "bytes of one LL slot, 1024..65536 (half of them carry data); the same on every rank"},
      {"COLLIE_PROGRAM_CACHE", kUser, "256",
       "CUDA backend: programs too long for the launch parameters kept on the GPU for reuse (also at most 4 MiB "
       "of them); the least recently used are overwritten"},
      {"COLLIE_DIRECT_READ_BYTES", kUser, "131072",
       "host backend, ranks that are threads of one process: the smallest send a peer reads in place from the "
       "sender's buffer instead of through its slots (0: every send; negative: none)"},
      {"COLLIE_DIRECT_TUNE", kUser, "0",
       "CUDA backend: 1 lets the tuner choose the direct kernels (docs/cuda-executor.md) where every rank maps its "
       "peers' buffers and the call fits them; 0: only COLLIE_ALGO names them. The same on every rank"},
      {"COLLIE_DIRECT_STAGING", kUser, "8388608",
       "CUDA backend, ranks that are processes of one machine: bytes of each rank's staging buffer, through which "
       "the direct kernels copy a buffer outside every window (collieCommWindowRegister): half for the input, half "
       "for the output; 0: none"},
      {"COLLIE_DIRECT_ONE_LAUNCH", kUser, "0",
       "CUDA backend, every rank a thread of this process on one GPU: 1 makes one launch serve every rank of a "
       "direct_oneshot allreduce (rank 0 launches for all, its peers' streams ordered by events), so every rank "
       "must call from a thread of its own or inside one group; 0: a launch per rank. The same on every rank"},
      {"COLLIE_SPIN_POLLS", kUser, "200; 30 when the ranks of a machine outnumber its CPUs",
       "host backend: polls a waiting rank makes before it yields its core"},
      // ---- user: GPUs
      {"COLLIE_P2P", kUser, "1",
       "CUDA backend: 0 makes device buffers go through pinned host memory (the staged path), as for GPUs that "
       "cannot reach each other by P2P"},
      {"COLLIE_GPU_REMOTE", kUser, "staged",
       "CUDA communicators spanning hosts: staged (the host executor over pinned copies) or proxy (the kernels "
       "reach other hosts through the proxy thread; experimental)"},
      {"CUDA_DEVICE_MAX_CONNECTIONS", kUser, "8",
       "CUDA's hardware queues per GPU, read (never set) to warn when ranks sharing a GPU in one process "
       "outnumber them"},
      // ---- user: read from launchers by environment init
      {"OMPI_COMM_WORLD_RANK", kUser, "", "Open MPI's rank, read by environment init when COLLIE_RANK is unset"},
      {"OMPI_COMM_WORLD_SIZE", kUser, "", "Open MPI's number of ranks, read by environment init"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", kUser, "", "Open MPI's rank among the processes of this host"},
      {"SLURM_PROCID", kUser, "",
       "Slurm's rank, read by environment init when neither COLLIE_RANK nor Open MPI's is set"},
      {"SLURM_NTASKS", kUser, "", "Slurm's number of ranks, read by environment init"},
      {"SLURM_LOCALID", kUser, "", "Slurm's rank among the processes of this host"},

      // ---- developer: measurement switches; every rank must set them alike
      {"COLLIE_KERNEL_TIMING", kDev, "0",
       "CUDA backend and emulated kernels: 1 makes the kernels time their parts (setup, steps and the waiting in "
       "them, the first four steps one by one, drain, store), and the direct kernels their time and their wait "
       "for every peer to come; each communicator logs the means when destroyed"},
      {"COLLIE_DEV_SYSTEM_FENCE", kDev, "0",
       "CUDA backend and emulated kernels: 1 adds a full system-scope fence (membar.sys) before each Simple "
       "slice's release store, which needs none, to measure what the fence costs"},
      {"COLLIE_DEV_SYSTEM_SCOPE", kDev, "0",
       "CUDA backend and emulated kernels: 1 releases and acquires every kernel flag at system scope, also "
       "between ranks that are threads of one process on one GPU (GPU scope otherwise), to measure what the "
       "narrower scope saves"},
      {"COLLIE_DEV_LL_SEPARATE_POSTS", kDev, "0",
       "CUDA backend and emulated kernels: 1 posts the LL slices of a batch of small exchanges one by one instead "
       "of in one pass of the block, to measure what the one pass saves"},

      // ---- test: modes of the library that exist for tests
      {"COLLIE_TEST_EMULATE_KERNELS", kTest, "0",
       "N > 0 makes a host communicator run the CUDA kernels' own code on the CPU, N threads per block "
       "(kernels/emulator.h)"},
      {"COLLIE_TEST_STAGE_HOST", kTest, "0",
       "1 makes a host communicator run its collectives through the staged path of CUDA communicators that span "
       "hosts, with memcpy for the copies"},
      {"COLLIE_TEST_PROXY_HOST", kTest, "0",
       "1 makes a host communicator reach peers on other hosts through the proxy thread the GPU's kernels use "
       "(executor/remote_proxy.h)"},
      {"COLLIE_TEST_LL_FLAG_PERIOD", kTest, "32768",
       "LL flags repeat after this many slices of a connection (a power of two from 4 x COLLIE_SLOTS and 16, to "
       "32768), so that tests see them wrap"},
      // ---- test: the fake CUDA runtime (tests/fake_cuda) and the launchers of a fake-CUDA build
      {"COLLIE_TEST_FAKE_CUDA_DEVICES", kTest, "1", "fake-CUDA builds: how many GPUs the fake runtime has, 0..64"},
      {"COLLIE_TEST_FAKE_CUDA_THREADS", kTest, "2",
       "fake-CUDA builds: host threads per emulated block, 1..64 (kernels/fake_launch.cc)"},
      {"COLLIE_TEST_FAKE_CUDA_P2P", kTest, "1", "fake-CUDA builds: 0 makes no two fake GPUs reach each other by P2P"},
      {"COLLIE_TEST_FAKE_CUDA_QUEUES", kTest, "0",
       "fake-CUDA builds: N > 0 deals streams to N hardware queues in which a waiting kernel holds back the work "
       "behind it, as CUDA_DEVICE_MAX_CONNECTIONS queues do (0: a queue per stream)"},
      {"COLLIE_TEST_FAKE_CUDA_ALLOC_SYNC", kTest, "1",
       "fake-CUDA builds: 0 makes cudaMalloc and cudaHostAlloc return without waiting for the device"},
      {"COLLIE_TEST_FAKE_CUDA_POOLS", kTest, "1",
       "fake-CUDA builds: 0 makes the fake GPUs report no memory pools (cudaDevAttrMemoryPoolsSupported)"},
      {"COLLIE_TEST_FAKE_CUDA_PAGEABLE_MS", kTest, "2",
       "fake-CUDA builds: milliseconds a copy from pageable memory takes to land after the call returns"},
      // ---- test: Collie's own test programs (read by them, not by the library)
      {"COLLIE_TEST_SEED", kTest, "random, printed",
       "seed of the random inputs of the tests (tests/common/test_util.h)"},
      {"COLLIE_TEST_TYPES", kTest, "all",
       "the types the tests' sweeps loop over: all, or sizes (one per element size)"},
      {"COLLIE_TEST_SOAK_SEED", kTest, "random, printed", "tests/unit/soak_test.cc: seed of its random cases"},
      {"COLLIE_TEST_SOAK_ITERS", kTest, "20000", "tests/unit/soak_test.cc: number of random cases"},
      {"COLLIE_TEST_SOAK_ONLY", kTest, "", "tests/unit/soak_test.cc: run only this case (a replay)"},
      {"COLLIE_TEST_SOAK_SECONDS", kTest, "45",
       "tests/unit/soak_test.cc: time budget when COLLIE_TEST_SOAK_ITERS is unset"},
      {"COLLIE_TEST_SOAK_MEMORY", kTest, "host",
       "tests/unit/soak_test.cc: host or device buffers (device: CUDA communicators)"},
  };
  return vars;
}

const VarInfo* find(const char* name) {
  for (const VarInfo& v : knownVars())
    if (strcmp(v.name, name) == 0) return &v;
  return nullptr;
}

static bool isKnown(const char* name) { return find(name) != nullptr; }

namespace {
std::mutex gFallbackMu;
std::map<std::string, std::string>& fallbacks() {
  static std::map<std::string, std::string> map;
  return map;
}
}  // namespace

void setFallback(const char* name, const std::string& value) {
  assert(isKnown(name) && "a fallback for an environment variable that is not in knownVars()");
  std::lock_guard<std::mutex> lock(gFallbackMu);
  fallbacks()[name] = value;
}

std::optional<std::string> get(const char* name) {
  if (!isKnown(name)) {
    assert(false && "read an environment variable that is not in knownVars()");
    return std::nullopt;
  }
  const char* v = getenv(name);
  if (v != nullptr && *v != '\0') return std::string(v);
  std::lock_guard<std::mutex> lock(gFallbackMu);
  auto it = fallbacks().find(name);
  if (it == fallbacks().end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// Both parsers want the whole text: its end, not its first NUL (a std::string may hold one).
bool parseInt(const std::string& text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long x = strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || end != text.c_str() + text.size()) return false;
  *out = x;
  return true;
}

bool parseDouble(const std::string& text, double* out) {
  char* end = nullptr;
  const double x = strtod(text.c_str(), &end);
  if (end == text.c_str() || end != text.c_str() + text.size()) return false;
  *out = x;
  return true;
}

int64_t getInt(const char* name, int64_t fallback, bool* bad) {
  if (bad) *bad = false;
  std::optional<std::string> v = get(name);
  if (!v) return fallback;
  int64_t x = 0;
  if (!parseInt(*v, &x)) {
    if (bad) *bad = true;
    COLLIE_WARN("%s=%s is not an integer; using %lld", name, v->c_str(), static_cast<long long>(fallback));
    return fallback;
  }
  return x;
}

double getDouble(const char* name, double fallback) {
  std::optional<std::string> v = get(name);
  if (!v) return fallback;
  double x = 0;
  if (!parseDouble(*v, &x)) {
    COLLIE_WARN("%s=%s is not a number; using %g", name, v->c_str(), fallback);
    return fallback;
  }
  return x;
}

void warnUnknownOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (char** e = environ; e && *e; ++e) {
      if (strncmp(*e, "COLLIE_", 7) != 0) continue;
      std::string name(*e, strcspn(*e, "="));
      if (!isKnown(name.c_str())) COLLIE_WARN("unknown environment variable %s is ignored", name.c_str());
    }
  });
}

}  // namespace env
}  // namespace collie
