// The local launcher behind collie-run and `collie-bench -np N`: starts N
// processes of one command on this machine with the environment that
// collieCommInitFromEnv reads.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace collie {
namespace launcher {

struct Options {
  int nprocs = 1;
  std::vector<std::string> argv;                              // program and its arguments
  std::vector<std::pair<std::string, std::string>> extraEnv;  // set in every child
  bool prefixOutput = true;                                   // "[r] " before each line of rank r
  double killGraceSec = 3.0;                                  // SIGTERM -> SIGKILL delay
  int nodes = 0;  // > 0: split the ranks into this many fake nodes (COLLIE_HOSTID), node-major
};

/// The fake node of `rank` of `nprocs` split into `nodes`: floor(rank * nodes / nprocs),
/// so nodes hold consecutive ranks and differ in size by at most one.
inline int fakeNode(int rank, int nprocs, int nodes) {
  return static_cast<int>(static_cast<long long>(rank) * nodes / nprocs);
}

/// Starts opts.nprocs processes of opts.argv. Each child gets COLLIE_RANK,
/// COLLIE_WORLD_SIZE, COLLIE_LOCAL_RANK, COLLIE_ROOT=127.0.0.1:<free port> and a
/// fresh random COLLIE_SECRET (32 hex digits), plus opts.extraEnv; with
/// opts.nodes, COLLIE_HOSTID=node<k> (k = fakeNode()) and COLLIE_LOCAL_RANK
/// counted within the node. Output lines
/// of rank r (stdout and stderr kept apart) are prefixed with "[r] " when
/// prefixOutput. SIGINT, SIGTERM and SIGHUP received by the launcher are
/// forwarded to every child. When a rank exits non-zero or dies from a signal,
/// the others get SIGTERM, then SIGKILL after killGraceSec.
/// Returns 0 when every rank exited 0; otherwise the exit code of the first rank
/// that failed (128 + signal number if it died from a signal); 127 when the
/// program cannot be started.
int run(const Options& opts);

}  // namespace launcher
}  // namespace collie
