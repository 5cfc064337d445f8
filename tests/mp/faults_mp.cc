// One rank of a job in which one rank (the victim) fails on purpose; run by
// tests/mp/faults_test.sh, which starts the ranks itself (collie-run would stop
// the survivors as soon as one rank dies). Every survivor must return an error
// from its collective within COLLIE_TIMEOUT plus a margin (never hang), and
// destroy its communicator promptly.
//
//   faults_mp MODE VICTIM
//   before  the victim is killed (SIGKILL) right after init, before any collective
//   during  the victim is killed while allreduces of 4 MiB run back to back
//   after   the victim is killed after a collective all ranks completed
//   never   the victim stays alive but never calls the collective (its peers time out)
//   exit    the victim returns from main after a collective, without destroying
//   init    only init: the script kills the rendezvous root (rank 0) meanwhile
//   shrink  as after; then each survivor shrinks the communicator without the victim
//           (collieCommShrink, COLLIE_SHRINK_ABORT) and allreduces over the new one
//   chain   as before, with a ring (COLLIE_ALGO) of 4 ranks and a long COLLIE_TIMEOUT: only the victim's successor
//           waits on it, each other survivor waits on a survivor, which stays alive 6 s after its call failed, and
//           still every survivor must fail within 2 s (executor/protocol.h, kFailedOffset), not when the survivor
//           it waits on exits, nor after COLLIE_TIMEOUT
//   mismatch the victim's allreduce has one element more: every survivor must fail with
//           collieInvalidUsage within 2 s, from the signatures slices carry (executor/protocol.h),
//           not after COLLIE_TIMEOUT and never with a result
//
// Prints one line per outcome; exit code 0 when this rank behaved as required.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double envSeconds(const char* name, double fallback) {
  const char* v = getenv(name);
  return v != nullptr ? atof(v) : fallback;
}

collieResult_t allreduce(collieComm_t comm, std::vector<float>* buf) {
  return collieAllReduce(buf->data(), buf->data(), buf->size(), collieFloat32, collieSum, comm, nullptr);
}

// A survivor's failing call: the right kind of error, in time, and a prompt destroy.
int survivorVerdict(int rank, const char* what, collieResult_t rc, double took, collieComm_t comm, double bound,
                    bool mismatch, double linger = 0) {
  printf("rank %d: %s returned %s after %.2f s: %s\n", rank, what, collieGetErrorString(rc), took,
         rc == collieSuccess ? "" : collieGetLastError(comm));
  fflush(stdout);
  // Alive a while longer, its communicator too: a peer waiting on this rank must learn of the failure from the
  // rank's window, not from its process being gone.
  std::this_thread::sleep_for(std::chrono::duration<double>(linger));
  const Clock::time_point d = Clock::now();
  collieCommDestroy(comm);
  const double destroy = since(d);
  printf("rank %d: destroy took %.2f s\n", rank, destroy);
  fflush(stdout);
  if (mismatch) bound = 2;
  const bool ok = (mismatch ? rc == collieInvalidUsage : rc == collieRemoteError || rc == collieTimeout) &&
                  took <= bound && destroy < 5;
  if (!ok)
    printf("rank %d: FAIL (error %s within %.0f s and a destroy under 5 s expected)\n", rank,
           mismatch ? "invalid usage" : "remote/timeout", bound);
  return ok ? 0 : 1;
}

