#include "core/group.h"

#include <exception>
#include <utility>

#include "core/api_checks.h"
#include "core/comm.h"
#include "core/errors.h"
#include "core/group_workers.h"

namespace collie {
namespace group {

namespace {

struct Queued {
  collieComm_t comm;
  std::function<Status()> run;  // empty for p2p
  P2pOp p2p;
};

struct State {
  int depth = 0;
  std::vector<std::function<Status()>> inits;
  std::vector<Queued> queue;
};

thread_local State tState;

// Runs one communicator's queue in issue order, batching runs of p2p operations.
Status runQueue(collieComm_t comm, const std::vector<Queued>& ops) {
  // Pinned while its calls run, so an abort from another thread waits for them to return (core/comm.h).
  const api::CommPin pin(comm);
  if (!pin.held())
    return Status::error(collieInvalidUsage,
                         "collieGroupEnd: a communicator used in the group was destroyed before it");
  std::vector<P2pOp> batch;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status();
    Status st = runP2p(comm, batch);
    batch.clear();
    return st;
  };
  for (const Queued& q : ops) {
    if (!q.run) {
      batch.push_back(q.p2p);
      continue;
    }
    COLLIE_RETURN_IF_ERROR(flush());
    COLLIE_RETURN_IF_ERROR(q.run());
  }
  return flush();
}

}  // namespace

bool active() { return tState.depth > 0; }

void enqueue(collieComm_t comm, std::function<Status()> run) {
  tState.queue.push_back(Queued{comm, std::move(run), P2pOp{}});
}

void enqueueP2p(collieComm_t comm, const P2pOp& op) { tState.queue.push_back(Queued{comm, nullptr, op}); }

void enqueueInit(std::function<Status()> init) { tState.inits.push_back(std::move(init)); }

namespace {

// Runs every job at once, each on a worker of its own (core/group_workers.h), into results[i]; an exception is
// job i's internal error.
Status runJobs(const std::vector<std::function<Status()>>& jobs, std::vector<Status>* results) {
  results->assign(jobs.size(), Status());
  std::vector<std::function<void()>> tasks;
  for (size_t i = 0; i < jobs.size(); ++i)
    tasks.emplace_back([&jobs, results, i] {
      try {
        (*results)[i] = jobs[i]();
      } catch (const std::exception& e) {
        (*results)[i] = Status::error(collieInternalError, "internal error: %s", e.what());
      }
    });
  return runTogether(tasks);
}

// The group's communicator inits, concurrently: each waits for the others.
// Every init runs even when one fails, so no peer waits for one that never starts.
Status runInits(std::vector<std::function<Status()>> inits) {
  if (inits.empty()) return Status();
  if (inits.size() == 1) return inits[0]();
  std::vector<Status> results;
  COLLIE_RETURN_IF_ERROR(runJobs(inits, &results));
  for (const Status& st : results)
    if (!st.ok()) return st;
  return Status();
}

}  // namespace

Status start() {
  ++tState.depth;
  return Status();
}

namespace {

// Closes one level of the thread's group. At the outermost it hands the queued calls to `queue` and runs the
// queued inits (*outermost true); an inner level leaves both in place. `unmatched`: the error with no group open.
Status closeLevel(const char* unmatched, bool* outermost, std::vector<Queued>* queue) {
  *outermost = false;
  if (tState.depth == 0) return Status::error(collieInvalidUsage, "%s", unmatched);
  if (--tState.depth > 0) return Status();
  *outermost = true;
  *queue = std::move(tState.queue);
  tState.queue.clear();
  std::vector<std::function<Status()>> inits = std::move(tState.inits);
  tState.inits.clear();
  return runInits(std::move(inits));
}

}  // namespace

Status endWithoutRunning(size_t* dropped) {
  std::vector<Queued> queue;
  bool outermost = false;
  Status st = closeLevel("the group end has no group start", &outermost, &queue);
  *dropped = queue.size();
  return st;
}

Status end() {
  std::vector<Queued> queue;
  bool outermost = false;
  COLLIE_RETURN_IF_ERROR(closeLevel("collieGroupEnd without collieGroupStart", &outermost, &queue));
  if (!outermost) return Status();
  // Split by communicator, keeping each one's issue order.
  std::vector<collieComm_t> comms;
  std::vector<std::vector<Queued>> perComm;
  for (Queued& q : queue) {
    size_t i = 0;
    while (i < comms.size() && comms[i] != q.comm) ++i;
    if (i == comms.size()) {
      comms.push_back(q.comm);
      perComm.emplace_back();
    }
    perComm[i].push_back(std::move(q));
  }
  if (comms.size() == 1) {
    Status st = runQueue(comms[0], perComm[0]);
    if (!st.ok() && commIsLive(comms[0])) report(st, comms[0]);
    return st;
  }
  if (comms.empty()) return Status();
  // Several communicators: each is a rank that must progress while the others
  // wait on it, so each gets a thread.
  std::vector<std::function<Status()>> queues;
  for (size_t i = 0; i < comms.size(); ++i) queues.emplace_back([&, i] { return runQueue(comms[i], perComm[i]); });
  std::vector<Status> results;
  COLLIE_RETURN_IF_ERROR(runJobs(queues, &results));
  // Each failing communicator keeps its own last error; the first one is returned.
  for (size_t i = comms.size(); i-- > 0;)
    if (!results[i].ok() && commIsLive(comms[i])) report(results[i], comms[i]);
  for (const Status& st : results)
    if (!st.ok()) return st;
  return Status();
}

}  // namespace group
}  // namespace collie
