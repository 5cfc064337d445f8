// `collie-bench init`: how long a communicator of all the job's ranks takes to
// create and destroy, and what it holds. Times run from a barrier to the
// return of the slowest rank. Host bytes are the shared-memory window each
// rank owns (collieComm::hostFootprint, the figure COLLIE_DEBUG=INFO prints at
// init; there is no public API for it, so the bench reads the internal
// communicator it links against), and the device bytes it holds likewise
// (deviceFootprint, CUDA backend). NCCL's device bytes are cudaMemGetInfo's
// change across init (device-wide: ranks sharing a GPU are counted together).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "bench/driver.h"
#include "bench/impl.h"
#include "bench/launch.h"
#include "bench/options.h"
#include "bench/report.h"
#include "core/comm.h"

namespace collie {
namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

InitRow summarize(const std::string& path, std::vector<double> init, const std::vector<double>& destroy) {
  InitRow row;
  row.path = path;
  if (init.empty()) return row;
  std::sort(init.begin(), init.end());
  double sum = 0, dsum = 0;
  for (double x : init) sum += x;
  for (double x : destroy) dsum += x;
  row.initMinMs = init.front() * 1e3;
  row.initMaxMs = init.back() * 1e3;
  row.initAvgMs = sum / init.size() * 1e3;
  row.destroyAvgMs = destroy.empty() ? 0 : dsum / destroy.size() * 1e3;
  return row;
}

size_t deviceFree(int device) {
  size_t freeBytes = 0, total = 0;
  int n = 0;
  if (!gpuUsable(&n, nullptr)) return 0;
  cudaSetDevice(device);
  cudaMemGetInfo(&freeBytes, &total);
  return freeBytes;
}

struct Footprint {
  double host = 0, device = 0;  // per rank, as the communicator counts them
  double deviceMeasured = 0;    // cudaMemGetInfo's change across init, per rank
  bool cuda = false;
};

// One create/destroy of every local rank of `worker`; false (with *err) when init failed.
bool collieOnce(Team& team, int worker, const Options& o, double* initSec, double* destroySec, Footprint* fp,
                std::string* err) {
  struct IdMessage {
    int ok;
    collieUniqueId id;
  } msg;
  memset(&msg, 0, sizeof(msg));
  if (team.isRoot(worker)) msg.ok = collieGetUniqueId(&msg.id) == collieSuccess;
  team.broadcast(worker, &msg, sizeof(msg));
  if (!msg.ok) {
    *err = "collieGetUniqueId failed on rank 0";
    return false;
  }
  const int g = team.perThread();
  int ndev = 0;
  const bool gpu = gpuUsable(&ndev, nullptr);
  const size_t freeBefore = deviceFree(team.deviceOf(worker, 0, ndev));
  std::vector<collieComm_t> comms(static_cast<size_t>(g), nullptr);
  std::vector<std::string> errors(static_cast<size_t>(g));
  auto initRank = [&](int j) {
    collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
    if (o.backendSet) cfg.backend = o.backend;
    if (gpu) cudaSetDevice(team.deviceOf(worker, j, ndev));
    if (collieCommInitRankConfig(&comms[static_cast<size_t>(j)], team.nranks(), msg.id, team.rankOf(worker, j), &cfg) !=
        collieSuccess)
      errors[static_cast<size_t>(j)] = std::string("collieCommInitRankConfig: ") + collieGetLastError(nullptr);
  };
  team.barrier(worker);
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int j = 1; j < g; ++j) threads.emplace_back(initRank, j);
  initRank(0);
  for (std::thread& t : threads) t.join();
  *initSec = since(t0);
  for (const std::string& e : errors)
    if (err->empty() && !e.empty()) *err = e;
  *fp = Footprint();
  for (collieComm_t c : comms) {
    if (c == nullptr) continue;
    fp->host += static_cast<double>(c->hostFootprint) / g;
    fp->device += static_cast<double>(c->deviceFootprint) / g;
    fp->cuda = c->backend == collieBackendCuda;
  }
  const size_t freeAfter = deviceFree(team.deviceOf(worker, 0, ndev));
  fp->deviceMeasured = freeBefore > freeAfter ? static_cast<double>(freeBefore - freeAfter) / g : 0.0;
  team.barrier(worker);
  const Clock::time_point t2 = Clock::now();
  for (collieComm_t c : comms) collieCommDestroy(c);
  *destroySec = since(t2);
  return err->empty();
}

}  // namespace

