#include "bench/options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/traffic.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace bench {

namespace {

const char kUsage[] =
    "Usage: collie-bench COLLECTIVE|init [options]\n"
    "  COLLECTIVE: allreduce allgather reducescatter broadcast reduce alltoall alltoallv gather scatter sendrecv\n"
    "  init: time to create and destroy a communicator, and the memory it holds\n"
    "\n"
    "Ranks (without -np: join collie-run / mpirun / srun, or run one process):\n"
    "  -np N          start N local processes of this command (under mpirun with --vs mpi)\n"
    "  -t N           threads per process, each with its own ranks (default 1)\n"
    "  -g N           ranks per thread, driven through one group call (default 1)\n"
    "  --backend B    auto, host or cuda (default: COLLIE_DEVICE, else auto)\n"
    "\n"
    "Sweep (nccl-tests' flags):\n"
    "  -b BYTES       smallest size (default 8; K, M, G suffixes)\n"
    "  -e BYTES       largest size (default 64M)\n"
    "  -f FACTOR      multiply the size by FACTOR each step (default 2)\n"
    "  -i BYTES       add BYTES each step instead of multiplying\n"
    "  -n ITERS       timed iterations per size (default 20)\n"
    "  -w ITERS       warm-up iterations per size (default 5)\n"
    "  -c 0|1         check results in a separate run, count #wrong (default 1)\n"
    "  -d TYPE        int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2 | all\n"
    "  -o OP          sum prod max min avg | all (collectives that reduce)\n"
    "  -r ROOT        root of broadcast, reduce, gather, scatter (default 0)\n"
    "  -a 0|1|2|3     time of a row: rank 0's, mean, min or max over ranks (default 3: the slowest rank)\n"
    "  -z 0|1         wait for each call before issuing the next (device backends; host calls always do)\n"
    "  -G ITERS       launch the timed calls as CUDA graphs of ITERS calls (device backends; default 0)\n"
    "  --reps R       time R loops of -n calls each: a figure is the median loop's time per call, with the\n"
    "                 90th percentile beside it in --json and --jsonl (default 1), and the host's time inside\n"
    "                 the calls (issue_us: their enqueue) too\n"
    "\n"
    "Side by side:\n"
    "  --algo A       Collie algorithm(s): NAME[,NAME...], auto (the tuner), auto_direct (the tuner with\n"
    "                 COLLIE_DIRECT_TUNE=1) or all (auto and every algorithm); file:PATH for a program file\n"
    "                 (docs/program-files.md); direct_oneshot+one_launch: allreduce direct_oneshot with one\n"
    "                 launch serving every rank (COLLIE_DIRECT_ONE_LAUNCH=1); default: as COLLIE_ALGO and the\n"
    "                 tuner decide\n"
    "  --vs nccl|mpi  also run NCCL (libnccl.so.2, loaded at run time) or OpenMPI on the same cases;\n"
    "                 may be repeated or given as nccl,mpi\n"
    "  --limit        measure the memory-copy bandwidth (bytes read + written) of each size in the same run,\n"
    "                 and show the bytes each Collie rank reads and writes per call (traffic) against it\n"
    "  --bare         also time a bare loop of Collie's calls, to show the benchmark's own overhead\n"
    "  --traffic T    alltoallv: uniform | random | zipf[:s] | moe[:tokens,topk,experts] | file:PATH\n"
    "  --seed N       seed of the inputs and the traffic (default: random, printed)\n"
    "  --mpirun PATH  mpirun used by -np with --vs mpi (default: the one found at build time)\n"
    "\n"
    "Output (the table always goes to stdout):\n"
    "  --json FILE    every figure and the run's settings, machine, versions and command\n"
    "  --csv FILE     the same as one CSV table\n"
    "  --jsonl FILE   appends a JSON line per figure as the rows go: median and p90 time, busbw, #wrong and,\n"
    "                 with --limit, the share of the byte floor (docs/PERFORMANCE.md, \"Floors and ceilings\")\n"
    "  --plot FILE    SVG plot of busbw against size, one line per implementation and for the limit\n"
    "  --summary      after the table, per size range: Collie against each baseline and the copy limit\n"
    "  --progress     progress lines on stderr (on by itself when stderr is a terminal)\n";

bool parseBytes(const char* s, size_t* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || !(v >= 0)) return false;
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
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v > 1e15) return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  const long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseTypes(const std::string& s, std::vector<collieDataType_t>* out) {
  out->clear();
  for (int t = 0; t < collieNumTypes; ++t)
    if (s == "all" || s == typeName(static_cast<collieDataType_t>(t))) out->push_back(static_cast<collieDataType_t>(t));
  return !out->empty();
}

bool parseOps(const std::string& s, std::vector<collieRedOp_t>* out) {
  out->clear();
  for (int o = 0; o < collieNumOps; ++o)
    if (s == "all" || s == opName(static_cast<collieRedOp_t>(o))) out->push_back(static_cast<collieRedOp_t>(o));
  return !out->empty();
}

int fail(const std::string& msg) {
  fprintf(stderr, "collie-bench: %s\n(collie-bench --help lists the options)\n", msg.c_str());
  return 2;
}

// Options that take no value.
bool isFlag(const std::string& a) { return a == "--limit" || a == "--bare" || a == "--progress" || a == "--summary"; }

}  // namespace

