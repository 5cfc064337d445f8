// One rank of a job whose ranks run allreduces of 16 MiB back to back until
// one fails; tests/mp/ucx_kill_test.sh kills a rank (SIGKILL) meanwhile.
// A survivor passes when its failing call returns collieRemoteError or
// collieTimeout within COLLIE_TIMEOUT (plus a margin): no hang. Exit codes:
// 0 pass, 1 wrong error or too late, 2 no error at all within the time limit.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "collie.h"

int main() {
  using Clock = std::chrono::steady_clock;
  const char* t = getenv("COLLIE_TIMEOUT");
  const double timeoutSec = t != nullptr ? atof(t) : 300;
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm, nullptr) != collieSuccess) {
    fprintf(stderr, "init failed: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  collieCommUserRank(comm, &rank);
  collieCommCount(comm, &n);
  std::vector<float> buf(4 << 20, 1.0f);
  const Clock::time_point start = Clock::now();
  for (int iter = 0;; ++iter) {
    const Clock::time_point callStart = Clock::now();
    const collieResult_t rc =
        collieAllReduce(buf.data(), buf.data(), buf.size(), collieFloat32, collieSum, comm, nullptr);
    const double took = std::chrono::duration<double>(Clock::now() - callStart).count();
    if (rc != collieSuccess) {
      const bool expected = rc == collieRemoteError || rc == collieTimeout;
      const bool inTime = took <= timeoutSec + 5;
      printf("rank %d: iteration %d returned %s after %.2f s (COLLIE_TIMEOUT %.0f s): %s\n", rank, iter,
             collieGetErrorString(rc), took, timeoutSec, collieGetLastError(comm));
      const Clock::time_point destroyStart = Clock::now();
      collieCommDestroy(comm);
      const double destroy = std::chrono::duration<double>(Clock::now() - destroyStart).count();
      printf("rank %d: destroy of the broken communicator took %.2f s\n", rank, destroy);
      return expected && inTime && destroy < 5 ? 0 : 1;
    }
    if (iter == 0) printf("rank %d: looping\n", rank);
    fflush(stdout);
    for (float& v : buf) v = 1.0f;  // keep values small and exact
    if (std::chrono::duration<double>(Clock::now() - start).count() > 2 * timeoutSec + 30) {
      printf("rank %d: no error after %d iterations\n", rank, iter + 1);
      return 2;
    }
  }
}
