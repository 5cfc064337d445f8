#include "bench/launch.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "bench/impl.h"
#include "bench/report.h"
#include "tools/launcher.h"

#ifndef COLLIE_BENCH_MPIEXEC
#define COLLIE_BENCH_MPIEXEC "mpirun"
#endif

namespace collie {
namespace bench {

namespace {

bool envSet(const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

bool underCollieRun() { return envSet("COLLIE_RANK") || envSet("COLLIE_WORLD_SIZE"); }
bool underMpirun() { return envSet("OMPI_COMM_WORLD_RANK"); }
bool underSlurm() { return envSet("SLURM_PROCID"); }

int envInt(const char* name, int fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return atoi(v);
}

// Under mpirun, /proc/self/exe would name mpirun: resolve our own path first.
std::string selfPath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

int runUnderMpirun(const Options& o) {
  const std::string exe = selfPath();
  if (exe.empty()) {
    fprintf(stderr, "collie-bench: cannot find its own executable to start under mpirun\n");
    return 1;
  }
  const std::string mpirun = o.mpirun.empty() ? COLLIE_BENCH_MPIEXEC : o.mpirun;
  std::vector<std::string> args = {mpirun};
  // mpirun refuses root without these, and more ranks than cores without --oversubscribe.
  if (geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back("--oversubscribe");
  args.push_back("-np");
  args.push_back(std::to_string(o.nprocs));
  args.push_back(exe);
  args.insert(args.end(), o.passOn.begin() + 1, o.passOn.end());
  args.push_back("--launched-as");
  args.push_back(commandLine(o.argv));
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(&a[0]);
  cargv.push_back(nullptr);
  fflush(stdout);
  fflush(stderr);
  execvp(cargv[0], cargv.data());
  fprintf(stderr, "collie-bench: cannot start %s (%s); name another with --mpirun PATH\n", mpirun.c_str(),
          strerror(errno));
  return 127;
}

}  // namespace

void die(const std::string& msg) {
  fprintf(stderr, "collie-bench: %s\n", msg.c_str());
  fflush(stdout);
  fflush(stderr);
  _exit(1);
}

std::string rankLayout(const Team& team) {
  auto count = [](int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
  std::string s = count(team.nranks(), "rank", "ranks") + " (" + count(team.nprocs(), "process", "processes");
  if (team.threads() > 1 || team.perThread() > 1)
    s += " x " + count(team.threads(), "thread", "threads") + " x " +
         count(team.perThread(), "rank per thread", "ranks per thread");
  return s + ")";
}

int launchIfAsked(const Options& o) {
  if (o.nprocs == 0) return -1;
  if (underCollieRun() || underMpirun() || underSlurm()) return -1;  // started by a launcher: -np was for it
  if (o.vsMpi && mpiBuilt()) return runUnderMpirun(o);
  collie::launcher::Options lo;
  lo.nprocs = o.nprocs;
  lo.argv = o.passOn;
  lo.argv.push_back("--launched-as");
  lo.argv.push_back(commandLine(o.argv));
  lo.argv[0] = "/proc/self/exe";  // exec'd by the forked child, so it names us
  lo.prefixOutput = false;        // only rank 0 prints the table
  return collie::launcher::run(lo);
}

std::unique_ptr<Team> Team::join(const Options& o, std::string* err) {
  std::unique_ptr<Team> t(new Team());
  t->threads_ = o.threads;
  t->perThread_ = o.perThread;
  t->slots_.resize(static_cast<size_t>(o.threads));
  const bool collieRun = underCollieRun(), mpirun = underMpirun(), slurm = underSlurm();
  // MPI carries the job when it started the job and Collie has no rendezvous of
  // its own (COLLIE_ROOT), or when asked for and nothing else started us.
  const bool wantMpi = mpiBuilt() && !collieRun && ((mpirun && !envSet("COLLIE_ROOT")) || (o.vsMpi && !slurm));
  if (wantMpi) {
    if (!mpiInit(&t->procRank_, &t->nprocs_, err)) return nullptr;
    t->mpi_ = true;
    t->launcher_ = mpirun ? "mpirun" : "single process";
  } else if (collieRun || mpirun || slurm) {
    t->launcher_ = collieRun ? "collie-run" : (mpirun ? "mpirun" : "slurm");
    collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
    cfg.backend = collieBackendHost;  // the benchmark's own traffic is a few bytes of host memory
    if (collieCommInitFromEnv(&t->procComm_, &cfg) != collieSuccess) {
      *err = std::string("joining the job: ") + collieGetLastError(nullptr);
      if (mpirun && !mpiBuilt())
        *err += " (under mpirun this build needs -x COLLIE_ROOT=host:port; it was built without MPI)";
      return nullptr;
    }
    collieCommUserRank(t->procComm_, &t->procRank_);
    collieCommCount(t->procComm_, &t->nprocs_);
  }
  t->localIndex_ = envInt("COLLIE_LOCAL_RANK", envInt("OMPI_COMM_WORLD_LOCAL_RANK", envInt("SLURM_LOCALID", 0)));
  if (o.nprocs > 0 && o.nprocs != t->nprocs_ && t->procRank_ == 0)
    fprintf(stderr, "collie-bench: -np %d ignored: the launcher started %d processes\n", o.nprocs, t->nprocs_);
  return t;
}

Team::~Team() {
  if (procComm_ != nullptr) collieCommDestroy(procComm_);
  if (mpi_) mpiFinalize();
}

void Team::localBarrier() {
  if (threads_ == 1) return;
  std::unique_lock<std::mutex> lock(mu_);
  const unsigned long long gen = generation_;
  if (++waiting_ == threads_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != gen; });
  }
}

void Team::crossAllreduce(double* v, int n, RedKind kind) {
  if (nprocs_ == 1) return;
  if (mpi_) {
    mpiAllreduce(v, n, kind);
    return;
  }
  const collieRedOp_t op = kind == RedKind::kSum ? collieSum : (kind == RedKind::kMax ? collieMax : collieMin);
  if (collieAllReduce(v, v, static_cast<size_t>(n), collieFloat64, op, procComm_, nullptr) != collieSuccess)
    die(std::string("the benchmark's own allreduce failed: ") + collieGetLastError(procComm_));
}

void Team::crossBroadcast(void* data, size_t bytes) {
  if (nprocs_ == 1) return;
  if (mpi_) {
    mpiBroadcast(data, bytes);
    return;
  }
  if (collieBroadcast(data, data, bytes, collieUint8, 0, procComm_, nullptr) != collieSuccess)
    die(std::string("the benchmark's own broadcast failed: ") + collieGetLastError(procComm_));
}

void Team::barrier(int worker) {
  double none = 0;
  allreduce(worker, &none, 1, RedKind::kSum);
}

void Team::broadcast(int worker, void* data, size_t bytes) {
  if (worker == 0) {
    crossBroadcast(data, bytes);
    bytes_.assign(static_cast<char*>(data), static_cast<char*>(data) + bytes);
  }
  localBarrier();
  if (worker != 0) memcpy(data, bytes_.data(), bytes);
  localBarrier();
}

void Team::allreduce(int worker, double* v, int n, RedKind kind) {
  slots_[static_cast<size_t>(worker)].assign(v, v + n);
  localBarrier();
  if (worker == 0) {
    result_ = slots_[0];
    for (size_t w = 1; w < slots_.size(); ++w) {
      for (int i = 0; i < n; ++i) {
        const double x = slots_[w][static_cast<size_t>(i)];
        double& acc = result_[static_cast<size_t>(i)];
        acc = kind == RedKind::kSum ? acc + x : (kind == RedKind::kMax ? std::max(acc, x) : std::min(acc, x));
      }
    }
    crossAllreduce(result_.data(), n, kind);
  }
  localBarrier();
  std::copy(result_.begin(), result_.begin() + n, v);
  localBarrier();
}

int Team::run(const std::function<int(int)>& fn) {
  std::vector<int> rcs(static_cast<size_t>(threads_), 0);
  std::vector<std::thread> others;
  for (int w = 1; w < threads_; ++w) others.emplace_back([&, w] { rcs[static_cast<size_t>(w)] = fn(w); });
  rcs[0] = fn(0);
  for (std::thread& t : others) t.join();
  int rc = 0;
  for (int r : rcs) rc = std::max(rc, r);
  return rc;
}

}  // namespace bench
}  // namespace collie
