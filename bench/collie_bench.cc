// collie-bench: the nccl-tests-compatible benchmark, Collie side by side with
// NCCL, OpenMPI and the memory-copy limit.
//
//   collie-bench allreduce -np 4 -b 8 -e 64M -f 2            nccl-tests' table, 4 local ranks
//   collie-bench allreduce -np 4 --vs mpi --limit --plot a.svg
//   collie-bench alltoallv -np 8 --traffic moe:4096,2,16
//   collie-bench init -np 8                                  communicator create/destroy and footprint
//
// Where each part lives:
//   options.cc        the command line                 launch.cc       -np, joining a launcher, the Team
//   cases.cc          collectives, sizes, busbw         check.cc        inputs and the #wrong check
//   driver.cc         the table driver (timing)         init_mode.cc    `init`
//   impl_collie.cc    Collie (per algorithm)            baseline_nccl.cc, baseline_mpi.cc   the baselines
//   traffic.cc        alltoallv traffic matrices        limit.cc        memory-copy bandwidth
//   buffers.cc        host / device buffers             report.cc, output_*.cc   table, JSON, CSV, SVG
#include <cstdio>
#include <memory>

#include "bench/driver.h"
#include "bench/launch.h"
#include "bench/options.h"

int main(int argc, char** argv) {
  using namespace collie::bench;
  Options o;
  int rc = parseOptions(argc, argv, &o);
  if (rc >= 0) return rc;
  rc = launchIfAsked(o);
  if (rc >= 0) return rc;
  std::string err;
  std::unique_ptr<Team> team = Team::join(o, &err);
  if (!team) {
    fprintf(stderr, "collie-bench: %s\n", err.c_str());
    return 1;
  }
  rc = team->run([&](int worker) { return o.initMode ? runInit(*team, worker, o) : runSweep(*team, worker, o); });
  team.reset();
  return rc;
}
