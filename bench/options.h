// collie-bench's command line: the subcommand, nccl-tests' flags with their
// meaning, and collie-bench's own long options. Parsing only; nothing here
// starts processes or touches a communicator.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/cases.h"
#include "collie.h"

namespace collie {
namespace bench {

/// How per-rank times become the one figure of a row (nccl-tests' -a).
enum class Average { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

struct Options {
  std::string mode;  // a collective's name, or "init"
  Coll coll = Coll::kAllReduce;
  bool initMode = false;

  // Ranks.
  int nprocs = 0;      // -np: start this many local processes (0: join a launcher, or run one process)
  int threads = 1;     // -t: threads per process
  int perThread = 1;   // -g: ranks per thread (driven through group calls)
  std::string mpirun;  // --mpirun: mpirun used to relaunch for --vs mpi

  // Sweep.
  size_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  size_t increment = 0;
  int iters = 20, warmup = 5;
  bool check = true;
  int root = 0;
  Average average = Average::kMax;
  bool blocking = false;  // -z: wait for each call (device backends)
  int graphIters = 0;     // -G: iterations per CUDA graph (device backends)
  int reps = 1;           // --reps: timed loops per figure; the median's time, the p90 beside it
  std::vector<collieDataType_t> types = {collieFloat32};
  std::vector<collieRedOp_t> ops = {collieSum};

  // What runs.
  collieBackend_t backend = collieBackendAuto;
  bool backendSet = false;  // --backend given; otherwise COLLIE_DEVICE decides
  std::string algo;         // --algo: "" (environment as is), a name, "auto", or "all"
  bool vsNccl = false, vsMpi = false;
  bool limit = false;
  bool bare = false;
  std::string traffic = "uniform";
  bool seedSet = false;
  unsigned long long seed = 0;

  // Output.
  std::string jsonPath, csvPath, plotPath, jsonlPath;
  bool progress = false;
  bool summary = false;  // --summary: a few lines after the table (output_summary.cc)

  // The command as typed, for reports; and the arguments a relaunch passes on (no -np).
  std::vector<std::string> argv;
  std::string launchedAs;  // the user's command, passed on by -np to the ranks it starts
  std::vector<std::string> passOn;

  int ranksPerProcess() const { return threads * perThread; }
};

/// Parses argv into *o. Returns -1 to go on; otherwise an exit code (0 after
/// --help, 2 after a usage error, whose reason is printed to stderr).
int parseOptions(int argc, char** argv, Options* o);

/// "1 KiB", "64 MiB": sizes as people read them.
std::string humanBytes(double bytes);

}  // namespace bench
}  // namespace collie
