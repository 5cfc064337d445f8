// The collective table driver: builds the implementations (Collie per
// algorithm, then the baselines), walks the sizes, and for each size and
// implementation times the out-of-place and in-place calls, then checks one
// separate call of each (#wrong). Every rank runs this; rank 0 prints.
//
// Timing: warm-up calls, a barrier, then `-n` calls in a loop with nothing
// else per iteration but the dispatch to the implementation; the figure is the
// per-call mean of each rank, reduced over ranks by -a (default: slowest).
#include "bench/driver.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include "bench/check.h"
#include "bench/impl.h"
#include "bench/launch.h"
#include "bench/limit.h"
#include "bench/options.h"
#include "bench/report.h"
#include "bench/traffic.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

// Progress on stderr for long sweeps: a rewritten line on a terminal, plain
// lines with --progress elsewhere, nothing otherwise (CI logs stay clean).
class Progress {
 public:
  Progress(bool on, size_t total) : on_(on), tty_(isatty(STDERR_FILENO) != 0), total_(total) {}
  void step(size_t done, size_t bytes, const std::string& what) {
    if (!on_) return;
    const double sec = std::chrono::duration<double>(Clock::now() - start_).count();
    fprintf(stderr, "%scollie-bench: %zu/%zu rows done, last %s %s, %.1f s%s", tty_ ? "\r\033[K" : "", done, total_,
            humanBytes(static_cast<double>(bytes)).c_str(), what.c_str(), sec, tty_ ? "" : "\n");
    fflush(stderr);
  }
  void finish() {
    if (on_ && tty_) fprintf(stderr, "\r\033[K");
  }

 private:
  bool on_, tty_;
  size_t total_;
  Clock::time_point start_ = Clock::now();
};

class Sweep {
 public:
  Sweep(Team& team, int worker, const Options& o)
      : team_(team), worker_(worker), o_(o), root_(team.isRoot(worker)), g_(static_cast<size_t>(team.perThread())) {}
  int run();

 private:
  int setup();
  int refuse(int code, const std::string& why);
  std::vector<size_t> sizes() const;
  void runSize(collieDataType_t type, collieRedOp_t op, size_t bytes, Row* row);
  Figure measure(Impl& impl, bool inPlace);
  size_t checkRun(Impl& impl, bool inPlace);
  double reduceTime(double sec);
  Call makeCall(MemKind kind, bool inPlace);
  std::vector<Buffer>& sends(MemKind k) { return k == MemKind::kHost ? hostSend_ : devSend_; }
  std::vector<Buffer>& recvs(MemKind k) { return k == MemKind::kHost ? hostRecv_ : devRecv_; }
  void note(const std::string& text);
  void fail(const std::string& what, const std::string& err) { die(what + ": " + err); }

  Team& team_;
  int worker_;
  const Options& o_;
  bool root_;
  size_t g_;  // ranks of this worker
  uint64_t seed_ = 0;
  Traffic traffic_;
  std::vector<std::unique_ptr<Impl>> impls_;
  std::vector<MemKind> kinds_;  // memory kinds in use, in order of first use
  std::vector<Case> cases_;     // per local rank, of the current size
  std::vector<Buffer> hostSend_, hostRecv_, devSend_, devRecv_;
  std::vector<std::vector<char>> staging_;
  Report report_;  // rank 0's
};

void Sweep::note(const std::string& text) {
  if (!root_) return;
  report_.notes.push_back(text);
  fprintf(stderr, "collie-bench: %s\n", text.c_str());
}

double Sweep::reduceTime(double sec) {
  double v = sec;
  switch (o_.average) {
    case Average::kRank0:
      v = root_ ? sec : 0;
      team_.allreduce(worker_, &v, 1, RedKind::kSum);
      return v;
    case Average::kMean:
      team_.allreduce(worker_, &v, 1, RedKind::kSum);
      return v / (team_.nprocs() * team_.threads());
    case Average::kMin:
      team_.allreduce(worker_, &v, 1, RedKind::kMin);
      return v;
    case Average::kMax:
      break;
  }
  team_.allreduce(worker_, &v, 1, RedKind::kMax);
  return v;
}

// Every rank reaches the same refusal; rank 0 says why before any rank exits,
// since a launcher stops the others as soon as one rank has failed.
int Sweep::refuse(int code, const std::string& why) {
  if (root_) fprintf(stderr, "collie-bench: %s\n", why.c_str());
  team_.barrier(worker_);
  return code;
}