// A survivor of mode "shrink": its failing call as in survivorVerdict, then a communicator without the victim,
// whose allreduce must give the count of survivors in every element.
int shrinkAndGoOn(int rank, int victim, const char* what, collieResult_t rc, double took, collieComm_t comm,
                  double bound) {
  printf("rank %d: %s returned %s after %.2f s\n", rank, what, collieGetErrorString(rc), took);
  if ((rc != collieRemoteError && rc != collieTimeout) || took > bound) {
    printf("rank %d: FAIL (error remote/timeout within %.0f s expected)\n", rank, bound);
    return 1;
  }
  int n = 0;
  collieCommCount(comm, &n);
  collieComm_t child = nullptr;
  const Clock::time_point s = Clock::now();
  const collieResult_t shrunk = collieCommShrink(comm, &victim, 1, &child, nullptr, COLLIE_SHRINK_ABORT);
  printf("rank %d: shrink without rank %d returned %s after %.2f s %s\n", rank, victim, collieGetErrorString(shrunk),
         since(s), shrunk == collieSuccess ? "" : collieGetLastError(comm));
  if (shrunk != collieSuccess) return 1;
  int newRank = -1, m = 0;
  collieCommUserRank(child, &newRank);
  collieCommCount(child, &m);
  std::vector<float> buf(4096, 1.0f);
  const collieResult_t again = allreduce(child, &buf);
  bool right = again == collieSuccess && m == n - 1 && newRank == (rank < victim ? rank : rank - 1);
  for (float v : buf) right = right && v == static_cast<float>(m);
  printf("rank %d: now rank %d of %d; allreduce %s, %s\n", rank, newRank, m, collieGetErrorString(again),
         right ? "every element right" : "FAIL: wrong rank, size or sums");
  const collieResult_t d1 = collieCommDestroy(child), d2 = collieCommDestroy(comm);
  return right && d1 == collieSuccess && d2 == collieSuccess ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: faults_mp before|chain|during|after|never|exit|init|shrink|mismatch VICTIM\n");
    return 2;
  }
  const std::string mode = argv[1];
  const int victim = atoi(argv[2]);
  const double timeoutSec = envSeconds("COLLIE_TIMEOUT", 300);
  const double initTimeoutSec = envSeconds("COLLIE_INIT_TIMEOUT", 60);
  setvbuf(stdout, nullptr, _IOLBF, 0);

  collieComm_t comm = nullptr;
  const Clock::time_point initStart = Clock::now();
  const collieResult_t init = collieCommInitFromEnv(&comm, nullptr);
  if (mode == "init") {
    // The root died during init: every surviving rank fails within the init timeout.
    const double took = since(initStart);
    printf("init returned %s after %.2f s: %s\n", collieGetErrorString(init), took,
           init == collieSuccess ? "" : collieGetLastError(nullptr));
    if (init == collieSuccess) collieCommDestroy(comm);
    return init != collieSuccess && took <= initTimeoutSec + 5 ? 0 : 1;
  }
  if (init != collieSuccess) {
    printf("init failed: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  int rank = 0;
  collieCommUserRank(comm, &rank);
  const bool isVictim = rank == victim;
  std::vector<float> buf(mode == "during" ? (1 << 20) : mode == "mismatch" && isVictim ? 1025 : 1024, 1.0f);
  const double bound = mode == "chain" ? 2 : timeoutSec + 5;

  if ((mode == "before" || mode == "chain") && isVictim) raise(SIGKILL);
  if (mode == "never" && isVictim) {
    printf("rank %d: alive, not calling\n", rank);
    std::this_thread::sleep_for(std::chrono::duration<double>(timeoutSec + 3));
    collieCommDestroy(comm);
    return 0;
  }
  if (mode == "after" || mode == "exit" || mode == "shrink") {
    const collieResult_t rc = allreduce(comm, &buf);
    if (rc != collieSuccess) {
      printf("rank %d: the first allreduce failed: %s\n", rank, collieGetLastError(comm));
      return 1;
    }
    if (isVictim) {
      printf("rank %d: leaving after one allreduce (%s)\n", rank, mode.c_str());
      if (mode == "after" || mode == "shrink") raise(SIGKILL);
      return 0;  // "exit": no collieCommDestroy; the process ends with the communicator alive
    }
    // Let the victim go first, so the next call finds it gone.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  if (mode == "during" && isVictim) {
    // Dies at a random moment while the allreduces below run.
    std::thread([] {
      std::mt19937 rng(static_cast<unsigned>(getpid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 400));
      raise(SIGKILL);
    }).detach();
  }
  const Clock::time_point start = Clock::now();
  for (int iter = 0;; ++iter) {
    const Clock::time_point callStart = Clock::now();
    const collieResult_t rc = allreduce(comm, &buf);
    if (rc != collieSuccess) {
      const std::string what = "allreduce #" + std::to_string(iter) + " (" + mode + ")";
      if (mode == "shrink") return shrinkAndGoOn(rank, victim, what.c_str(), rc, since(callStart), comm, bound);
      return survivorVerdict(rank, what.c_str(), rc, since(callStart), comm, bound, mode == "mismatch",
                             mode == "chain" ? 6 : 0);
    }
    for (float& v : buf) v = 1.0f;  // keep values small and exact
    if (mode != "during" || since(start) > 2 * timeoutSec + 30) {
      printf("rank %d: FAIL: allreduce #%d succeeded without the victim (%s)\n", rank, iter, mode.c_str());
      collieCommDestroy(comm);
      return 1;
    }
  }
}
