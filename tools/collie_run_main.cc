// collie-run: command-line front end of the local launcher, starting N ranks of a program on this machine.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/launcher.h"

namespace {

constexpr int kMaxProcs = 1024;
constexpr int kUsageError = 2;

void printUsage(FILE* out) {
  std::fprintf(out,
               "Usage: collie-run [-np N | -n N] [--nodes K] [--no-prefix] [-x NAME=VALUE]... [--] prog [args...]\n"
               "Starts N processes (ranks) of prog on this machine; stops them all when one fails.\n"
               "\n"
               "  -np N, -n N      number of ranks, 1..%d (default 1)\n"
               "  --nodes K        split the ranks into K fake nodes, 1..N, of consecutive ranks (node-major):\n"
               "                   rank r gets COLLIE_HOSTID=node<r*K/N>, so ranks on different nodes talk over\n"
               "                   UCX as if on other hosts (set UCX_TLS to choose its transport)\n"
               "  --no-prefix      do not put \"[r] \" before each output line of rank r\n"
               "  -x NAME=VALUE    set NAME to VALUE in every rank (repeatable)\n"
               "  -h, --help       print this help\n"
               "\n"
               "Each rank gets COLLIE_RANK, COLLIE_WORLD_SIZE, COLLIE_LOCAL_RANK, COLLIE_ROOT=127.0.0.1:<free port>\n"
               "and a COLLIE_SECRET of 32 hex digits shared by all ranks, as read by collieCommInitFromEnv.\n"
               "Exit status: 0 when all ranks succeed, else the first failing rank's code (128+signal when it was\n"
               "killed), 128+signal when collie-run itself was stopped by one, 127 when prog cannot be run.\n",
               kMaxProcs);
}

int usageError(const std::string& message) {
  std::fprintf(stderr, "collie-run: %s\nTry 'collie-run --help' for more information.\n", message.c_str());
  return kUsageError;
}

// Strict: "4x", "", "+4" or anything out of range is refused rather than half-parsed.
bool parseProcs(const char* text, int* n) {
  if (text == nullptr || *text == '\0') return false;
  long value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    value = value * 10 + (*p - '0');
    if (value > kMaxProcs) return false;
  }
  if (value < 1) return false;
  *n = static_cast<int>(value);
  return true;
}

bool validName(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  collie::launcher::Options opts;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    if (arg == "-h" || arg == "--help") {
      printUsage(stdout);
      return 0;
    }
    if (arg == "--no-prefix") {
      opts.prefixOutput = false;
    } else if (arg == "-np" || arg == "-n") {
      if (i + 1 >= argc) return usageError(arg + " needs a number of processes");
      if (!parseProcs(argv[++i], &opts.nprocs)) {
        return usageError("invalid number of processes '" + std::string(argv[i]) + "' (must be 1.." +
                          std::to_string(kMaxProcs) + ")");
      }
    } else if (arg == "--nodes") {
      if (i + 1 >= argc || !parseProcs(argv[i + 1], &opts.nodes))
        return usageError("--nodes needs a number of nodes, 1.." + std::to_string(kMaxProcs));
      ++i;
    } else if (arg == "-x") {
      if (i + 1 >= argc) return usageError("-x needs NAME=VALUE");
      std::string assignment = argv[++i];
      size_t eq = assignment.find('=');
      if (eq == std::string::npos) return usageError("-x expects NAME=VALUE, got '" + assignment + "'");
      std::string name = assignment.substr(0, eq);
      if (!validName(name)) return usageError("invalid variable name '" + name + "' in -x");
      opts.extraEnv.emplace_back(name, assignment.substr(eq + 1));
    } else {
      return usageError("unknown option '" + arg + "'");
    }
  }
  if (i >= argc) return usageError("no program to run");
  if (opts.nodes > opts.nprocs)
    return usageError("--nodes " + std::to_string(opts.nodes) + " is more than the " + std::to_string(opts.nprocs) +
                      " ranks");
  for (; i < argc; ++i) opts.argv.emplace_back(argv[i]);
  return collie::launcher::run(opts);
}