int Sweep::setup() {
  const CollInfo& info = collInfo(o_.coll);
  if (info.rooted && o_.root >= team_.nranks())
    return refuse(2, "-r " + std::to_string(o_.root) + " is not a rank of " + std::to_string(team_.nranks()));
  std::string err;
  if (o_.coll == Coll::kAllToAllv) {
    if (!parseTraffic(o_.traffic, &traffic_, &err) || !loadTraffic(&traffic_, team_.nranks(), &err))
      return refuse(2, "--traffic: " + err);
  }
  const std::vector<std::string> algos = collieAlgorithms(o_, &err);
  if (algos.empty()) return refuse(2, err);
  // One seed for inputs and traffic, the same on every rank.
  seed_ = o_.seed;
  if (!o_.seedSet && root_) seed_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  team_.broadcast(worker_, &seed_, sizeof(seed_));

  for (const std::string& a : algos) {
    std::unique_ptr<Impl> impl = makeCollieImpl(team_, worker_, o_, a, &err);
    if (!impl)
      return refuse(1, std::string(o_.backendSet && o_.backend == collieBackendCuda ? "--backend cuda: " : "") +
                           "cannot create a Collie communicator: " + err);
    impls_.push_back(std::move(impl));
  }
  if (o_.vsNccl) {
    std::string why = ncclUnavailable();
    double missing = why.empty() ? 0 : 1;
    team_.allreduce(worker_, &missing, 1, RedKind::kMax);
    std::unique_ptr<Impl> impl;
    if (missing == 0) impl = makeNcclImpl(team_, worker_, o_, &why);
    if (impl)
      impls_.push_back(std::move(impl));
    else
      note("--vs nccl: NCCL not run: " + (why.empty() ? std::string("not available on every rank") : why));
  }
  if (o_.vsMpi) {
    std::string why = mpiUnavailable(team_);
    double missing = why.empty() ? 0 : 1;
    team_.allreduce(worker_, &missing, 1, RedKind::kMax);
    std::unique_ptr<Impl> impl;
    if (missing == 0) impl = makeMpiImpl(team_, worker_, o_, &why);
    if (impl)
      impls_.push_back(std::move(impl));
    else
      note("--vs mpi: MPI not run: " + (why.empty() ? std::string("not available on every rank") : why));
  }
  for (const auto& impl : impls_)
    if (std::find(kinds_.begin(), kinds_.end(), impl->mem()) == kinds_.end()) kinds_.push_back(impl->mem());
  for (MemKind k : kinds_) {
    sends(k).resize(g_);
    recvs(k).resize(g_);
  }
  staging_.resize(g_);
  if ((o_.blocking || o_.graphIters > 0) && impls_[0]->mem() == MemKind::kHost)
    note("-z and -G apply to device backends; host calls always complete before they return");
  if (traffic_.fromFile()) note("--traffic file: one size, the file's counts as written (-b, -e ignored)");
  return 0;
}

std::vector<size_t> Sweep::sizes() const {
  if (traffic_.fromFile()) return {0};
  std::vector<size_t> out;
  for (size_t bytes = o_.minBytes; bytes <= o_.maxBytes;) {
    out.push_back(bytes);
    const size_t next =
        o_.increment ? bytes + o_.increment : static_cast<size_t>(static_cast<double>(bytes) * o_.factor);
    if (next <= bytes) break;
    bytes = next;
  }
  return out;
}

Call Sweep::makeCall(MemKind kind, bool inPlace) {
  Call call;
  call.inPlace = inPlace;
  for (size_t j = 0; j < g_; ++j) {
    const Case& c = cases_[j];
    const size_t es = c.typeBytes();
    call.cases.push_back(&c);
    char* recv = static_cast<char*>(recvs(kind)[j].data());
    if (inPlace) {
      call.send.push_back(recv + c.sendOff * es);
      call.recv.push_back(recv + c.recvOff * es);
    } else {
      call.send.push_back(sends(kind)[j].data());
      call.recv.push_back(recv);
    }
  }
  return call;
}

