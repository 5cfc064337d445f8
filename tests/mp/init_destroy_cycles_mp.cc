// Communicators made by unique id across processes, created and destroyed
// many times, must leave nothing behind in any rank: file descriptors,
// shared-memory segments (names and mappings), resident memory beyond a fixed
// slack. One long-lived communicator from the launcher's environment carries
// each cycle's unique id from rank 0 (whose process runs the id's rendezvous
// root) to the others, as an NCCL program would over MPI. Each cycle runs one
// allreduce on the new communicator. Every rank prints its figures and exits
// non-zero when something grew.
//   init_destroy_cycles_mp [cycles]     (default 1000; under collie-run)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "collie.h"
#include "common/resource_usage.h"

namespace {

constexpr int kWarmup = 50;          // as in tests/unit/init_destroy_cycles_test.cc, which says why
constexpr long kRssSlackKiB = 1024;  // likewise

// One cycle: a fresh id from rank 0, every rank joins, allreduces its rank, destroys.
bool cycle(collieComm_t world, int rank, int n) {
  collieUniqueId id{};
  if (rank == 0 && collieGetUniqueId(&id) != collieSuccess) {
    fprintf(stderr, "rank %d: collieGetUniqueId: %s\n", rank, collieGetLastError(nullptr));
    return false;
  }
  if (collieBroadcast(&id, &id, sizeof(id), collieUint8, 0, world, nullptr) != collieSuccess) {
    fprintf(stderr, "rank %d: id broadcast: %s\n", rank, collieGetLastError(world));
    return false;
  }
  collieComm_t comm = nullptr;
  if (collieCommInitRank(&comm, n, id, rank) != collieSuccess) {
    fprintf(stderr, "rank %d: collieCommInitRank: %s\n", rank, collieGetLastError(nullptr));
    return false;
  }
  int v = rank;
  const bool ok =
      collieAllReduce(&v, &v, 1, collieInt32, collieSum, comm, nullptr) == collieSuccess && v == n * (n - 1) / 2;
  if (!ok) fprintf(stderr, "rank %d: allreduce gave %d: %s\n", rank, v, collieGetLastError(comm));
  return collieCommDestroy(comm) == collieSuccess && ok;
}

}  // namespace

int main(int argc, char** argv) {
  const int cycles = argc > 1 ? atoi(argv[1]) : 1000;
  collieComm_t world = nullptr;
  if (collieCommInitFromEnv(&world, nullptr) != collieSuccess) {
    fprintf(stderr, "init failed: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  collieCommUserRank(world, &rank);
  collieCommCount(world, &n);
  const std::set<std::string> shmBefore = collie::test::shmNames();
  const collie::test::Usage start = collie::test::sampleUsage();
  for (int i = 0; i < kWarmup; ++i)
    if (!cycle(world, rank, n)) return 1;
  const collie::test::Usage base = collie::test::sampleUsage();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < cycles; ++i)
    if (!cycle(world, rank, n)) {
      fprintf(stderr, "rank %d: cycle %d failed\n", rank, i);
      return 1;
    }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const collie::test::Usage end = collie::test::sampleUsage();
  // Every rank's cycles are over before any looks for names left in /dev/shm.
  collieBarrier(world, nullptr);
  const std::set<std::string> lingering = collie::test::lingeringShmNames(shmBefore);
  printf(
      "rank %d/%d: %d collieCommInitRank cycles in %.1f s (%.2f ms each) after %d warm-up; fds %d -> %d -> %d, "
      "collie shm mappings %d -> %d -> %d, new /dev/shm/collie-* names left %zu, RSS %ld -> %ld -> %ld KiB\n",
      rank, n, cycles, secs, cycles ? 1e3 * secs / cycles : 0.0, kWarmup, start.fds, base.fds, end.fds, start.shmMaps,
      base.shmMaps, end.shmMaps, lingering.size(), start.rss, base.rss, end.rss);
  int failures = 0;
  auto fail = [&](const char* what) {
    fprintf(stderr, "FAIL rank %d: %s\n", rank, what);
    ++failures;
  };
  if (end.fds != base.fds) fail("file descriptors grew");
  if (end.shmMaps != start.shmMaps) fail("shared-memory windows still mapped");
  if (!lingering.empty()) fail(("left in /dev/shm: " + *lingering.begin()).c_str());
  if (!collie::test::kAddressSanitizer && end.rss > base.rss + kRssSlackKiB) fail("resident memory grew");
  collieCommDestroy(world);
  return failures ? 1 : 0;
}
