// The ceilings a GPU's collectives are read against (docs/PERFORMANCE.md, "Floors and ceilings"), as JSON lines,
// one per figure, on stdout and appended to FILE with --jsonl:
//   machine          the GPU: name, SMs, clocks, memory bus and size, L2, driver and runtime versions
//   copy_engine      k streams at once, each copying its own S bytes device to device (cudaMemcpyAsync); at k = n
//                    this is the rate of the byte floor of a collective of n ranks on one GPU
//   sm_copy          the same with the SMs' copy kernel (kernels/ceiling_kernels.h) on each stream
//   ideal_allreduce  n inputs of S read once, reduced (float sum), stored into n outputs, with no synchronisation:
//                    "grids" 1 is one launch over all of S, "grids" n is n launches of S/n on n streams at once
//                    (the shape of n ranks' kernels)
//   ce_alltoall      the copy engine's all-to-all: n streams, stream s copying block q of input s into block s of
//                    output q for every q (n cudaMemcpyAsync per stream), S bytes in each input and output; what
//                    the direct all-to-all kernel would be replaced by, timed beside it by collie-bench at size S
//   ce_allgather     the same for allgather: stream s copying input s (S/n bytes) into block s of every output
// k and n run over 1 and the --ranks list. Each figure: the median, p90 and least over REPS timed repetitions
// of ITERS calls (host clock from the first launch to the last stream's end, per call), and the rate at the
// median as bytes read plus written per second, in GB/s. The first and last 4096 elements of each output are
// checked ("wrong" counts those that differ; the copy engine's collectives check the first 4096 of each output's
// first block).
// Run by tests/gpu/run.sh as perf_ceilings; exits 77 without a GPU.
// Usage: ceilings [--jsonl FILE] [--bytes S,...] [--ranks n,...] [--reps R] [--iters I]
//   (S with K, M or G: bytes per stream or rank, default 64M,256M; ranks 2,4,8; R 5; I 10)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_usable.h"
#include "kernels/ceiling_kernels.h"

namespace {

using collie::CeilingArgs;
constexpr int kThreads = 512;
constexpr size_t kChecked = 4096;  // elements checked at each end of an output

struct Options {
  std::string jsonl;
  std::vector<size_t> bytes{64u << 20, 256u << 20};
  std::vector<int> ranks{2, 4, 8};
  int reps = 5, iters = 10;
};

bool parseBytes(const std::string& s, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = strtoull(s.c_str(), &end, 10);
  size_t unit = 1;
  if (*end == 'K') unit = 1u << 10;
  if (*end == 'M') unit = 1u << 20;
  if (*end == 'G') unit = 1u << 30;
  if (end == s.c_str() || (unit > 1 ? end[1] != '\0' : *end != '\0')) return false;
  *out = static_cast<size_t>(v) * unit;
  return true;
}

template <typename T, typename F>
bool parseList(const std::string& s, std::vector<T>* out, F parse) {
  out->clear();
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    T v{};
    if (!parse(s.substr(at, comma - at), &v)) return false;
    out->push_back(v);
    at = comma + 1;
  }
  return !out->empty();
}

FILE* g_jsonl = nullptr;
void emit(const std::string& line) {
  printf("%s\n", line.c_str());
  fflush(stdout);
  if (g_jsonl != nullptr) fprintf(g_jsonl, "%s\n", line.c_str());
}

std::string fmt(const char* f, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), f, v);
  return buf;
}