size_t Sweep::checkRun(Impl& impl, bool inPlace) {
  const MemKind kind = impl.mem();
  std::string err;
  for (size_t j = 0; j < g_ && err.empty(); ++j) {
    const Case& c = cases_[j];
    const size_t es = c.typeBytes();
    std::vector<char>& st = staging_[j];
    st.resize(std::max(c.bufElems, std::max(c.sendElems, c.recvElems)) * es + 1);
    if (inPlace) {
      fillInPlace(c, seed_, st.data());
      err = recvs(kind)[j].upload(0, st.data(), c.bufElems * es);
    } else {
      fillInput(c, seed_, st.data());
      err = sends(kind)[j].upload(0, st.data(), c.sendElems * es);
      poison(st.data(), c.recvElems * es);
      if (err.empty()) err = recvs(kind)[j].upload(0, st.data(), c.recvElems * es);
    }
  }
  if (!err.empty()) fail(impl.label(), err);
  const Call call = makeCall(kind, inPlace);
  err = impl.issue(call);
  if (err.empty()) err = impl.sync();
  if (!err.empty()) fail(impl.label() + " (check run)", err);
  size_t wrong = 0;
  for (size_t j = 0; j < g_; ++j) {
    const Case& c = cases_[j];
    std::vector<char>& st = staging_[j];
    err = recvs(kind)[j].download(st.data(), (inPlace ? c.recvOff : 0) * c.typeBytes(), c.recvElems * c.typeBytes());
    if (!err.empty()) fail(impl.label(), err);
    wrong += countWrong(c, seed_, st.data());
  }
  return wrong;
}

Figure Sweep::measure(Impl& impl, bool inPlace) {
  Figure f;
  // Every rank must skip together, or the others would wait in the call.
  std::string why;
  for (size_t j = 0; j < g_ && why.empty(); ++j) why = impl.unsupported(cases_[j], inPlace);
  double skip = why.empty() ? 0 : 1;
  team_.allreduce(worker_, &skip, 1, RedKind::kMax);
  if (skip > 0) {
    f.why = why.empty() ? "not supported on another rank" : why;
    return f;
  }
  const Call call = makeCall(impl.mem(), inPlace);
  std::string err;
  for (int i = 0; i < o_.warmup && err.empty(); ++i) {
    err = impl.issue(call);
    if (err.empty() && o_.blocking) err = impl.sync();
  }
  if (err.empty()) err = impl.sync();
  if (!err.empty()) fail(impl.label(), err);
  team_.barrier(worker_);
  // --reps: the timed loop again and again; each loop's time per call is reduced over ranks on its own.
  std::vector<double> samples, issueSamples;
  for (int rep = 0; rep < o_.reps; ++rep) {
    double sec = 0;
    if (o_.graphIters > 0 && impl.mem() == MemKind::kDevice &&
        impl.graphSeconds(call, o_.iters, o_.graphIters, &sec, &err)) {
      if (!err.empty()) fail(impl.label() + " (CUDA graph)", err);
    } else {
      const Clock::time_point t0 = Clock::now();
      double inside = 0;  // host time inside the calls: the enqueue's cost beside the device's
      for (int i = 0; i < o_.iters && err.empty(); ++i) {
        const Clock::time_point ti = Clock::now();
        err = impl.issue(call);
        inside += std::chrono::duration<double>(Clock::now() - ti).count();
        if (err.empty() && o_.blocking) err = impl.sync();
      }
      if (err.empty()) err = impl.sync();
      sec = std::chrono::duration<double>(Clock::now() - t0).count() / o_.iters;
      if (!err.empty()) fail(impl.label(), err);
      issueSamples.push_back(reduceTime(inside / o_.iters));
    }
    samples.push_back(reduceTime(sec));
  }
  std::sort(samples.begin(), samples.end());
  std::sort(issueSamples.begin(), issueSamples.end());
  f.ran = true;
  f.sec = samples[samples.size() / 2];
  // Every rank takes the same path (graphs or not), so every rank has the samples or none.
  if (!issueSamples.empty()) f.issue = issueSamples[issueSamples.size() / 2];
  f.p90 = samples[(samples.size() * 9 + 9) / 10 - 1];
  f.traffic = impl.trafficBytes(call);
  f.algorithm = impl.algorithmName(call);
  team_.allreduce(worker_, &f.traffic, 1, RedKind::kMax);
  const Case& c = cases_[0];
  f.algbw = f.sec > 0 ? static_cast<double>(c.rowBytes) / f.sec / 1e9 : 0;
  f.busbw = f.algbw * busFactor(o_.coll, team_.nranks());
  if (o_.check) {
    double wrong = static_cast<double>(checkRun(impl, inPlace));
    team_.allreduce(worker_, &wrong, 1, RedKind::kSum);
    f.wrong = static_cast<long long>(wrong);
  }
  return f;
}

