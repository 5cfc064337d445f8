// collie-bench: the nccl-tests-style benchmark (first form: allreduce and init).
//
//   collie-bench allreduce -np 4 -b 8 -e 64M -f 2       table of time, algbw, busbw, #wrong
//   collie-bench init -np 8                              communicator create/destroy time
//
// With -np N (and no launcher environment) it starts N local ranks of itself
// through the collie-run launcher; under collie-run, mpirun or srun it joins
// the job from the environment. Times are the mean per iteration of the
// slowest rank. #wrong comes from a separate check run after the timed ones,
// with inputs chosen so the exact result is representable in every type.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "executor/reduce_ops.h"
#include "tools/launcher.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode;
  int nprocs = 0;  // 0: no self-launch
  size_t minBytes = 8, maxBytes = 64 << 20;
  double factor = 2;
  size_t increment = 0;
  int iters = 20, warmup = 5;
  bool check = true;
  std::vector<collieDataType_t> types = {collieFloat32};
  std::vector<collieRedOp_t> ops = {collieSum};
};

int usage(const char* msg) {
  if (msg) fprintf(stderr, "collie-bench: %s\n", msg);
  fprintf(msg ? stderr : stdout,
          "Usage: collie-bench allreduce|init [options]\n"
          "  -np N        start N local ranks (otherwise join collie-run / mpirun / srun, or run 1 rank)\n"
          "  -b BYTES     smallest size (default 8; K, M, G suffixes)\n"
          "  -e BYTES     largest size (default 64M)\n"
          "  -f FACTOR    multiply the size by FACTOR each step (default 2)\n"
          "  -i BYTES     add BYTES each step instead of multiplying\n"
          "  -n ITERS     timed iterations per size (default 20)\n"
          "  -w ITERS     warm-up iterations per size (default 5)\n"
          "  -c 0|1       check results, count #wrong (default 1)\n"
          "  -d TYPE      int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2 | all\n"
          "  -o OP        sum prod max min avg | all\n");
  return msg ? 2 : 0;
}

bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || v < 0) return false;
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      ++end;
      break;
    case 'M':
    case 'm':
      v *= 1024.0 * 1024;
      ++end;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseType(const std::string& s, std::vector<collieDataType_t>* out) {
  out->clear();
  for (int t = 0; t < collieNumTypes; ++t)
    if (s == "all" || s == collie::typeName(static_cast<collieDataType_t>(t)))
      out->push_back(static_cast<collieDataType_t>(t));
  return !out->empty();
}

bool parseOp(const std::string& s, std::vector<collieRedOp_t>* out) {
  out->clear();
  for (int o = 0; o < collieNumOps; ++o)
    if (s == "all" || s == collie::opName(static_cast<collieRedOp_t>(o))) out->push_back(static_cast<collieRedOp_t>(o));
  return !out->empty();
}

// Collie's own calls are checked everywhere: a benchmark that goes on after a
// failure prints numbers for work that did not happen.
#define BENCH_CHECK(call)                                                                    \
  do {                                                                                       \
    collieResult_t rc_ = (call);                                                             \
    if (rc_ != collieSuccess) {                                                              \
      fprintf(stderr, "collie-bench: %s failed: %s: %s\n", #call, collieGetErrorString(rc_), \
              collieGetLastError(nullptr));                                                  \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

struct Job {
  collieComm_t comm = nullptr;
  int rank = 0, nranks = 1;
};

// Allreduce-based helpers: the benchmark uses only the public API.
double maxOverRanks(const Job& job, double v) {
  BENCH_CHECK(collieAllReduce(&v, &v, 1, collieFloat64, collieMax, job.comm, nullptr));
  return v;
}
double sumOverRanks(const Job& job, double v) {
  BENCH_CHECK(collieAllReduce(&v, &v, 1, collieFloat64, collieSum, job.comm, nullptr));
  return v;
}
void barrier(const Job& job) {
  float x = 0;
  BENCH_CHECK(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, job.comm, nullptr));
}

// Check-run input of rank r, element i: small integers so that sums, products,
// minima and maxima over any number of ranks up to 8 are exact in every type,
// fp8 included (e5m2 is exact up to 8).
double checkValue(collieRedOp_t op, int r, size_t i, int nranks) {
  if (op == collieProd) return static_cast<size_t>(r) == i % static_cast<size_t>(nranks) ? 2.0 : 1.0;
  return static_cast<double>((i + static_cast<size_t>(r)) % 2);
}

double expectedValue(collieDataType_t type, collieRedOp_t op, size_t i, int nranks) {
  double acc = checkValue(op, 0, i, nranks);
  for (int r = 1; r < nranks; ++r) {
    const double x = checkValue(op, r, i, nranks);
    if (op == collieProd)
      acc *= x;
    else if (op == collieMax)
      acc = std::max(acc, x);
    else if (op == collieMin)
      acc = std::min(acc, x);
    else
      acc += x;
  }
  if (op == collieAvg) {
    const bool integer = type <= collieUint64;
    acc = integer ? std::trunc(acc / nranks) : acc / nranks;
  }
  return acc;
}

void storeValue(collieDataType_t type, void* buf, size_t i, double v) {
  collie::visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (collie::IsNarrowFloat<T>::value)
      static_cast<T*>(buf)[i] = collie::narrow<T>(static_cast<float>(v));
    else
      static_cast<T*>(buf)[i] = static_cast<T>(v);
  });
}

