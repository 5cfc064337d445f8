// An implementation under test: Collie (one per algorithm), or a baseline
// (NCCL loaded at run time, OpenMPI). Each holds the communicators of one
// worker's ranks and issues one call on all of them; the driver times and
// checks every implementation the same way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/buffers.h"
#include "bench/cases.h"

namespace collie {
namespace bench {

class Team;
struct Options;

/// One call on every rank of a worker: per local rank its case and buffers.
struct Call {
  bool inPlace = false;
  std::vector<const Case*> cases;
  std::vector<const void*> send;
  std::vector<void*> recv;
};

class Impl {
 public:
  void setMemory(MemKind k) { mem_ = k; }
  virtual ~Impl() = default;
  /// Column-group title: "collie", "collie:ring", "nccl", "mpi".
  const std::string& label() const { return label_; }
  MemKind mem() const { return mem_; }
  bool baseline() const { return baseline_; }

  /// Why this implementation cannot run `c` (in place or not); empty when it can.
  virtual std::string unsupported(const Case& c, bool inPlace) const = 0;
  /// Issues the call on every local rank (one group call when there are several).
  /// Returns an error sentence, or "" on success.
  virtual std::string issue(const Call& call) = 0;
  /// Waits for the work issued so far (device streams); host calls are done on return.
  virtual std::string sync() { return ""; }
  /// Times `iters` calls captured as CUDA graphs of `perGraph` calls; false when
  /// this implementation has no graphs (host), so the caller times plain calls.
  virtual bool graphSeconds(const Call&, int /*iters*/, int /*perGraph*/, double* /*sec*/, std::string* /*err*/) {
    return false;
  }
  /// Seconds of `iters` calls made in a plain loop straight to the library,
  /// with nothing else per iteration; negative when not offered.
  virtual double bareSeconds(const Call&, int /*iters*/, std::string* /*err*/) { return -1; }
  /// The most bytes one local rank's program reads and writes in memory for `call`
  /// (algorithms/memory_traffic.h); negative when not known (baselines).
  virtual double trafficBytes(const Call&) { return -1; }
  /// The algorithm this implementation runs for `call` (its first local rank's choice); "" when not known.
  virtual std::string algorithmName(const Call&) { return ""; }

 protected:
  // Set by the factories below.
  std::string label_;
  MemKind mem_ = MemKind::kHost;
  bool baseline_ = false;
};

/// Collie with `algo`: "" (COLLIE_ALGO and the tuner as they are), "auto" (the
/// tuner), or an algorithm name of the collective. Collective over the team:
/// every worker of every process calls it in the same order.
std::unique_ptr<Impl> makeCollieImpl(Team& team, int worker, const Options& o, const std::string& algo,
                                     std::string* err);

/// The algorithm list --algo asks for (names of the registry, "auto"), or an error.
std::vector<std::string> collieAlgorithms(const Options& o, std::string* err);

/// NCCL through dlopen("libnccl.so.2"). ncclUnavailable() says why it cannot
/// run here ("" when it can): no usable GPU, or no library.
std::string ncclUnavailable();
std::unique_ptr<Impl> makeNcclImpl(Team& team, int worker, const Options& o, std::string* err);
/// NCCL's version as "2.19.3", or "" when not loaded.
std::string ncclVersion();
/// Init-mode timing of NCCL: ncclCommInitRank of every local rank, then destroy.
/// Returns false with *err set on failure.
bool ncclInitOnce(Team& team, int worker, double* initSec, double* destroySec, double* deviceBytes, std::string* err);

/// OpenMPI (built with COLLIE_WITH_MPI): the MPI world's glue and the baseline.
bool mpiBuilt();
std::string mpiUnavailable(const Team& team);
std::unique_ptr<Impl> makeMpiImpl(Team& team, int worker, const Options& o, std::string* err);
std::string mpiVersion();

}  // namespace bench
}  // namespace collie
