// How collie-bench gets its ranks: -np starts local processes of itself
// (through the collie-run launcher, or under mpirun when MPI is compared);
// under collie-run, mpirun or Slurm it joins the job. A Team is this process's
// view of the job: processes x threads (-t) x ranks per thread (-g), and the
// few collective helpers the benchmark itself needs (barrier, broadcast of a
// unique id or a seed, reductions of times and error counts). Processes talk
// through a one-rank-per-process Collie communicator, or through MPI when the
// job was started by mpirun without a Collie rendezvous.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/options.h"
#include "collie.h"

namespace collie {
namespace bench {

/// Starts the job's processes when -np asks for them and no launcher did.
/// Returns -1 when this process should run the benchmark itself, otherwise the
/// job's exit code.
int launchIfAsked(const Options& o);

enum class RedKind { kSum, kMax, kMin };

class Team {
 public:
  /// Joins the job this process belongs to; on failure *err says why.
  static std::unique_ptr<Team> join(const Options& o, std::string* err);
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  int procRank() const { return procRank_; }
  int nprocs() const { return nprocs_; }
  int threads() const { return threads_; }
  int perThread() const { return perThread_; }
  int nranks() const { return nprocs_ * threads_ * perThread_; }
  /// This process's index among the processes of its host (picks GPUs).
  int localIndex() const { return localIndex_; }
  /// Global rank of local rank j of `worker`.
  int rankOf(int worker, int j) const { return (procRank_ * threads_ + worker) * perThread_ + j; }
  bool isRoot(int worker) const { return procRank_ == 0 && worker == 0; }
  /// The GPU of local rank j of `worker` among `ndev`: ranks share GPUs round-robin, as in nccl-tests.
  int deviceOf(int worker, int j, int ndev) const {
    return ndev <= 0 ? 0 : ((localIndex_ * threads_ + worker) * perThread_ + j) % ndev;
  }
  /// MPI_Init ran: processes talk through MPI, and MPI baselines can run.
  bool mpiActive() const { return mpi_; }
  /// How the job was started, for reports: "collie-run", "mpirun", "slurm" or "single process".
  const std::string& launcher() const { return launcher_; }

  // Collective over every worker of every process; each worker calls it once.
  void barrier(int worker);
  /// Global rank 0's bytes to everyone.
  void broadcast(int worker, void* data, size_t bytes);
  /// Element-wise over workers (each gives one contribution) and processes.
  void allreduce(int worker, double* v, int n, RedKind kind);

  /// Runs fn(worker) on threads() threads, worker 0 on the calling thread;
  /// returns the largest exit code.
  int run(const std::function<int(int)>& fn);

 private:
  Team() = default;
  void localBarrier();
  void crossAllreduce(double* v, int n, RedKind kind);
  void crossBroadcast(void* data, size_t bytes);

  int procRank_ = 0, nprocs_ = 1, threads_ = 1, perThread_ = 1, localIndex_ = 0;
  bool mpi_ = false;
  std::string launcher_ = "single process";
  collieComm_t procComm_ = nullptr;  // one rank per process, host backend

  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  unsigned long long generation_ = 0;
  std::vector<std::vector<double>> slots_;  // per worker, for allreduce
  std::vector<double> result_;
  std::vector<char> bytes_;
};

/// "4 ranks (4 processes)", "8 ranks (2 processes x 2 threads x 2 ranks per thread)".
std::string rankLayout(const Team& team);

// The MPI world (baseline_mpi.cc; without COLLIE_WITH_MPI mpiInit fails and the rest are never called).
bool mpiInit(int* rank, int* size, std::string* err);
void mpiFinalize();
void mpiBroadcast(void* data, size_t bytes);
void mpiAllreduce(double* v, int n, RedKind kind);

/// Prints "collie-bench: <msg>" to stderr and ends the process at once: a rank
/// that cannot go on must not leave its peers waiting inside a collective
/// (the launcher stops them when one rank fails).
[[noreturn]] void die(const std::string& msg);

}  // namespace bench
}  // namespace collie