double loadValue(collieDataType_t type, const void* buf, size_t i) {
  double v = 0;
  collie::visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    v = static_cast<double>(collie::widen(static_cast<const T*>(buf)[i]));
  });
  return v;
}

// One check run; returns the number of wrong elements on this rank.
size_t checkRun(const Job& job, collieDataType_t type, collieRedOp_t op, size_t count, bool inPlace,
                std::vector<char>& send, std::vector<char>& recv) {
  for (size_t i = 0; i < count; ++i) storeValue(type, send.data(), i, checkValue(op, job.rank, i, job.nranks));
  memset(recv.data(), 0x7b, recv.size());
  void* out = inPlace ? send.data() : recv.data();
  BENCH_CHECK(collieAllReduce(send.data(), out, count, type, op, job.comm, nullptr));
  size_t wrong = 0;
  std::vector<char> want(collie::typeSize(type));
  for (size_t i = 0; i < count; ++i) {
    // Compare after rounding the exact value to the type, as the library must.
    storeValue(type, want.data(), 0, expectedValue(type, op, i, job.nranks));
    if (loadValue(type, out, i) != loadValue(type, want.data(), 0)) ++wrong;
  }
  return wrong;
}

// Mean seconds per iteration on the slowest rank.
double timeRun(const Job& job, const Options& o, collieDataType_t type, collieRedOp_t op, size_t count, bool inPlace,
               std::vector<char>& send, std::vector<char>& recv) {
  void* out = inPlace ? send.data() : recv.data();
  for (int i = 0; i < o.warmup; ++i) BENCH_CHECK(collieAllReduce(send.data(), out, count, type, op, job.comm, nullptr));
  barrier(job);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < o.iters; ++i) BENCH_CHECK(collieAllReduce(send.data(), out, count, type, op, job.comm, nullptr));
  const double sec = std::chrono::duration<double>(Clock::now() - t0).count() / std::max(1, o.iters);
  return maxOverRanks(job, sec);
}