void Sweep::runSize(collieDataType_t type, collieRedOp_t op, size_t bytes, Row* row) {
  const int n = team_.nranks();
  std::vector<size_t> matrix;
  if (o_.coll == Coll::kAllToAllv) matrix = trafficMatrix(traffic_, n, bytes / typeSize(type), seed_);
  cases_.clear();
  for (size_t j = 0; j < g_; ++j)
    cases_.push_back(makeCase(o_.coll, type, op, o_.root, n, team_.rankOf(worker_, static_cast<int>(j)), bytes,
                              o_.coll == Coll::kAllToAllv ? &matrix : nullptr));
  const Case& c0 = cases_[0];
  row->bytes = c0.rowBytes;
  row->count = c0.rowCount;
  row->type = typeName(type);
  row->op = collInfo(o_.coll).reduces ? opName(op) : "none";
  row->root = c0.root;
  row->floorBytes = floorBytes(o_.coll, n, c0.rowBytes);

  int ndev = 0;
  gpuUsable(&ndev, nullptr);
  for (MemKind k : kinds_) {
    for (size_t j = 0; j < g_; ++j) {
      const Case& c = cases_[j];
      const size_t es = c.typeBytes();
      const int dev = team_.deviceOf(worker_, static_cast<int>(j), ndev);
      std::string err = sends(k)[j].reserve(k, c.sendElems * es, dev);
      if (err.empty()) err = recvs(k)[j].reserve(k, std::max(c.recvElems, c.bufElems) * es, dev);
      if (!err.empty()) fail("buffers", err);
    }
  }
  for (size_t i = 0; i < impls_.size(); ++i) {
    Impl& impl = *impls_[i];
    ImplFigures figs;
    for (int ip = 0; ip < 2; ++ip) {
      Figure& f = ip ? figs.ip : figs.oop;
      f = measure(impl, ip != 0);
      if (i == Report::kReference && o_.bare && f.ran) {
        // The same calls in a bare loop, right after, from the same warm state.
        team_.barrier(worker_);
        std::string err;
        const double sec = impl.bareSeconds(makeCall(impl.mem(), ip != 0), o_.iters, &err);
        if (!err.empty()) fail(impl.label() + " (bare loop)", err);
        const double per = sec < 0 ? -1 : reduceTime(sec / o_.iters);
        (ip ? row->bareIp : row->bareOop) = per;
      }
    }
    row->impls.push_back(figs);
  }
  if (o_.limit) {
    for (MemKind k : kinds_) {
      const double sec = reduceTime(copySeconds(team_, worker_, o_, k, row->bytes));
      row->limit.push_back(sec > 0 && row->bytes > 0 ? 2.0 * static_cast<double>(row->bytes) / sec / 1e9 : 0);
    }
  }
}

