// collie-sim: the algorithm researcher's bench without hardware. Lists the
// registry, prints programs (as tables or as a picture of who talks to whom),
// runs the verifier over many shapes, and predicts times on a topology with
// the simulator, comparing every algorithm of a collective across sizes.
// Everything works over collie::algorithms(), so a newly registered algorithm
// shows up in every subcommand without touching this file.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/memory_traffic.h"
#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "algorithms/simulator.h"
#include "algorithms/topology.h"
#include "algorithms/tuner.h"
#include "algorithms/verify_sweep.h"
#include "executor/direct_sends.h"
#include "tools/collie_sim_picture.h"

namespace {

using collie::AlgorithmInfo;
using collie::Collective;
using collie::Program;
using collie::ProgramArgs;

constexpr int kUsageError = 2;
constexpr int kMaxShowRanks = 1024;

void printUsage(FILE* out) {
  std::fprintf(out,
               "Usage: collie-sim COMMAND [ARGS] [OPTIONS]\n"
               "Prints, verifies and simulates Collie's collective algorithms.\n"
               "\n"
               "Commands:\n"
               "  list                                   every algorithm: collective, name, round rule, description\n"
               "                                         (rounds \"direct\": ranks must map each other's buffers)\n"
               "  show COLLECTIVE ALGO -n N [--count C] [--root R] [--rank R | --all] [--picture]\n"
               "       [--ranks-per-node L]\n"
               "  show FILE [--count C] [--rank R] [--picture]\n"
               "                                         the program of each rank (or of rank R) as a table, or\n"
               "                                         with --picture who sends to whom at each step\n"
               "  verify [COLLECTIVE [ALGO]] [--max-ranks M] [--counts LIST] [--seed S]\n"
               "                                         proves the algorithms for n = 1..M (default 64) with the\n"
               "                                         verifier; exit status 1 on any failure\n"
               "  verify FILE                            checks and proves a program file (a path: it holds '/'\n"
               "                                         or '.'); exit status 1 when it is wrong\n"
               "  predict COLLECTIVE ALGO --topo T [-n N] --bytes B [--type TYPE] [--root R]\n"
               "                                         predicted time and bandwidth of one call; ALGO may be\n"
               "                                         file:PATH, a program file (-n must be its rank count)\n"
               "  compare COLLECTIVE [file:PATH...] --topo T [-n N] [-b MIN] [-e MAX] [-f FACTOR] [--type TYPE]\n"
               "                                         predicted time of every algorithm (and of the program\n"
               "                                         files named) per size, the winner, and the sizes where\n"
               "                                         the winner changes\n"
               "  topo [NAME|FILE]                       the built-in topologies, or one in the file format\n"
               "  export COLLECTIVE ALGO -n N [--root R] [--ranks-per-node L]\n"
               "                                         the algorithm's programs as a program file (JSON, in\n"
               "                                         chunks; docs/algorithms.md) on standard output\n"
               "\n"
               "Options:\n"
               "  -n N             number of ranks (predict/compare: default the topology's)\n"
               "  --count C        show: the count argument (elements; default N)\n"
               "  --root R         root of broadcast, reduce, gather, scatter (default 0)\n"
               "  --rank R, --all  show one rank's program, or every rank's (the default)\n"
               "  --ranks-per-node L\n"
               "                   show: L consecutive ranks to a node, for node-aware algorithms (hier)\n"
               "  --picture        show: a grid, one column per rank and one row per step\n"
               "  --max-ranks M    verify: largest rank count, 1..64 (default 64)\n"
               "  --counts LIST    verify: comma-separated counts, numbers or n, n-1, n+1\n"
               "                   (default 0,1,n-1,n+1,13; n-1 is 2 when n is 1)\n"
               "  --seed S         verify: seed of all-to-all-v's random splits (default 1)\n"
               "  --topo T         a built-in topology (%s) or a topology file\n"
               "  --bytes B        predict: the size as nccl-tests counts it (allgather, reducescatter,\n"
               "                   alltoall, gather, scatter: all ranks' blocks; others: the buffer)\n"
               "  -b, -e, -f       compare: sizes from MIN (default 8) to MAX (default 1G), times FACTOR (2)\n"
               "  --type TYPE      element type: int8, uint8, half, bfloat16, int32, uint32, float, int64,\n"
               "                   uint64, double, fp8e4m3, fp8e5m2 (default float)\n"
               "  -h, --help       this help\n"
               "Sizes take K, M, G, T suffixes (powers of 1024): 8, 64K, 1G.\n"
               "Exit status: 0 success, 1 a verification failed or a simulation failed, 2 bad arguments.\n",
               collie::topologyNames().c_str());
}

int usageError(const std::string& message) {
  std::fprintf(stderr, "collie-sim: %s\nTry 'collie-sim --help' for more information.\n", message.c_str());
  return kUsageError;
}

// Strict decimal, no sign, at most `max`.
bool parseUnsigned(const char* text, uint64_t max, uint64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  uint64_t v = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    const uint64_t d = static_cast<uint64_t>(*p - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// "64K", "1G", "8": powers of 1024, as nccl-tests reads -b and -e.
bool parseSize(const char* text, uint64_t* out) {
  if (text == nullptr) return false;
  std::string digits = text;
  uint64_t scale = 1;
  if (!digits.empty()) {
    const char s = static_cast<char>(std::toupper(static_cast<unsigned char>(digits.back())));
    const int shift = s == 'K' ? 10 : s == 'M' ? 20 : s == 'G' ? 30 : s == 'T' ? 40 : 0;
    if (shift) {
      scale = uint64_t{1} << shift;
      digits.pop_back();
    }
  }
  uint64_t v = 0;
  if (!parseUnsigned(digits.c_str(), (uint64_t{1} << 50) / scale, &v)) return false;
  *out = v * scale;
  return true;
}

std::string sizeName(uint64_t bytes) {
  const char* suffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return std::to_string(bytes) + suffix[i];
}

bool typeSize(const std::string& name, size_t* out) {
  static const struct {
    const char* name;
    size_t size;
  } types[] = {{"int8", 1},   {"char", 1},   {"uint8", 1},   {"fp8e4m3", 1}, {"fp8e5m2", 1},  {"f8e4m3", 1},
               {"f8e5m2", 1}, {"half", 2},   {"float16", 2}, {"fp16", 2},    {"bfloat16", 2}, {"bf16", 2},
               {"int32", 4},  {"int", 4},    {"uint32", 4},  {"float", 4},   {"float32", 4},  {"int64", 8},
               {"uint64", 8}, {"double", 8}, {"float64", 8}};
  for (const auto& t : types)
    if (name == t.name) {
      *out = t.size;
      return true;
    }
  return false;
}

const char* roundRuleName(collie::RoundRule r) {
  switch (r) {
    case collie::RoundRule::kOneSlot:
      return "one-slot";
    case collie::RoundRule::kRankSlots:
      return "rank-slots";
    case collie::RoundRule::kNodeSlots:
      return "node-slots";
    case collie::RoundRule::kFile:
      return "file";
    case collie::RoundRule::kNone:
      break;
  }
  return "none";
}

// ------------------------------------------------------------------ options

struct Options {
  std::vector<std::string> args;   // positional
  std::vector<std::string> given;  // option names seen
  uint64_t n = 0, count = 0, root = 0, rank = 0, maxRanks = 64, bytes = 0, seed = 1, perNode = 0;
  uint64_t minBytes = 8, maxBytes = uint64_t{1} << 30, factor = 2;
  bool all = false, picture = false;
  std::string topo, type = "float", counts;

  bool has(const char* name) const { return std::find(given.begin(), given.end(), name) != given.end(); }
};

// Parses argv[2..]; `allowed` lists the options the command takes.
int parseOptions(int argc, char** argv, const std::vector<std::string>& allowed, Options* o) {
  const std::string command = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-') {
      o->args.push_back(a);
      continue;
    }
    if (std::find(allowed.begin(), allowed.end(), a) == allowed.end())
      return usageError("'" + command + "' takes no option " + a);
    o->given.push_back(a);
    if (a == "--all" || a == "--picture") {
      (a == "--all" ? o->all : o->picture) = true;
      continue;
    }
    if (i + 1 >= argc) return usageError("option " + a + " needs a value");
    const char* v = argv[++i];
    bool ok = true;
    if (a == "-n") {
      ok = parseUnsigned(v, collie::kMaxTopologyRanks, &o->n) && o->n >= 1;
    } else if (a == "--count") {
      ok = parseSize(v, &o->count);
    } else if (a == "--root") {
      ok = parseUnsigned(v, collie::kMaxTopologyRanks, &o->root);
    } else if (a == "--ranks-per-node") {
      ok = parseUnsigned(v, collie::kMaxTopologyRanks, &o->perNode) && o->perNode >= 1;
    } else if (a == "--rank") {
      ok = parseUnsigned(v, collie::kMaxTopologyRanks, &o->rank);
    } else if (a == "--max-ranks") {
      ok = parseUnsigned(v, 64, &o->maxRanks) && o->maxRanks >= 1;
      if (!ok) return usageError("--max-ranks: expected 1..64 (the verifier's limit), got '" + std::string(v) + "'");
    } else if (a == "--seed") {
      ok = parseUnsigned(v, UINT64_MAX, &o->seed);
    } else if (a == "--bytes") {
      ok = parseSize(v, &o->bytes);
    } else if (a == "-b") {
      ok = parseSize(v, &o->minBytes);
    } else if (a == "-e") {
      ok = parseSize(v, &o->maxBytes);
    } else if (a == "-f") {
      ok = parseUnsigned(v, 1024, &o->factor) && o->factor >= 2;
      if (!ok) return usageError("-f: expected a whole factor from 2 to 1024, got '" + std::string(v) + "'");
    } else if (a == "--topo") {
      o->topo = v;
    } else if (a == "--type") {
      o->type = v;
    } else if (a == "--counts") {
      o->counts = v;
    }
    if (!ok) return usageError("option " + a + ": '" + std::string(v) + "' is not a valid value");
  }
  return 0;
}

int findCollective(const std::string& name, Collective* c) {
  if (!collie::collectiveFromName(name, c) || collie::defaultAlgorithm(*c) == nullptr)
    return usageError("unknown collective '" + name + "' (valid: " + collie::collectiveNames() + ")");
  return 0;
}

int findAlgo(Collective c, const std::string& name, const AlgorithmInfo** a) {
  if (name.rfind("file:", 0) == 0) {  // a program file (docs/program-files.md), checked and proved as it loads
    const collie::Status st = collie::fileAlgorithm(name.substr(5), c, a);
    if (st.ok()) return 0;
    std::printf("FAILED %s\n", st.message().c_str());
    return 1;
  }
  *a = collie::findAlgorithm(c, name.c_str());
  if (*a == nullptr)
    return usageError(std::string(collie::collectiveName(c)) + " has no algorithm '" + name +
                      "' (valid: " + collie::algorithmNames(c) + ")");
  return 0;
}

// A program file's algorithm runs on its own rank count and root only.
int fileFits(const AlgorithmInfo& a, int n, uint64_t root) {
  if (a.file == nullptr) return 0;
  if (a.file->nranks != n)
    return usageError(std::string(a.description) + " is for " + std::to_string(a.file->nranks) + " ranks, not " +
                      std::to_string(n));
  const Collective c = a.collective;
  const bool rooted =
      c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather || c == Collective::kScatter;
  if (rooted && root != static_cast<uint64_t>(a.file->root))
    return usageError(std::string(a.description) + " is for root " + std::to_string(a.file->root) + ", not " +
                      std::to_string(root));
  return 0;
}

// ------------------------------------------------------------------ list

int cmdList() {
  std::printf("%-14s %-14s %-11s %s\n", "collective", "algorithm", "rounds", "description");
  for (const AlgorithmInfo& a : collie::algorithms())
    std::printf("%-14s %-14s %-11s %s\n", collie::collectiveName(a.collective), a.name,
                a.mapsPeers ? "direct" : roundRuleName(a.rounds), a.description);
  return 0;
}

// ------------------------------------------------------------------ show

// ------------------------------------------------------------------ program files

// An argument that names a program file rather than a collective: collective names hold no '/' or '.'.
bool namesFile(const std::string& arg) {
  return arg.find('/') != std::string::npos || arg.find('.') != std::string::npos;
}

// Loads and checks a program file; prints why not and returns 1 when it cannot be used.
int loadFile(const std::string& path, collie::ProgramFile* file) {
  const collie::Status st = collie::loadProgramFile(path, file);
  if (st.ok()) return 0;
  std::printf("FAILED %s\n", st.message().c_str());
  return 1;
}

int cmdVerifyFile(const std::string& path) {
  collie::ProgramFile file;
  if (int rc = loadFile(path, &file)) return rc;
  std::string counts;
  const collie::Status st = collie::verifyProgramFile(file, path, &counts);
  if (!st.ok()) {
    std::printf("FAILED %s\n", st.message().c_str());
    return 1;
  }
  std::printf("%s: %s '%s' on %d ranks, %llu chunks: verified at %s\n", path.c_str(),
              collie::collectiveName(file.collective), file.name.c_str(), file.nranks,
              static_cast<unsigned long long>(file.chunks), counts.c_str());
  return 0;
}

// Every rank's program (or rank `only`'s), as steps or, with --picture, as a picture.
int printPrograms(const Options& o, const std::vector<Program>& programs, int only) {
  if (o.picture) {
    collie::sim::printPicture(programs, only);
    return 0;
  }
  for (const Program& p : programs)
    if (only < 0 || p.rank == only) std::printf("%s\n", p.describe().c_str());
  return 0;
}

int cmdShowFile(const Options& o, const std::string& path) {
  collie::ProgramFile file;
  if (int rc = loadFile(path, &file)) return rc;
  if (o.has("--rank") && o.rank >= static_cast<uint64_t>(file.nranks))
    return usageError("--rank " + std::to_string(o.rank) + " is not a rank of " + std::to_string(file.nranks));
  const uint64_t count = o.has("--count") ? o.count : file.chunks;
  std::vector<Program> programs;
  const collie::Status st = collie::programsForCount(file, count, &programs);
  if (!st.ok()) return usageError(st.message());
  std::printf("%s: %s '%s': %d ranks, count %llu (%llu chunks), root %d, scratch %llu elements on rank 0\n\n",
              path.c_str(), collie::collectiveName(file.collective), file.name.c_str(), file.nranks,
              static_cast<unsigned long long>(count), static_cast<unsigned long long>(file.chunks), file.root,
              static_cast<unsigned long long>(programs[0].scratchCount));
  const int only = o.has("--rank") ? static_cast<int>(o.rank) : -1;
  return printPrograms(o, programs, only);
}

int cmdShow(const Options& o) {
  if (o.args.size() == 1 && namesFile(o.args[0])) return cmdShowFile(o, o.args[0]);
  if (o.args.size() != 2) return usageError("show takes COLLECTIVE ALGO, e.g. 'show allreduce ring -n 4'");
  Collective c;
  const AlgorithmInfo* algo = nullptr;
  if (int rc = findCollective(o.args[0], &c)) return rc;
  if (int rc = findAlgo(c, o.args[1], &algo)) return rc;
  if (!o.has("-n")) return usageError("show needs -n N (the number of ranks)");
  if (o.n > static_cast<uint64_t>(kMaxShowRanks))
    return usageError("show: -n " + std::to_string(o.n) + " is more than " + std::to_string(kMaxShowRanks));
  const int n = static_cast<int>(o.n);
  if (int rc = fileFits(*algo, n, o.root)) return rc;
  if (o.has("--rank") && o.all) return usageError("show takes --rank R or --all, not both");
  if (o.has("--rank") && o.rank >= o.n)
    return usageError("--rank " + std::to_string(o.rank) + " is not a rank of " + std::to_string(n));
  if (o.root >= o.n) return usageError("--root " + std::to_string(o.root) + " is not a rank of " + std::to_string(n));
  const uint64_t count = o.has("--count") ? o.count : (algo->file != nullptr ? algo->file->chunks : o.n);
  if (count > (uint64_t{1} << 40)) return usageError("--count is too large to show");
  if (algo->file != nullptr && count % algo->file->chunks != 0)
    return usageError("--count " + std::to_string(count) + " is not a multiple of the file's " +
                      std::to_string(algo->file->chunks) + " chunks");
  if (o.has("--ranks-per-node") && n % static_cast<int>(o.perNode) != 0)
    return usageError("--ranks-per-node " + std::to_string(o.perNode) + " does not divide -n " + std::to_string(n));
  const std::vector<Program> programs =
      collie::buildPrograms(*algo, n, count, count, static_cast<int>(o.root), static_cast<int>(o.perNode));
  const int only = o.has("--rank") ? static_cast<int>(o.rank) : -1;
  std::printf("%s %s: %d ranks, count %llu, root %llu, round rule %s, scratch %llu elements on rank 0\n\n",
              collie::collectiveName(c), algo->name, n, static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(o.root), algo->mapsPeers ? "direct" : roundRuleName(algo->rounds),
              static_cast<unsigned long long>(programs[0].scratchCount));
  return printPrograms(o, programs, only);
}

// ------------------------------------------------------------------ export

int cmdExport(const Options& o) {
  if (o.args.size() != 2) return usageError("export takes COLLECTIVE ALGO, e.g. 'export allreduce ring -n 4'");
  Collective c;
  const AlgorithmInfo* algo = nullptr;
  if (int rc = findCollective(o.args[0], &c)) return rc;
  if (int rc = findAlgo(c, o.args[1], &algo)) return rc;
  if (!o.has("-n") || o.n > 64) return usageError("export needs -n N, 1..64 (the verifier's limit)");
  const int n = static_cast<int>(o.n);
  if (int rc = fileFits(*algo, n, o.root)) return rc;
  if (o.root >= o.n) return usageError("--root " + std::to_string(o.root) + " is not a rank of " + std::to_string(n));
  if (o.has("--ranks-per-node") && n % static_cast<int>(o.perNode) != 0)
    return usageError("--ranks-per-node " + std::to_string(o.perNode) + " does not divide -n " + std::to_string(n));
  std::string text;
  uint64_t chunks = 0;
  const collie::Status st =
      collie::exportAlgorithm(*algo, n, static_cast<int>(o.root), static_cast<int>(o.perNode), &text, &chunks);
  if (!st.ok()) {
    std::fprintf(stderr, "collie-sim: %s\n", st.message().c_str());
    return 1;
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

// ------------------------------------------------------------------ verify

// --counts: numbers or n, n-1, n+1 (resolved per rank count).
bool parseCounts(const std::string& text, std::vector<std::string>* out) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string t = text.substr(start, end - start);
    uint64_t v;
    if (!(t == "n" || t == "n-1" || t == "n+1" || parseUnsigned(t.c_str(), 1 << 20, &v))) return false;
    out->push_back(t);
    start = end + 1;
  }
  return !out->empty();
}

int cmdVerify(const Options& o) {
  if (o.args.size() == 1 && namesFile(o.args[0])) return cmdVerifyFile(o.args[0]);
  if (o.args.size() > 2) return usageError("verify takes at most COLLECTIVE ALGO");
  Collective c = Collective::kAllReduce;
  const AlgorithmInfo* only = nullptr;
  if (!o.args.empty())
    if (int rc = findCollective(o.args[0], &c)) return rc;
  if (o.args.size() == 2)
    if (int rc = findAlgo(c, o.args[1], &only)) return rc;
  std::vector<std::string> counts;
  if (!parseCounts(o.has("--counts") ? o.counts : "0,1,n-1,n+1,13", &counts))
    return usageError("--counts: expected comma-separated numbers (up to 1048576) or n, n-1, n+1, got '" + o.counts +
                      "'");
  collie::SweepOptions sweep;
  sweep.maxRanks = static_cast<int>(o.maxRanks);
  sweep.counts = counts;
  sweep.seed = o.seed;
  int failed = 0, checked = 0;
  for (const AlgorithmInfo& a : collie::algorithms()) {
    if (!o.args.empty() && a.collective != c) continue;
    if (only != nullptr && &a != only) continue;
    long proved = 0;
    const collie::Status s = collie::verifyAlgorithm(a, sweep, &proved);
    ++checked;
    if (!s.ok()) {
      ++failed;
      std::printf("%-14s %-10s FAILED %s\n", collie::collectiveName(a.collective), a.name, s.message().c_str());
    } else {
      std::printf("%-14s %-10s ok: %ld cases, n 1..%d\n", collie::collectiveName(a.collective), a.name, proved,
                  sweep.maxRanks);
    }
    std::fflush(stdout);
  }
  std::printf("%d of %d algorithms verified (counts %s, seed %llu)\n", checked - failed, checked,
              o.has("--counts") ? o.counts.c_str() : "0,1,n-1,n+1,13", static_cast<unsigned long long>(o.seed));
  return failed ? 1 : 0;
}

// ------------------------------------------------------------------ predict / compare

struct SimSetup {
  collie::Topology topo;
  int n = 0;
  size_t es = 4;
};

int setUpSim(const Options& o, SimSetup* s) {
  if (o.topo.empty()) return usageError("needs --topo NAME|FILE (built-ins: " + collie::topologyNames() + ")");
  collie::Status st = collie::loadTopology(o.topo, &s->topo);
  if (!st.ok()) return usageError(st.message());
  if (!typeSize(o.type, &s->es)) return usageError("unknown --type '" + o.type + "' (see --help)");
  const uint64_t n = o.has("-n") ? o.n : static_cast<uint64_t>(s->topo.nranks);
  if (n < 1 || n > static_cast<uint64_t>(collie::kMaxSimulatedRanks))
    return usageError("-n " + std::to_string(n) + ": the simulator takes 1.." +
                      std::to_string(collie::kMaxSimulatedRanks) + " ranks");
  s->n = static_cast<int>(n);
  if (o.root >= n) return usageError("--root " + std::to_string(o.root) + " is not a rank of " + std::to_string(n));
  return 0;
}

// The count argument for nccl-tests' size `bytes` (rounded down, as nccl-tests does).
uint64_t countFor(Collective c, uint64_t bytes, const SimSetup& s) {
  return bytes / (s.es * (collie::hasRankBlocks(c) ? static_cast<uint64_t>(s.n) : 1));
}

collie::Status predictBytes(const AlgorithmInfo& a, uint64_t bytes, const SimSetup& s, int root,
                            collie::Prediction* p) {
  ProgramArgs call;
  call.collective = a.collective;
  call.nranks = s.n;
  call.count = countFor(a.collective, bytes, s);
  call.root = root;
  return collie::predict(a, call, s.es, s.topo, p);
}

// The busiest rank's traffic when every peer is a thread of this process (on one GPU for the CUDA backend) and
// reads in place the sends of at least `minBytes` that may be (executor/direct_sends.h), out of place: the call
// as one program on one channel, as collie-bench counts it. 0 for all-to-all-v, whose counts the caller gives.
uint64_t trafficReadInPlace(const AlgorithmInfo& a, uint64_t bytes, const SimSetup& s, int root, uint64_t minBytes) {
  if (a.collective == Collective::kAllToAllv) return 0;
  ProgramArgs args;
  args.collective = a.collective;
  args.nranks = s.n;
  args.count = countFor(a.collective, bytes, s);
  args.stride = args.count;
  args.root = root;
  void* bufs[3];
  collie::placeholderBuffers(false, 0, bufs);
  const std::vector<bool> everyPeer(static_cast<size_t>(s.n), true);
  uint64_t most = 0;
  for (int r = 0; r < s.n; ++r) {
    args.rank = r;
    const Program p = buildProgram(a, args);
    std::vector<uint8_t> marks;
    collie::markDirectSends(p, bufs, s.es, 0, everyPeer, minBytes, &marks, true);
    most = std::max(most, collie::memoryTrafficElems(p, false, 0, &marks) * s.es);
  }
  return most;
}

int cmdPredict(const Options& o) {
  if (o.args.size() != 2) return usageError("predict takes COLLECTIVE ALGO, e.g. 'predict allreduce ring'");
  Collective c;
  const AlgorithmInfo* algo = nullptr;
  if (int rc = findCollective(o.args[0], &c)) return rc;
  if (int rc = findAlgo(c, o.args[1], &algo)) return rc;
  if (!o.has("--bytes")) return usageError("predict needs --bytes B");
  SimSetup s;
  if (int rc = setUpSim(o, &s)) return rc;
  if (int rc = fileFits(*algo, s.n, o.root)) return rc;
  collie::Prediction p;
  const collie::Status st = predictBytes(*algo, o.bytes, s, static_cast<int>(o.root), &p);
  if (!st.ok()) {
    std::fprintf(stderr, "collie-sim: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("%s %s on %s, %d ranks (%d per node), %llu bytes (%s) of %s\n", collie::collectiveName(c), algo->name,
              s.topo.name.c_str(), s.n, s.topo.ranksPerNode, static_cast<unsigned long long>(p.bytes),
              sizeName(p.bytes).c_str(), o.type.c_str());
  std::printf("  time    %12.3f us\n", p.seconds * 1e6);
  std::printf("  algbw   %12.3f GB/s\n", p.algbw / 1e9);
  std::printf("  busbw   %12.3f GB/s\n", p.busbw / 1e9);
  std::printf("  rounds  %12llu", static_cast<unsigned long long>(p.rounds));
  if (p.roundsSimulated < p.rounds)
    std::printf(" (%llu simulated, the rest at the steady-state rate)",
                static_cast<unsigned long long>(p.roundsSimulated));
  if (algo->mapsPeers) {
    std::printf("\n  direct  %12llu puts and reads of peers' buffers, %llu barriers per rank (no slots)\n",
                static_cast<unsigned long long>(p.slices), static_cast<unsigned long long>(p.barriers));
  } else {
    std::printf("\n  slices  %12llu of %s bytes, %u slots per connection\n", static_cast<unsigned long long>(p.slices),
                sizeName(p.sliceBytes).c_str(), s.topo.slots);
  }
  // What the rank that moves the most reads and writes in memory, against the bytes busbw counts: how many
  // passes over memory the algorithm costs a rank.
  const uint64_t most = p.trafficBytes;
  const double busBytes = static_cast<double>(p.bytes) * collie::busBandwidthFactor(c, s.n);
  std::printf("  traffic %12llu bytes read + written by the busiest rank (%s)", static_cast<unsigned long long>(most),
              sizeName(most).c_str());
  if (busBytes > 0) std::printf(", %.2f x busbw's bytes", static_cast<double>(most) / busBytes);
  std::printf("\n");
  // The same with the sends read in place, as between ranks that are threads of one process.
  int64_t directBytes = 0;
  if (collie::readDirectReadBytes(&directBytes).ok() && directBytes >= 0 && c != Collective::kAllToAllv &&
      !algo->mapsPeers) {
    const uint64_t direct =
        trafficReadInPlace(*algo, o.bytes, s, static_cast<int>(o.root), static_cast<uint64_t>(directBytes));
    std::printf(
        "  in place %11llu bytes by the busiest rank when its peers are threads of its process and read its "
        "sends of %lld bytes and up where they lie",
        static_cast<unsigned long long>(direct), static_cast<long long>(directBytes));
    if (busBytes > 0) std::printf(", %.2f x busbw's bytes", static_cast<double>(direct) / busBytes);
    std::printf("\n");
  }
  if (s.topo.sharedMemoryBeta > 0)
    std::printf("  memory  %12.3f us for the busiest node's %llu bytes through its shared memory (%s)\n",
                static_cast<double>(p.nodeTrafficBytes) * s.topo.sharedMemoryBeta * 1e6,
                static_cast<unsigned long long>(p.nodeTrafficBytes),
                p.memoryBound ? "the bound: the time above" : "under the simulated time");
  return 0;
}

int cmdCompare(const Options& o) {
  if (o.args.empty())
    return usageError("compare takes COLLECTIVE [file:PATH...], e.g. 'compare allreduce --topo h100-nvlink'");
  Collective c;
  if (int rc = findCollective(o.args[0], &c)) return rc;
  SimSetup s;
  if (int rc = setUpSim(o, &s)) return rc;
  if (o.minBytes > o.maxBytes)
    return usageError("-b " + sizeName(o.minBytes) + " is more than -e " + sizeName(o.maxBytes));
  std::vector<const AlgorithmInfo*> algos;
  for (const AlgorithmInfo& a : collie::algorithms())
    if (a.collective == c) algos.push_back(&a);
  // Program files beside the built-in algorithms, each for this rank count and root.
  for (size_t i = 1; i < o.args.size(); ++i) {
    if (o.args[i].rfind("file:", 0) != 0)
      return usageError("compare takes program files as file:PATH after the collective, not '" + o.args[i] + "'");
    const AlgorithmInfo* a = nullptr;
    if (int rc = findAlgo(c, o.args[i], &a)) return rc;
    if (int rc = fileFits(*a, s.n, o.root)) return rc;
    algos.push_back(a);
  }
  // Algorithms of direct steps are marked: they run only where ranks map each other's buffers, and the tuner
  // weighs them only there and with COLLIE_DIRECT_TUNE=1.
  auto label = [](const AlgorithmInfo* a) { return std::string(a->name) + (a->mapsPeers ? "*" : ""); };
  bool anyDirect = false;
  int width = 12;
  for (const AlgorithmInfo* a : algos) {
    width = std::max(width, static_cast<int>(label(a).size()) + 2);
    anyDirect = anyDirect || a->mapsPeers;
  }
  std::printf("# %s on %s: %d ranks (%d per node), %s; predicted time in us (nccl-tests sizes)\n",
              collie::collectiveName(c), s.topo.name.c_str(), s.n, s.topo.ranksPerNode, o.type.c_str());
  std::printf("%12s", "size");
  for (const AlgorithmInfo* a : algos) std::printf("%*s", width, label(a).c_str());
  std::printf("  %-10s %10s\n", "winner", "busbw GB/s");
  struct Row {
    uint64_t bytes;
    const AlgorithmInfo* winner;
  };
  std::vector<Row> rows;
  int failures = 0;
  for (uint64_t size = o.minBytes;; size *= o.factor) {
    double best = 0, bestBus = 0;
    const AlgorithmInfo* winner = nullptr;
    uint64_t shown = size;
    std::string line;
    char buf[64];
    for (const AlgorithmInfo* a : algos) {
      // A file runs only the counts its chunks divide, as collie-bench skips the others.
      if (a->file != nullptr && countFor(c, size, s) % a->file->chunks != 0) {
        std::snprintf(buf, sizeof(buf), "%*s", width, "n/a");
        line += buf;
        continue;
      }
      collie::Prediction p;
      const collie::Status st = predictBytes(*a, size, s, static_cast<int>(o.root), &p);
      if (!st.ok()) {
        std::fprintf(stderr, "collie-sim: %s\n", st.message().c_str());
        ++failures;
        std::snprintf(buf, sizeof(buf), "%*s", width, "error");
      } else {
        shown = p.bytes;
        std::snprintf(buf, sizeof(buf), "%*.2f", width, p.seconds * 1e6);
        if (winner == nullptr || p.seconds < best) {
          winner = a;
          best = p.seconds;
          bestBus = p.busbw;
        }
      }
      line += buf;
    }
    std::printf("%12s%s  %-10s %10.2f\n", sizeName(shown).c_str(), line.c_str(), winner ? label(winner).c_str() : "-",
                bestBus / 1e9);
    std::fflush(stdout);
    rows.push_back(Row{shown, winner});
    if (size > o.maxBytes / o.factor || size == 0) break;
  }
  std::printf("\ncrossovers:");
  bool any = false;
  for (size_t i = 1; i < rows.size(); ++i)
    if (rows[i].winner != nullptr && rows[i - 1].winner != nullptr && rows[i].winner != rows[i - 1].winner) {
      std::printf("\n  %s -> %s between %s and %s", label(rows[i - 1].winner).c_str(), label(rows[i].winner).c_str(),
                  sizeName(rows[i - 1].bytes).c_str(), sizeName(rows[i].bytes).c_str());
      any = true;
    }
  std::printf("%s\n", any ? "" : " none (one winner over the whole range)");
  if (anyDirect)
    std::printf(
        "\n* direct steps: runs only where ranks map each other's buffers; the tuner weighs it there with "
        "COLLIE_DIRECT_TUNE=1\n");
  return failures ? 1 : 0;
}

int cmdTopo(const Options& o) {
  if (o.args.size() > 1) return usageError("topo takes at most one NAME or FILE");
  if (o.args.empty()) {
    for (const collie::Topology& t : collie::builtinTopologies())
      std::printf("%-16s %4d ranks, %d per node, %s inside a node, %s between nodes\n", t.name.c_str(), t.nranks,
                  t.ranksPerNode, collie::linkClassName(t.intra), collie::linkClassName(t.inter));
    std::printf("\n'collie-sim topo NAME' prints one in the file format --topo FILE reads.\n");
    return 0;
  }
  collie::Topology t;
  const collie::Status st = collie::loadTopology(o.args[0], &t);
  if (!st.ok()) return usageError(st.message());
  std::printf("%s", t.describe().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usageError("no command given");
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    printUsage(stdout);
    return 0;
  }
  for (int i = 2; i < argc; ++i)
    if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      printUsage(stdout);
      return 0;
    }
  Options o;
  if (command == "list") {
    if (int rc = parseOptions(argc, argv, {}, &o)) return rc;
    if (!o.args.empty()) return usageError("list takes no arguments");
    return cmdList();
  }
  if (command == "show") {
    if (int rc = parseOptions(argc, argv,
                              {"-n", "--count", "--root", "--rank", "--all", "--picture", "--ranks-per-node"}, &o))
      return rc;
    return cmdShow(o);
  }
  if (command == "export") {
    if (int rc = parseOptions(argc, argv, {"-n", "--root", "--ranks-per-node"}, &o)) return rc;
    return cmdExport(o);
  }
  if (command == "verify") {
    if (int rc = parseOptions(argc, argv, {"--max-ranks", "--counts", "--seed"}, &o)) return rc;
    return cmdVerify(o);
  }
  if (command == "predict") {
    if (int rc = parseOptions(argc, argv, {"--topo", "-n", "--bytes", "--type", "--root"}, &o)) return rc;
    return cmdPredict(o);
  }
  if (command == "compare") {
    if (int rc = parseOptions(argc, argv, {"--topo", "-n", "-b", "-e", "-f", "--type", "--root"}, &o)) return rc;
    return cmdCompare(o);
  }
  if (command == "topo") {
    if (int rc = parseOptions(argc, argv, {}, &o)) return rc;
    return cmdTopo(o);
  }
  return usageError("unknown command '" + command + "' (list, show, export, verify, predict, compare, topo)");
}