std::string humanBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), bytes == static_cast<double>(static_cast<long long>(bytes)) ? "%.0f %s" : "%.1f %s", bytes,
           kUnits[u]);
  return buf;
}

int parseOptions(int argc, char** argv, Options* o) {
  for (int i = 0; i < argc; ++i) o->argv.push_back(argv[i]);
  if (argc < 2) return fail("no collective named");
  const std::string mode = argv[1];
  if (mode == "-h" || mode == "--help") {
    fputs(kUsage, stdout);
    return 0;
  }
  o->mode = mode;
  if (mode == "init") {
    o->initMode = true;
  } else if (!collFromName(mode, &o->coll)) {
    return fail("unknown collective '" + mode +
                "' (allreduce allgather reducescatter broadcast reduce alltoall alltoallv gather scatter sendrecv "
                "init)");
  }
  o->passOn = {argv[0], argv[1]};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      return 0;
    }
    if (isFlag(a)) {
      if (a == "--limit") o->limit = true;
      if (a == "--bare") o->bare = true;
      if (a == "--progress") o->progress = true;
      if (a == "--summary") o->summary = true;
      o->passOn.push_back(a);
      continue;
    }
    if (i + 1 >= argc) return fail("option " + a + " needs a value");
    const char* v = argv[++i];
    bool ok = true;
    int flag = 0;
    if (a == "-np") {
      ok = parseInt(v, 1, 4096, &o->nprocs);
      if (!ok) return fail(std::string("bad value for -np: ") + v);
      continue;  // a relaunched rank must not launch again
    } else if (a == "-t") {
      ok = parseInt(v, 1, 1024, &o->threads);
    } else if (a == "-g") {
      ok = parseInt(v, 1, 1024, &o->perThread);
    } else if (a == "-b") {
      ok = parseBytes(v, &o->minBytes);
    } else if (a == "-e") {
      ok = parseBytes(v, &o->maxBytes);
    } else if (a == "-f") {
      ok = (o->factor = atof(v)) > 1;
    } else if (a == "-i") {
      ok = parseBytes(v, &o->increment);
    } else if (a == "-n") {
      ok = parseInt(v, 1, 1 << 30, &o->iters);
    } else if (a == "-w") {
      ok = parseInt(v, 0, 1 << 30, &o->warmup);
    } else if (a == "-c") {
      ok = parseInt(v, 0, 1 << 30, &flag);
      o->check = flag != 0;
    } else if (a == "-d") {
      ok = parseTypes(v, &o->types);
    } else if (a == "-o") {
      ok = parseOps(v, &o->ops);
    } else if (a == "-r") {
      ok = parseInt(v, 0, 1 << 30, &o->root);
    } else if (a == "-a") {
      ok = parseInt(v, 0, 3, &flag);
      o->average = static_cast<Average>(flag);
    } else if (a == "-z") {
      ok = parseInt(v, 0, 1, &flag);
      o->blocking = flag != 0;
    } else if (a == "-G") {
      ok = parseInt(v, 0, 1 << 20, &o->graphIters);
    } else if (a == "--backend") {
      const std::string b = v;
      o->backendSet = true;
      if (b == "auto")
        o->backend = collieBackendAuto;
      else if (b == "host")
        o->backend = collieBackendHost;
      else if (b == "cuda")
        o->backend = collieBackendCuda;
      else
        ok = false;
    } else if (a == "--algo") {
      o->algo = v;
      ok = !o->algo.empty();
    } else if (a == "--vs") {
      const std::string s = v;
      ok = s == "nccl" || s == "mpi" || s == "nccl,mpi" || s == "mpi,nccl";
      if (s.find("nccl") != std::string::npos) o->vsNccl = true;
      if (s.find("mpi") != std::string::npos) o->vsMpi = true;
    } else if (a == "--traffic") {
      o->traffic = v;
      Traffic t;
      std::string err;
      if (!parseTraffic(v, &t, &err)) return fail("--traffic: " + err);
    } else if (a == "--seed") {
      char* end = nullptr;
      o->seed = strtoull(v, &end, 0);
      ok = end != v && *end == '\0';
      o->seedSet = true;
    } else if (a == "--json") {
      o->jsonPath = v;
    } else if (a == "--reps") {
      ok = parseInt(v, 1, 1000, &o->reps);
    } else if (a == "--jsonl") {
      o->jsonlPath = v;
    } else if (a == "--csv") {
      o->csvPath = v;
    } else if (a == "--plot") {
      o->plotPath = v;
    } else if (a == "--mpirun") {
      o->mpirun = v;
    } else if (a == "--launched-as") {
      o->launchedAs = v;  // not in the usage: -np adds it for the ranks it starts
      continue;
    } else {
      return fail("unknown option " + a);
    }
    if (!ok) return fail("bad value for " + a + ": " + v);
    o->passOn.push_back(a);
    o->passOn.push_back(v);
  }
  if (o->minBytes > o->maxBytes) return fail("-b is larger than -e");
  if (o->traffic != "uniform" && o->coll != Coll::kAllToAllv && !o->initMode)
    return fail("--traffic applies to alltoallv");
  if (o->initMode && (o->limit || o->bare || o->summary || !o->plotPath.empty() || !o->jsonlPath.empty()))
    return fail("--limit, --bare, --summary, --plot and --jsonl apply to collectives, not to init");
  return -1;
}

}  // namespace bench
}  // namespace collie
