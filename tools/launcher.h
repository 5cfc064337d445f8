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
};

/// Starts opts.nprocs processes of opts.argv. Each child gets COLLIE_RANK,
/// COLLIE_WORLD_SIZE, COLLIE_LOCAL_RANK, COLLIE_ROOT=127.0.0.1:<free port> and a
/// fresh random COLLIE_SECRET (32 hex digits), plus opts.extraEnv. Output lines
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
