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

const std::vector<VarInfo>& knownVars() {
  static const std::vector<VarInfo> vars = {
      {"COLLIE_DEBUG", "log level: WARN (default), INFO or TRACE"},
      {"COLLIE_DEBUG_FILE", "write the log to this file instead of stderr (%h host, %p pid)"},
      {"COLLIE_DEVICE", "backend of new communicators: host, cuda or auto (default)"},
      {"COLLIE_TIMEOUT", "seconds any wait inside a collective may last (default 300)"},
      {"COLLIE_INIT_TIMEOUT", "seconds communicator init may last (default 60)"},
      {"COLLIE_SOCKET_IFNAME", "network interface the bootstrap listens on (default: loopback-free first, else lo)"},
      {"COLLIE_ROOT", "host:port of the rendezvous for environment init; rank 0 serves it"},
      {"COLLIE_SECRET", "32 hex digits shared by all ranks of an environment init (set by collie-run)"},
      {"COLLIE_RANK", "rank of this process for environment init"},
      {"COLLIE_WORLD_SIZE", "number of ranks for environment init"},
      {"COLLIE_LOCAL_RANK", "rank among the processes of this host (set by collie-run)"},
      {"COLLIE_HOSTID", "host identity override, to split one machine into fake nodes in tests"},
      {"COLLIE_FAKE_NODES",
       "test feature: split one machine into K fake nodes of consecutive world ranks (for mpirun; collie-run --nodes "
       "sets COLLIE_HOSTID instead)"},
      {"COLLIE_SLOT_BYTES", "bytes per receive slot of a host window (default 262144)"},
      {"COLLIE_SLOTS", "receive slots per peer of a host window (default 4)"},
      {"COLLIE_WINDOW_BYTES", "bound on the slot bytes of one rank's host window (default 16 MiB)"},
      {"COLLIE_PROTO",
       "CUDA backend and COLLIE_EMULATE_KERNELS: simple, ll (8-byte data+flag lines) or auto (default: ll up to 64 "
       "KiB)"},
      {"COLLIE_LL_SLOT_BYTES", "CUDA backend: bytes of one LL slot (default 16384; half carries data)"},
      {"COLLIE_LL_FLAG_PERIOD",
       "test setting: LL flags repeat after this many slices of a connection (a power of two from 4 x "
       "COLLIE_SLOTS, and 16 at least, to 2^15, the default), so that tests see them wrap"},
      {"COLLIE_PROGRAM_CACHE",
       "CUDA backend: uploaded programs (those too long for the launch parameters) kept for reuse before the least "
       "recently used are overwritten (default 256; also past 4 MiB of them)"},
      {"COLLIE_DEVICE_WINDOW_BYTES", "bound on the slot bytes of one rank's device window (default 32 MiB)"},
      {"COLLIE_CHANNELS",
       "channels per collective, 1..32: blocks on the GPU (default by SMs and ranks per GPU); on the host 1, more only "
       "to test the split"},
      {"COLLIE_DIRECT_READ_BYTES",
       "host backend, ranks that are threads of one process: the smallest send (bytes) a peer reads in place from "
       "the sender's buffer instead of through its slot (default 131072; 0: every send; negative: none)"},
      {"COLLIE_SPIN_POLLS",
       "host backend: polls a waiting rank makes before it yields its core (default 200; 30 when the ranks of a "
       "machine outnumber its CPUs)"},
      {"COLLIE_STAGE_HOST",
       "test feature: a host communicator runs its collectives through the staged path of CUDA communicators that "
       "span hosts, with memcpy for the copies"},
      {"COLLIE_GPU_REMOTE",
       "CUDA communicators spanning hosts: staged (default: host executor over pinned copies) or proxy (the kernels "
       "reach other hosts through the proxy thread; not yet run on a GPU)"},
      {"COLLIE_P2P",
       "CUDA backend: 0 makes device buffers go through pinned host memory (the staged path), as when a GPU cannot "
       "reach another of its host by P2P (default 1: peers' device memory directly)"},
      {"COLLIE_PROXY_HOST",
       "test feature: a host communicator reaches peers on other hosts through the proxy thread the GPU's kernels "
       "would use (executor/remote_proxy.h)"},
      {"COLLIE_EMULATE_KERNELS",
       "test feature: N > 0 makes a host communicator run the CUDA kernels' own code on the CPU, N threads per "
       "block (kernels/emulator.h)"},
      {"COLLIE_FAKE_CUDA_DEVICES",
       "fake-CUDA test builds (tests/fake_cuda): how many GPUs the fake runtime pretends to have (default 1)"},
      {"COLLIE_FAKE_CUDA_THREADS",
       "fake-CUDA test builds (kernels/fake_launch.cc): host threads per emulated block (default 2)"},
      {"COLLIE_FAKE_CUDA_P2P",
       "fake-CUDA test builds (tests/fake_cuda): 0 makes no two fake GPUs reach each other by P2P (default 1)"},
      {"COLLIE_FAKE_CUDA_QUEUES",
       "fake-CUDA test builds (tests/fake_cuda): N > 0 deals streams to N hardware queues in which a waiting "
       "kernel holds back the work behind it, as CUDA_DEVICE_MAX_CONNECTIONS queues do (default 0: none)"},
      {"COLLIE_KERNEL_TIMING",
       "CUDA backend (and COLLIE_EMULATE_KERNELS): 1 makes the kernels time their parts (setup, steps and the "
       "waiting in them, the first four steps one by one, drain, store); each communicator logs the means per "
       "block when it is destroyed (default 0)"},
      {"COLLIE_SYSTEM_FENCE",
       "CUDA backend (and COLLIE_EMULATE_KERNELS): 1 adds a full system-scope fence (membar.sys) before each "
       "Simple slice's release, as every post took until 2026-11-26, to measure what it costs (default 0)"},
      {"COLLIE_SYSTEM_SCOPE",
       "CUDA backend (and COLLIE_EMULATE_KERNELS): 1 releases and acquires every kernel flag at system scope, "
       "also between ranks that are threads of one process on one GPU (GPU scope there by default since "
       "2026-11-27), to measure what it costs (default 0)"},
      {"COLLIE_LL_SEPARATE_POSTS",
       "CUDA backend (and COLLIE_EMULATE_KERNELS): 1 posts the LL slices of a batch of small exchanges one by one, "
       "as until 2026-11-29, instead of in one pass of the block, to measure the difference (default 0)"},
      {"COLLIE_ALGO", "algorithm per collective, overriding the tuner: allreduce:ring;broadcast:binomial"},
      {"COLLIE_CHECK", "1: ranks compare each collective's call, type, op, count and root first (debugging)"},
      {"COLLIE_TEST_SEED", "seed of the random inputs of Collie's own tests (read by the tests, not the library)"},
      {"COLLIE_SOAK_SEED", "tests/unit/soak_test.cc: seed of its random cases (read by the test, not the library)"},
      {"COLLIE_SOAK_ITERS", "tests/unit/soak_test.cc: number of random cases"},
      {"COLLIE_SOAK_ONLY", "tests/unit/soak_test.cc: run only this iteration (a replay)"},
      {"COLLIE_SOAK_SECONDS", "tests/unit/soak_test.cc: time budget when COLLIE_SOAK_ITERS is not set"},
      {"COLLIE_SOAK_MEMORY", "tests/unit/soak_test.cc: host (default) or device buffers (CUDA communicators)"},
      {"COLLIE_TEST_TYPES", "tests/common/test_util.h: the types the sweeps loop over, all (default) or sizes"},
      {"CUDA_DEVICE_MAX_CONNECTIONS",
       "CUDA's hardware queues per GPU, read (never set) to warn when ranks sharing a GPU in one process outnumber "
       "them"},
      {"OMPI_COMM_WORLD_RANK", "OpenMPI's rank, used by environment init"},
      {"OMPI_COMM_WORLD_SIZE", "OpenMPI's size, used by environment init"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OpenMPI's local rank"},
      {"SLURM_PROCID", "Slurm's rank, used by environment init"},
      {"SLURM_NTASKS", "Slurm's size, used by environment init"},
      {"SLURM_LOCALID", "Slurm's local rank"},
  };
  return vars;
}

static bool isKnown(const char* name) {
  for (const VarInfo& v : knownVars())
    if (strcmp(v.name, name) == 0) return true;
  return false;
}

namespace {
std::mutex gFallbackMu;
std::map<std::string, std::string>& fallbacks() {
  static std::map<std::string, std::string> map;
  return map;
}
}  // namespace

void setFallback(const char* name, const std::string& value) {
  assert(isKnown(name) && "a fallback for an environment variable that is not listed in kEnvVars");
  std::lock_guard<std::mutex> lock(gFallbackMu);
  fallbacks()[name] = value;
}

std::optional<std::string> get(const char* name) {
  assert(isKnown(name) && "read an environment variable that is not listed in kEnvVars");
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