int Sweep::run() {
  const int setupRc = setup();
  if (setupRc != 0) return setupRc;
  const CollInfo& info = collInfo(o_.coll);
  if (root_) {
    describeRun(o_, &report_);
    const std::string backend = impls_[0]->mem() == MemKind::kDevice ? "cuda" : "host";
    report_.title = std::string("collie-bench ") + info.name + ": " + rankLayout(team_) + ", backend " + backend;
    std::string types, ops, algos;
    for (collieDataType_t t : o_.types) types += (types.empty() ? "" : ",") + std::string(typeName(t));
    for (collieRedOp_t op : o_.ops) ops += (ops.empty() ? "" : ",") + std::string(opName(op));
    for (const auto& impl : impls_) algos += (algos.empty() ? "" : ",") + impl->label();
    auto num = [](double v) {
      char buf[32];
      snprintf(buf, sizeof(buf), "%.10g", v);
      return Setting{"", buf, true};
    };
    auto add = [&](const char* key, Setting s) {
      s.key = key;
      report_.settings.push_back(s);
    };
    add("collective", {"", info.name});
    add("nranks", num(team_.nranks()));
    add("processes", num(team_.nprocs()));
    add("threads_per_process", num(team_.threads()));
    add("ranks_per_thread", num(team_.perThread()));
    add("launcher", {"", team_.launcher()});
    add("backend", {"", backend});
    add("implementations", {"", algos});
    add("types", {"", types});
    add("ops", {"", info.reduces ? ops : "none"});
    add("root", num(info.rooted ? o_.root : -1));
    add("min_bytes", num(static_cast<double>(o_.minBytes)));
    add("max_bytes", num(static_cast<double>(o_.maxBytes)));
    add("step_factor", num(o_.increment ? 0 : o_.factor));
    add("step_bytes", num(static_cast<double>(o_.increment)));
    add("iters", num(o_.iters));
    add("warmup_iters", num(o_.warmup));
    add("check", num(o_.check));
    add("average", {"", o_.average == Average::kRank0  ? "rank0"
                        : o_.average == Average::kMean ? "mean"
                        : o_.average == Average::kMin  ? "min"
                                                       : "max"});
    add("blocking", num(o_.blocking));
    add("graph_iters", num(o_.graphIters));
    add("reps", num(o_.reps));
    add("seed", {"", std::to_string(seed_)});
    if (o_.coll == Coll::kAllToAllv) add("traffic", {"", traffic_.describe(team_.nranks())});
    for (const auto& impl : impls_)
      report_.impls.push_back({impl->label(), impl->baseline(), memKindName(impl->mem())});
    if (o_.limit)
      for (MemKind k : kinds_) report_.limitKinds.push_back(memKindName(k));
    report_.bare = o_.bare;
    report_.notes.insert(report_.notes.begin(),
                         "seed " + std::to_string(seed_) + "; " + std::to_string(o_.iters) + " iterations after " +
                             std::to_string(o_.warmup) + " warm-up; time = mean per call" +
                             (o_.reps > 1 ? ", median of " + std::to_string(o_.reps) + " such loops, " : ", ") +
                             (o_.average == Average::kMax ? "of the slowest rank" : "reduced over ranks by -a"));
    if (o_.coll == Coll::kAllToAllv) report_.notes.push_back("traffic " + traffic_.describe(team_.nranks()));
    printTableHeader(report_, stdout);
  }

  const std::vector<size_t> all = sizes();
  const std::vector<collieRedOp_t> ops = info.reduces ? o_.ops : std::vector<collieRedOp_t>{collieSum};
  Progress progress(root_ && (o_.progress || isatty(STDERR_FILENO)), o_.types.size() * ops.size() * all.size());
  size_t done = 0;
  long long wrong = 0;
  for (collieDataType_t type : o_.types) {
    for (collieRedOp_t op : ops) {
      for (size_t bytes : all) {
        Row row;
        runSize(type, op, bytes, &row);
        for (const ImplFigures& f : row.impls) wrong += std::max(0LL, f.oop.wrong) + std::max(0LL, f.ip.wrong);
        ++done;
        if (!root_) continue;
        for (const Figure* f : {&row.impls[0].oop, &row.impls[0].ip}) {
          if (!f->ran) continue;
          report_.busbwSum += f->busbw;
          ++report_.busbwCount;
        }
        progress.finish();
        printTableRow(report_, row, stdout);
        std::string err;
        if (!o_.jsonlPath.empty() && !appendJsonLines(report_, row, o_.jsonlPath, &err)) fail("--jsonl", err);
        progress.step(done, row.bytes, typeName(type));
        report_.rows.push_back(std::move(row));
      }
    }
  }
  progress.finish();
  int rc = wrong == 0 ? 0 : 1;
  if (root_) {
    report_.totalWrong = wrong;
    printTableFooter(report_, stdout);
    if (o_.summary) printSummary(report_, stdout);
    std::string err;
    if (!o_.jsonPath.empty() && !writeJson(report_, o_.jsonPath, &err)) rc = 1;
    if (!o_.csvPath.empty() && !writeCsv(report_, o_.csvPath, &err)) rc = 1;
    if (!o_.jsonlPath.empty() && !appendJsonNotes(report_, o_.jsonlPath, &err)) rc = 1;
    if (!o_.plotPath.empty() && !writeSvg(report_, o_.plotPath, &err)) rc = 1;
    if (!err.empty()) fprintf(stderr, "collie-bench: %s\n", err.c_str());
  }
  impls_.clear();
  return rc;
}

}  // namespace

int runSweep(Team& team, int worker, const Options& o) {
  Sweep sweep(team, worker, o);
  return sweep.run();
}

}  // namespace bench
}  // namespace collie
