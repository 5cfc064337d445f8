// The two things collie-bench runs, each on every worker thread of every
// process (Team::run): a collective sweep (driver.cc) and init (init_mode.cc).
#pragma once

namespace collie {
namespace bench {

class Team;
struct Options;

/// The nccl-tests-style table of one collective over the size sweep, for every
/// implementation asked for. Returns the process exit code (1 when #wrong > 0).
int runSweep(Team& team, int worker, const Options& o);

/// Communicator create/destroy times and footprint.
int runInit(Team& team, int worker, const Options& o);

}  // namespace bench
}  // namespace collie