int runInit(Team& team, int worker, const Options& o) {
  const bool root = team.isRoot(worker);
  Report report;
  if (root) {
    describeRun(o, &report);
    report.title = "collie-bench init: communicator of " + rankLayout(team) + ", " + std::to_string(o.iters) +
                   " iterations after " + std::to_string(o.warmup) + " warm-up";
    report.settings = {{"nranks", std::to_string(team.nranks()), true},
                       {"processes", std::to_string(team.nprocs()), true},
                       {"threads_per_process", std::to_string(team.threads()), true},
                       {"ranks_per_thread", std::to_string(team.perThread()), true},
                       {"launcher", team.launcher()},
                       {"iters", std::to_string(o.iters), true},
                       {"warmup_iters", std::to_string(o.warmup), true}};
  }

  std::vector<double> init, destroy;
  Footprint fp;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    double t[2] = {0, 0};
    std::string err;
    double failed = collieOnce(team, worker, o, &t[0], &t[1], &fp, &err) ? 0 : 1;
    team.allreduce(worker, &failed, 1, RedKind::kMax);
    if (failed > 0) {
      if (root) fprintf(stderr, "collie-bench: init: %s\n", err.empty() ? "another rank failed" : err.c_str());
      team.barrier(worker);  // rank 0 has said why before any rank exits
      return 1;
    }
    team.allreduce(worker, t, 2, RedKind::kMax);
    if (it < o.warmup) continue;
    init.push_back(t[0]);
    destroy.push_back(t[1]);
  }
  if (root) {
    InitRow row = summarize("collieCommInitRank, " + std::to_string(team.nranks()) + " ranks", init, destroy);
    row.hostBytes = fp.host;
    row.deviceBytes = fp.device;
    row.note = std::string("backend ") + (fp.cuda ? "cuda" : "host") +
               "; bytes as the communicator counts them (collieComm::hostFootprint / deviceFootprint, printed at "
               "init with COLLIE_DEBUG=INFO)";
    if (fp.cuda)
      row.note += "; cudaMemGetInfo's change across init: " + std::to_string(fp.deviceMeasured) + " per rank";
    report.initRows.push_back(row);

    // The same clique as threads of this one process.
    std::vector<collieComm_t> comms(static_cast<size_t>(team.nranks()));
    std::vector<double> allInit, allDestroy;
    double allHost = 0;
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      const Clock::time_point t0 = Clock::now();
      if (collieCommInitAll(comms.data(), team.nranks(), nullptr) != collieSuccess)
        die(std::string("init: collieCommInitAll: ") + collieGetLastError(nullptr));
      const double sec = since(t0);
      allHost = 0;
      for (collieComm_t c : comms) allHost += static_cast<double>(c->hostFootprint) / team.nranks();
      const Clock::time_point t1 = Clock::now();
      for (collieComm_t c : comms) collieCommDestroy(c);
      if (it >= o.warmup) {
        allInit.push_back(sec);
        allDestroy.push_back(since(t1));
      }
    }
    InitRow threads = summarize("collieCommInitAll, threads", allInit, allDestroy);
    threads.hostBytes = allHost;
    threads.deviceBytes = 0;
    threads.note = "the same " + std::to_string(team.nranks()) + " ranks as threads of rank 0's process";
    report.initRows.push_back(threads);
  }
  team.barrier(worker);

  if (o.vsNccl) {
    std::string why = ncclUnavailable();
    double missing = why.empty() ? 0 : 1;
    team.allreduce(worker, &missing, 1, RedKind::kMax);
    std::vector<double> ninit, ndestroy;
    double devBytes = 0;
    for (int it = 0; missing == 0 && it < o.warmup + o.iters; ++it) {
      double t[2] = {0, 0};
      double failed = ncclInitOnce(team, worker, &t[0], &t[1], &devBytes, &why) ? 0 : 1;
      team.allreduce(worker, &failed, 1, RedKind::kMax);
      if (failed > 0) {
        missing = 1;
        break;
      }
      team.allreduce(worker, t, 2, RedKind::kMax);
      if (it >= o.warmup) {
        ninit.push_back(t[0]);
        ndestroy.push_back(t[1]);
      }
    }
    if (root) {
      if (missing == 0) {
        InitRow row = summarize("ncclCommInitRank (NCCL " + ncclVersion() + ")", ninit, ndestroy);
        row.deviceBytes = devBytes / team.perThread();
        row.note = "device bytes from cudaMemGetInfo, device-wide; NCCL's host memory is not counted";
        report.initRows.push_back(row);
      } else {
        const std::string text = "--vs nccl: NCCL not run: " + (why.empty() ? std::string("failed on a rank") : why);
        report.notes.push_back(text);
        fprintf(stderr, "collie-bench: %s\n", text.c_str());
      }
    }
  }
  if (o.vsMpi && root) report.notes.push_back("--vs mpi: init mode compares with NCCL only");

  int rc = 0;
  if (root) {
    printInitTable(report, stdout);
    std::string err;
    if (!o.jsonPath.empty() && !writeJson(report, o.jsonPath, &err)) rc = 1;
    if (!o.csvPath.empty() && !writeCsv(report, o.csvPath, &err)) rc = 1;
    if (!err.empty()) fprintf(stderr, "collie-bench: %s\n", err.c_str());
  }
  return rc;
}

}  // namespace bench
}  // namespace collie