int fail(const char* what, cudaError_t e) {
  fprintf(stderr, "ceilings: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

// Buffers and streams of one measurement: `count` floats each; input p holds p + 1 in its checked ends, 0 between.
struct Arrays {
  std::vector<float*> in, out;
  std::vector<cudaStream_t> streams;
  ~Arrays() {
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
    for (float* p : in) cudaFree(p);
    for (float* p : out) cudaFree(p);
  }
  cudaError_t allocate(int n, size_t count, int nstreams) {
    for (int k = 0; k < nstreams; ++k) {
      cudaStream_t s = nullptr;
      if (const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) return e;
      streams.push_back(s);
    }
    const size_t ends = std::min(kChecked, count);
    for (int p = 0; p < n; ++p) {
      float *a = nullptr, *b = nullptr;
      cudaError_t e = cudaMalloc(&a, count * sizeof(float));
      if (e == cudaSuccess) in.push_back(a);
      if (e == cudaSuccess) e = cudaMalloc(&b, count * sizeof(float));
      if (e == cudaSuccess) out.push_back(b);
      if (e == cudaSuccess) e = cudaMemset(a, 0, count * sizeof(float));
      if (e == cudaSuccess) e = cudaMemset(b, 0xff, count * sizeof(float));
      const std::vector<float> mark(ends, static_cast<float>(p + 1));
      if (e == cudaSuccess) e = cudaMemcpy(a, mark.data(), ends * sizeof(float), cudaMemcpyHostToDevice);
      if (e == cudaSuccess) e = cudaMemcpy(a + count - ends, mark.data(), ends * sizeof(float), cudaMemcpyHostToDevice);
      if (e != cudaSuccess) return e;
    }
    // A copy from pageable memory may still be on its way when cudaMemcpy returns, and the timed streams do not
    // wait for the legacy stream.
    return cudaDeviceSynchronize();
  }
  // Elements of output q's checked ends that differ from `want(q)`.
  template <typename F>
  long long wrong(size_t count, F want) const {
    const size_t ends = std::min(kChecked, count);
    std::vector<float> got(ends);
    long long bad = 0;
    for (size_t q = 0; q < out.size(); ++q)
      for (size_t at : {size_t{0}, count - ends}) {
        if (cudaMemcpy(got.data(), out[q] + at, ends * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
          return static_cast<long long>(count);
        for (float v : got) bad += v != want(static_cast<int>(q)) ? 1 : 0;
      }
    return bad;
  }
};

struct Timing {
  double median = 0, p90 = 0, least = 0;  // seconds per call
};

// REPS repetitions of ITERS calls of `call(stream index)` on every stream, after one untimed.
template <typename F>
cudaError_t timeCalls(const Options& o, std::vector<cudaStream_t>& streams, F call, Timing* t) {
  std::vector<double> samples;
  for (int rep = -1; rep < o.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const int iters = rep < 0 ? 1 : o.iters;
    for (int i = 0; i < iters; ++i)
      for (size_t s = 0; s < streams.size(); ++s)
        if (const cudaError_t e = call(s)) return e;
    for (cudaStream_t s : streams)
      if (const cudaError_t e = cudaStreamSynchronize(s)) return e;
    if (rep >= 0)
      samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  t->least = samples.front();
  t->median = samples[samples.size() / 2];
  t->p90 = samples[std::min(samples.size() - 1, (samples.size() * 9 + 9) / 10 - 1)];
  return cudaSuccess;
}

void emitFigure(const std::string& what, const std::string& shape, size_t bytes, double moved, const Timing& t,
                long long wrong) {
  emit("{\"kind\": \"ceiling\", \"what\": \"" + what + "\", " + shape + ", \"bytes\": " + std::to_string(bytes) +
       ", \"median_us\": " + fmt("%.3f", t.median * 1e6) + ", \"p90_us\": " + fmt("%.3f", t.p90 * 1e6) +
       ", \"min_us\": " + fmt("%.3f", t.least * 1e6) + ", \"rate_gbps\": " + fmt("%.1f", moved / t.median / 1e9) +
       ", \"wrong\": " + std::to_string(wrong) + "}");
}

// k streams, each copying its own `bytes`, by the copy engine or the SMs.
int copies(const Options& o, int k, size_t bytes, bool engine) {
  const size_t count = bytes / sizeof(float);
  Arrays a;
  cudaError_t e = a.allocate(k, count, k);
  std::vector<cudaStream_t>& streams = a.streams;
  int blocks = 0;
  if (e == cudaSuccess && !engine) e = static_cast<cudaError_t>(collie::ceilingBlocks(1, kThreads, k, &blocks));
  Timing t;
  if (e == cudaSuccess)
    e = timeCalls(
        o, streams,
        [&](size_t s) {
          if (engine) return cudaMemcpyAsync(a.out[s], a.in[s], bytes, cudaMemcpyDeviceToDevice, streams[s]);
          CeilingArgs args;
          args.count = count;
          args.src[0] = a.in[s];
          args.dst[0] = a.out[s];
          return static_cast<cudaError_t>(collie::launchCeiling(args, blocks, kThreads, streams[s]));
        },
        &t);
  if (e != cudaSuccess) return fail(engine ? "copy_engine" : "sm_copy", e);
  const long long wrong = a.wrong(count, [](int q) { return static_cast<float>(q + 1); });
  emitFigure(engine ? "copy_engine" : "sm_copy",
             "\"streams\": " + std::to_string(k) + (engine ? "" : ", \"blocks\": " + std::to_string(blocks)), bytes,
             2.0 * k * static_cast<double>(bytes), t, wrong);
  return wrong == 0 ? 0 : 1;
}

// n inputs reduced into n outputs, by one grid or by n grids of a chunk each.
int idealAllReduce(const Options& o, int n, size_t bytes, int grids) {
  const size_t count = bytes / sizeof(float);
  Arrays a;
  cudaError_t e = a.allocate(n, count, grids);
  std::vector<cudaStream_t>& streams = a.streams;
  int blocks = 0;
  if (e == cudaSuccess) e = static_cast<cudaError_t>(collie::ceilingBlocks(n, kThreads, grids, &blocks));
  Timing t;
  if (e == cudaSuccess)
    e = timeCalls(
        o, streams,
        [&](size_t s) {
          const size_t first = count * s / streams.size(), last = count * (s + 1) / streams.size();
          CeilingArgs args;
          args.nsrc = args.ndst = n;
          args.count = last - first;
          for (int p = 0; p < n; ++p) {
            args.src[p] = a.in[static_cast<size_t>(p)] + first;
            args.dst[p] = a.out[static_cast<size_t>(p)] + first;
          }
          return static_cast<cudaError_t>(collie::launchCeiling(args, blocks, kThreads, streams[s]));
        },
        &t);
  if (e != cudaSuccess) return fail("ideal_allreduce", e);
  const float sum = static_cast<float>(n * (n + 1) / 2);
  const long long wrong = a.wrong(count, [sum](int) { return sum; });
  emitFigure("ideal_allreduce",
             "\"ranks\": " + std::to_string(n) + ", \"grids\": " + std::to_string(grids) +
                 ", \"blocks\": " + std::to_string(blocks),
             bytes, 2.0 * n * static_cast<double>(bytes), t, wrong);
  return wrong == 0 ? 0 : 1;
}

// The copy engine moving an all-to-all or an allgather of n ranks, S bytes per rank's output: n streams, n
// cudaMemcpyAsync each per call.
int ceCollective(const Options& o, int n, size_t bytes, bool alltoall) {
  const size_t count = bytes / sizeof(float), block = count / static_cast<size_t>(n);
  Arrays a;
  cudaError_t e = a.allocate(n, count, n);
  std::vector<cudaStream_t>& streams = a.streams;
  Timing t;
  if (e == cudaSuccess)
    e = timeCalls(
        o, streams,
        [&](size_t s) {
          cudaError_t rc = cudaSuccess;
          for (size_t q = 0; q < streams.size() && rc == cudaSuccess; ++q) {
            const float* from = a.in[s] + (alltoall ? q * block : 0);
            rc = cudaMemcpyAsync(a.out[q] + s * block, from, block * sizeof(float), cudaMemcpyDeviceToDevice,
                                 streams[s]);
          }
          return rc;
        },
        &t);
  if (e != cudaSuccess) return fail(alltoall ? "ce_alltoall" : "ce_allgather", e);
  // Block 0 of each output comes from input 0: all-to-all, its block q; allgather, its block 0. Input 0 holds 1 in
  // its first and last `ends` elements (Arrays::allocate), 0 between.
  const size_t ends = std::min(kChecked, count), checked = std::min(kChecked, block);
  auto marked = [&](size_t x) { return x < ends || x >= count - ends ? 1.0f : 0.0f; };
  long long wrong = 0;
  std::vector<float> got(checked);
  for (int q = 0; q < n; ++q) {
    if (cudaMemcpy(got.data(), a.out[static_cast<size_t>(q)], checked * sizeof(float), cudaMemcpyDeviceToHost) !=
        cudaSuccess)
      return fail("reading an output", cudaErrorUnknown);
    for (size_t x = 0; x < checked; ++x)
      wrong += got[x] != marked((alltoall ? static_cast<size_t>(q) * block : 0) + x) ? 1 : 0;
  }
  const double moved = 2.0 * n * static_cast<double>(bytes);  // every stream copies S bytes, read and written
  emitFigure(alltoall ? "ce_alltoall" : "ce_allgather", "\"ranks\": " + std::to_string(n), bytes, moved, t, wrong);
  return wrong == 0 ? 0 : 1;
}

void emitMachine() {
  cudaDeviceProp prop;
  memset(&prop, 0, sizeof(prop));
  int device = 0, sms = 0, smKhz = 0, memKhz = 0, busBits = 0, l2 = 0, driver = 0, runtime = 0;
  cudaGetDevice(&device);
  cudaGetDeviceProperties(&prop, device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  cudaDeviceGetAttribute(&smKhz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&memKhz, cudaDevAttrMemoryClockRate, device);
  cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, device);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  std::string name;
  for (const char* c = prop.name; *c != '\0'; ++c)
    if (*c != '"' && *c != '\\') name += *c;
  emit("{\"kind\": \"machine\", \"gpu\": \"" + name + "\", \"sms\": " + std::to_string(sms) +
       ", \"sm_clock_mhz\": " + std::to_string(smKhz / 1000) + ", \"mem_clock_mhz\": " + std::to_string(memKhz / 1000) +
       ", \"bus_bits\": " + std::to_string(busBits) +
       ", \"memory_gib\": " + fmt("%.1f", static_cast<double>(prop.totalGlobalMem) / (1u << 30)) +
       ", \"l2_mib\": " + fmt("%.1f", l2 / 1048576.0) + ", \"driver\": " + std::to_string(driver) +
       ", \"runtime\": " + std::to_string(runtime) + "}");
}

}  // namespace

int main(int argc, char** argv) {
  const int probe = collie::test::gpuProbe(argc, argv);
  if (probe >= 0) return probe;
  Options o;
  auto toInt = [](const std::string& s, int* v) {
    char* end = nullptr;
    *v = static_cast<int>(strtol(s.c_str(), &end, 10));
    return end != s.c_str() && *end == '\0';
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i], value = i + 1 < argc ? argv[i + 1] : "";
    bool ok = i + 1 < argc;
    if (arg == "--jsonl")
      o.jsonl = value;
    else if (arg == "--bytes")
      ok = ok && parseList(value, &o.bytes, parseBytes);
    else if (arg == "--ranks")
      ok = ok && parseList(value, &o.ranks, [&](const std::string& s, int* v) {
             return toInt(s, v) && *v >= 2 && *v <= collie::kCeilingMaxSources;
           });
    else if (arg == "--reps")
      ok = ok && toInt(value, &o.reps) && o.reps >= 1;
    else if (arg == "--iters")
      ok = ok && toInt(value, &o.iters) && o.iters >= 1;
    else
      ok = false;
    if (!ok) {
      fprintf(stderr, "usage: ceilings [--jsonl FILE] [--bytes S,...] [--ranks n,...] [--reps R] [--iters I]\n");
      return 2;
    }
    ++i;
  }
  if (!o.jsonl.empty() && (g_jsonl = fopen(o.jsonl.c_str(), "a")) == nullptr) {
    fprintf(stderr, "ceilings: cannot append to %s\n", o.jsonl.c_str());
    return 1;
  }
  emitMachine();
  int rc = 0;
  std::vector<int> streams{1};
  streams.insert(streams.end(), o.ranks.begin(), o.ranks.end());
  for (size_t bytes : o.bytes) {
    for (int k : streams) rc |= copies(o, k, bytes, true);
    for (int k : streams) rc |= copies(o, k, bytes, false);
    for (int n : o.ranks) {
      rc |= idealAllReduce(o, n, bytes, 1);
      rc |= idealAllReduce(o, n, bytes, n);
    }
    for (int n : o.ranks) {
      rc |= ceCollective(o, n, bytes, true);
      rc |= ceCollective(o, n, bytes, false);
    }
  }
  if (g_jsonl != nullptr) fclose(g_jsonl);
  return rc;
}