int runAllReduce(const Job& job, const Options& o) {
  collieBackend_t backend = collieBackendHost;
  BENCH_CHECK(collieCommGetBackend(job.comm, &backend));
  if (job.rank == 0) {
    char host[128] = {0};
    gethostname(host, sizeof(host) - 1);
    printf("# collie-bench allreduce: %d ranks, backend %s, host %s\n", job.nranks,
           backend == collieBackendCuda ? "cuda" : "host", host);
    printf("# iters %d, warmup %d, check %d; time = mean per iteration of the slowest rank\n", o.iters, o.warmup,
           o.check ? 1 : 0);
    printf("#\n#%61s%38s\n", "out-of-place", "in-place");
    printf("# %10s %12s %8s %6s %6s %10s %8s %8s %6s %10s %8s %8s %6s\n", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("# %10s %12s %8s %6s %6s %10s %8s %8s %6s %10s %8s %8s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  const double busFactor = job.nranks > 1 ? 2.0 * (job.nranks - 1) / job.nranks : 0.0;
  double busSum = 0;
  int busCount = 0;
  double totalWrong = 0;
  for (collieDataType_t type : o.types) {
    for (collieRedOp_t op : o.ops) {
      const size_t es = collie::typeSize(type);
      for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
        const size_t count = bytes / es;
        std::vector<char> send(count * es + 1), recv(count * es + 1);
        for (size_t i = 0; i < count; ++i) storeValue(type, send.data(), i, checkValue(op, job.rank, i, job.nranks));
        double t[2], wrong[2];
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          t[inPlace] = timeRun(job, o, type, op, count, inPlace != 0, send, recv);
          wrong[inPlace] =
              o.check ? sumOverRanks(job, static_cast<double>(checkRun(job, type, op, count, inPlace != 0, send, recv)))
                      : -1;
          totalWrong += std::max(0.0, wrong[inPlace]);
        }
        if (job.rank == 0) {
          printf("  %10zu %12zu %8s %6s %6d", count * es, count, collie::typeName(type), collie::opName(op), -1);
          for (int k = 0; k < 2; ++k) {
            const double algbw = t[k] > 0 ? static_cast<double>(count * es) / t[k] / 1e9 : 0;
            printf(" %10.2f %8.3f %8.3f %6.0f", t[k] * 1e6, algbw, algbw * busFactor, wrong[k]);
            busSum += algbw * busFactor;
            ++busCount;
          }
          printf("\n");
          fflush(stdout);
        }
        const size_t next =
            o.increment ? bytes + o.increment : static_cast<size_t>(static_cast<double>(bytes) * o.factor);
        if (next <= bytes) break;
        bytes = next;
      }
    }
  }
  if (job.rank == 0) {
    printf("# Out of bounds values : %.0f %s\n", totalWrong, totalWrong == 0 ? "OK" : "FAILED");
    printf("# Avg bus bandwidth    : %.4f GB/s\n#\n", busCount ? busSum / busCount : 0.0);
  }
  return totalWrong == 0 ? 0 : 1;
}

// Communicator create + destroy, timed from the first call to the return of
// the slowest rank, with every rank already running and synchronised.
int runInit(const Job& job, const Options& o) {
  std::vector<double> times;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    collieUniqueId id;
    memset(&id, 0, sizeof(id));
    if (job.rank == 0) BENCH_CHECK(collieGetUniqueId(&id));
    // Broadcast the id: the other ranks add zeros.
    BENCH_CHECK(collieAllReduce(&id, &id, sizeof(id), collieUint8, collieSum, job.comm, nullptr));
    barrier(job);
    const Clock::time_point t0 = Clock::now();
    collieComm_t c = nullptr;
    BENCH_CHECK(collieCommInitRank(&c, job.nranks, id, job.rank));
    const double initSec = std::chrono::duration<double>(Clock::now() - t0).count();
    BENCH_CHECK(collieCommDestroy(c));
    const double slowest = maxOverRanks(job, initSec);
    if (it >= o.warmup) times.push_back(slowest);
  }
  // The same through collieCommInitAll: N ranks as threads of one process.
  std::vector<double> threadTimes;
  if (job.rank == 0) {
    std::vector<collieComm_t> comms(static_cast<size_t>(job.nranks));
    for (int it = 0; it < o.warmup + o.iters; ++it) {
      const Clock::time_point t0 = Clock::now();
      BENCH_CHECK(collieCommInitAll(comms.data(), job.nranks, nullptr));
      const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
      for (collieComm_t c : comms) BENCH_CHECK(collieCommDestroy(c));
      if (it >= o.warmup) threadTimes.push_back(sec);
    }
  }
  if (job.rank == 0) {
    auto line = [&](const char* what, std::vector<double> v) {
      std::sort(v.begin(), v.end());
      double sum = 0;
      for (double x : v) sum += x;
      printf("  %-34s %8.2f %8.2f %8.2f\n", what, v.front() * 1e3, sum / v.size() * 1e3, v.back() * 1e3);
    };
    printf("# collie-bench init: communicator of %d ranks on this host, %d iterations after %d warm-up\n", job.nranks,
           o.iters, o.warmup);
    printf("# %-34s %8s %8s %8s\n", "path", "min(ms)", "avg(ms)", "max(ms)");
    line("collieCommInitRank, processes", times);
    line("collieCommInitAll, threads", threadTimes);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
    return usage(argc < 2 ? "no mode" : nullptr);
  Options o;
  o.mode = argv[1];
  if (o.mode != "allreduce" && o.mode != "init")
    return usage(("unknown mode '" + o.mode + "' (this version has allreduce and init)").c_str());
  std::vector<std::string> passOn = {argv[0], argv[1]};  // arguments for self-launched ranks
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) return usage(("option " + a + " needs a value").c_str());
    bool ok = true;
    if (a == "-np") {
      o.nprocs = atoi(v);
      ok = o.nprocs >= 1 && o.nprocs <= 1024;
    } else {
      if (a == "-b")
        ok = parseBytes(v, &o.minBytes);
      else if (a == "-e")
        ok = parseBytes(v, &o.maxBytes);
      else if (a == "-f")
        ok = (o.factor = atof(v)) > 1;
      else if (a == "-i")
        ok = parseBytes(v, &o.increment);
      else if (a == "-n")
        ok = (o.iters = atoi(v)) >= 1;
      else if (a == "-w")
        ok = (o.warmup = atoi(v)) >= 0;
      else if (a == "-c")
        o.check = atoi(v) != 0;
      else if (a == "-d")
        ok = parseType(v, &o.types);
      else if (a == "-o")
        ok = parseOp(v, &o.ops);
      else
        return usage(("unknown option " + a).c_str());
      passOn.push_back(a);
      passOn.push_back(v);
    }
    if (!ok) return usage(("bad value for " + a + ": " + v).c_str());
    ++i;
  }
  if (o.minBytes > o.maxBytes) return usage("-b is larger than -e");

  // Self-launch unless a launcher already started us.
  const bool underLauncher = getenv("COLLIE_RANK") || getenv("OMPI_COMM_WORLD_RANK") || getenv("SLURM_PROCID");
  if (o.nprocs > 0 && !underLauncher) {
    collie::launcher::Options lo;
    lo.nprocs = o.nprocs;
    lo.argv = passOn;
    lo.argv[0] = "/proc/self/exe";
    lo.prefixOutput = false;  // only rank 0 prints the table
    return collie::launcher::run(lo);
  }

  Job job;
  BENCH_CHECK(collieCommInitFromEnv(&job.comm, nullptr));
  BENCH_CHECK(collieCommUserRank(job.comm, &job.rank));
  BENCH_CHECK(collieCommCount(job.comm, &job.nranks));
  const int rc = o.mode == "init" ? runInit(job, o) : runAllReduce(job, o);
  BENCH_CHECK(collieCommDestroy(job.comm));
  return rc;
}
