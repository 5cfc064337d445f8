// collie-run: command-line front end of the local launcher, starting N ranks of a program on this machine.
#include <cstdio>
#include <cstring>
#include <string>

#include "base/env.h"
#include "tools/launcher.h"

namespace {

constexpr int kMaxProcs = 1024;
constexpr int kUsageError = 2;

void printUsage(FILE* out) {
  std::fprintf(out,
               "Usage: collie-run [-np N | -n N] [--nodes K] [--no-prefix] [-x NAME=VALUE]... [--] prog [args...]\n"
               "       collie-run --help-env [--all]\n"
               "Starts N processes (ranks) of prog on this machine; stops them all when one fails.\n"
               "\n"
               "  -np N, -n N      number of ranks, 1..%d (default 1)\n"
               "  --nodes K        split the ranks into K fake nodes, 1..N, of consecutive ranks (node-major):\n"
               "                   rank r gets COLLIE_HOSTID=node<r*K/N>, so ranks on different nodes talk over\n"
               "                   UCX as if on other hosts (set UCX_TLS to choose its transport)\n"
               "  --no-prefix      do not put \"[r] \" before each output line of rank r\n"
               "  -x NAME=VALUE    set NAME to VALUE in every rank (repeatable)\n"
               "  -h, --help       print this help\n"
               "  --help-env       print the environment variables Collie reads (user settings); with --all, also\n"
               "                   the developer measurement switches and the test settings\n"
               "\n"
               "Each rank gets COLLIE_RANK, COLLIE_WORLD_SIZE, COLLIE_LOCAL_RANK, COLLIE_ROOT=127.0.0.1:<free port>\n"
               "and a COLLIE_SECRET of 32 hex digits shared by all ranks, as read by collieCommInitFromEnv.\n"
               "Exit status: 0 when all ranks succeed, else the first failing rank's code (128+signal when it was\n"
               "killed), 128+signal when collie-run itself was stopped by one, 127 when prog cannot be run.\n",
               kMaxProcs);
}

// One variable: its name and default on a line, its description below, wrapped at kEnvWidth columns. Lines of
// the description begin with 6 spaces and the name's line with 2: scripts/env_doc.sh reads the text back by
// that, so the description is split at single spaces only and joined again with one.
constexpr size_t kEnvWidth = 100;

void printVar(FILE* out, const collie::env::VarInfo& v) {
  if (*v.defaultValue != '\0')
    std::fprintf(out, "  %s (default: %s)\n", v.name, v.defaultValue);
  else
    std::fprintf(out, "  %s\n", v.name);
  const std::string text = v.description;
  const char* indent = "      ";
  std::string line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && 6 + line.size() + 1 + word.size() > kEnvWidth) {
      std::fprintf(out, "%s%s\n", indent, line.c_str());
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) std::fprintf(out, "%s%s\n", indent, line.c_str());
}

// The sections, one per class; a section's heading is the only line that starts in column 0 and ends in ':'.
void printEnvironment(FILE* out, bool all) {
  using collie::env::VarClass;
  struct Section {
    VarClass cls;
    const char* heading;
  };
  const Section sections[] = {
      {VarClass::kUser, "User settings:"},
      {VarClass::kDeveloper,
       "Developer measurement switches (they change what the kernels do, to measure what a choice costs):"},
      {VarClass::kTest, "Test settings (read by Collie's tests and test builds):"},
  };
  int hidden = 0;
  bool first = true;
  for (const Section& s : sections) {
    if (s.cls != VarClass::kUser && !all) {
      for (const collie::env::VarInfo& v : collie::env::knownVars()) hidden += v.cls == s.cls ? 1 : 0;
      continue;
    }
    std::fprintf(out, "%s%s\n", first ? "" : "\n", s.heading);
    first = false;
    for (const collie::env::VarInfo& v : collie::env::knownVars())
      if (v.cls == s.cls) printVar(out, v);
  }
  if (hidden > 0) std::fprintf(out, "\n(%d developer and test settings more: collie-run --help-env --all)\n", hidden);
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
  bool helpEnv = false, helpEnvAll = false;
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
    if (arg == "--help-env") {
      helpEnv = true;
    } else if (arg == "--all") {
      helpEnvAll = true;
    } else if (arg == "--no-prefix") {
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
  if (helpEnvAll && !helpEnv) return usageError("--all goes with --help-env");
  if (helpEnv) {
    if (i < argc) return usageError("--help-env takes no program");
    printEnvironment(stdout, helpEnvAll);
    return 0;
  }
  if (i >= argc) return usageError("no program to run");
  if (opts.nodes > opts.nprocs)
    return usageError("--nodes " + std::to_string(opts.nodes) + " is more than the " + std::to_string(opts.nprocs) +
                      " ranks");
  for (; i < argc; ++i) opts.argv.emplace_back(argv[i]);
  return collie::launcher::run(opts);
}
