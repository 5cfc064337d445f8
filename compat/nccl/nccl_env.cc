// NCCL_* environment variables onto COLLIE_* ones; see nccl_env.h.
// This file is the shim's one reader of NCCL's variables.
#include "compat/nccl/nccl_env.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "base/env.h"
#include "base/log.h"
#include "collie.h"
#include "compat/nccl/nccl.h"

extern char** environ;

namespace collie {
namespace nccl {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::vector<std::string> splitOn(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(trim(s.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

// An algorithm or protocol list: "A,B" allows A and B, "^A,B" all but them.
// Names are lower-cased; unknown ones are collected for the note.
std::set<std::string> allowedSet(const std::string& list, const std::set<std::string>& known,
                                 std::vector<std::string>* unknown) {
  std::string body = trim(list);
  const bool exclude = !body.empty() && body[0] == '^';
  if (exclude) body = body.substr(1);
  std::set<std::string> named;
  for (const std::string& n : splitOn(body, ',')) {
    if (n.empty()) continue;
    if (known.count(lower(n)) == 0) {
      unknown->push_back(n);
      continue;
    }
    named.insert(lower(n));
  }
  if (!exclude) return named;
  std::set<std::string> out;
  for (const std::string& k : known)
    if (named.count(k) == 0) out.insert(k);
  return out;
}

const std::set<std::string>& ncclAlgorithms() {
  static const std::set<std::string> names = {"ring",     "tree", "collnetdirect", "collnetchain", "nvls",
                                              "nvlstree", "pat"};
  return names;
}

// Collie's algorithm for collective `coll` when NCCL may use the algorithms in `a`; "" = leave it to the tuner.
std::string pinFor(const std::string& coll, const std::set<std::string>& a) {
  const bool ring = a.count("ring") != 0, tree = a.count("tree") != 0;
  if (coll == "allreduce") return ring == tree ? "" : (ring ? "ring" : "tree");
  if (coll == "reducescatter" || coll == "allgather") return ring && a.count("pat") == 0 ? "ring" : "";
  if (coll == "broadcast" || coll == "reduce") return ring ? "chain" : "";
  return "";
}

void addNote(std::string* note, const std::string& text) {
  if (note->empty())
    *note = text;
  else
    *note += "; " + text;
}

}  // namespace

std::string mapAlgo(const std::string& value, std::string* note) {
  note->clear();
  static const char* const kCollectives[] = {"allreduce", "reducescatter", "allgather", "broadcast", "reduce"};
  std::map<std::string, std::set<std::string>> allowed;  // only the collectives the value restricts
  std::vector<std::string> unknown;
  if (value.find(':') == std::string::npos) {
    const std::set<std::string> a = allowedSet(value, ncclAlgorithms(), &unknown);
    for (const char* c : kCollectives) allowed[c] = a;
  } else {
    for (const std::string& entry : splitOn(value, ';')) {
      if (entry.empty()) continue;
      const size_t colon = entry.find(':');
      const std::string coll = lower(trim(entry.substr(0, colon)));
      if (colon == std::string::npos ||
          std::find(std::begin(kCollectives), std::end(kCollectives), coll) == std::end(kCollectives)) {
        addNote(note, "entry '" + entry + "' names no collective Collie maps");
        continue;
      }
      allowed[coll] = allowedSet(entry.substr(colon + 1), ncclAlgorithms(), &unknown);
    }
  }
  for (const std::string& u : unknown) addNote(note, "'" + u + "' is not an NCCL algorithm");
  std::string spec;
  for (const char* c : kCollectives) {
    auto it = allowed.find(c);
    if (it == allowed.end()) continue;
    const std::string pin = pinFor(c, it->second);
    if (pin.empty()) continue;
    spec += (spec.empty() ? "" : ",") + std::string(c) + ":" + pin;
  }
  bool other = false;
  for (const auto& a : allowed)
    for (const std::string& n : a.second) other = other || (n != "ring" && n != "tree");
  if (other) addNote(note, "NVLS, CollNet and PAT have no Collie equivalent");
  if (spec.empty()) addNote(note, "nothing pinned: Collie's tuner chooses");
  return spec;
}

std::string mapProto(const std::string& value, std::string* note) {
  note->clear();
  if (value.find(':') != std::string::npos) {
    *note = "the per-collective form is not mapped: Collie chooses";
    return "";
  }
  static const std::set<std::string> kKnown = {"ll", "ll128", "simple"};
  std::vector<std::string> unknown;
  const std::set<std::string> a = allowedSet(value, kKnown, &unknown);
  for (const std::string& u : unknown) addNote(note, "'" + u + "' is not an NCCL protocol");
  const bool ll = a.count("ll") != 0, bulk = a.count("simple") != 0 || a.count("ll128") != 0;
  if (a.count("ll128") != 0) addNote(note, "LL128 has no Collie equivalent; Simple is the nearest");
  addNote(note, "protocols apply to the CUDA backend only");
  if (ll && !bulk) return "ll";
  if (bulk && !ll) return "simple";
  addNote(note, "nothing pinned: Collie chooses");
  return "";
}

std::string mapDebug(const std::string& value, bool* printVersion, std::string* note) {
  note->clear();
  *printVersion = false;
  const std::string v = lower(trim(value));
  if (v == "version") {
    *printVersion = true;
    *note = "the version line, then warnings";
    return "WARN";
  }
  if (v == "warn" || v == "info" || v == "trace" || v == "none") {
    std::string up = v;
    for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (v == "info" || v == "trace") *printVersion = true;
    return up;
  }
  if (v == "abort") {
    *note = "Collie logs the warning and does not abort the process";
    return "WARN";
  }
  *note = "not an NCCL debug level (VERSION, WARN, INFO, ABORT, TRACE)";
  return "";
}

EnvPlan planEnvironment(const std::vector<std::pair<std::string, std::string>>& vars) {
  EnvPlan plan;
  std::map<std::string, std::string> env(vars.begin(), vars.end());
  auto map = [&](const char* from, const char* to, const std::string& value, const std::string& note) {
    const std::string shown = std::string(from) + "=" + env[from];
    if (env.count(to) != 0 && !env[to].empty()) {
      plan.info.push_back(shown + ": " + to + "=" + env[to] + " is set and wins");
      return;
    }
    if (value.empty()) {
      plan.info.push_back(shown + " is not mapped" + (note.empty() ? "" : " (" + note + ")"));
      return;
    }
    plan.fallbacks.emplace_back(to, value);
    plan.info.push_back(shown + " -> " + to + "=" + value + (note.empty() ? "" : " (" + note + ")"));
  };
  for (const auto& kv : env) {
    const std::string& name = kv.first;
    const std::string& value = kv.second;
    if (value.empty()) continue;
    std::string note;
    if (name == "NCCL_DEBUG") {
      bool version = false;
      const std::string level = mapDebug(value, &version, &note);
      plan.printVersion = version;
      map("NCCL_DEBUG", "COLLIE_DEBUG", level, note);
    } else if (name == "NCCL_DEBUG_FILE") {
      map("NCCL_DEBUG_FILE", "COLLIE_DEBUG_FILE", value, "");
    } else if (name == "NCCL_ALGO") {
      const std::string spec = mapAlgo(value, &note);
      map("NCCL_ALGO", "COLLIE_ALGO", spec, note);
    } else if (name == "NCCL_PROTO") {
      const std::string proto = mapProto(value, &note);
      map("NCCL_PROTO", "COLLIE_PROTO", proto, note);
    } else if (name == "NCCL_P2P_DISABLE") {
      // NCCL then moves GPU buffers through host memory; so does Collie's staged path.
      const std::string t = trim(value);
      char* end = nullptr;
      const long v = strtol(t.c_str(), &end, 10);
      std::string to, why = "not an integer";
      if (!t.empty() && *end == '\0') {
        to = v != 0 ? "0" : "1";
        why = v != 0 ? "GPU buffers staged through pinned host memory" : "";
      }
      map("NCCL_P2P_DISABLE", "COLLIE_P2P", to, why);
    } else if (name == "NCCL_SOCKET_IFNAME") {
      map("NCCL_SOCKET_IFNAME", "COLLIE_SOCKET_IFNAME", value, "");
    } else if (name == "NCCL_COMM_ID") {
      plan.info.push_back("NCCL_COMM_ID=" + value +
                          ": ncclGetUniqueId names this rendezvous and rank 0's ncclCommInitRank serves it");
    } else if (name.rfind("NCCL_", 0) == 0 || name.rfind("TORCH_NCCL_", 0) == 0) {
      plan.info.push_back(name + "=" + value + " is accepted and ignored (no Collie equivalent)");
    }
  }
  return plan;
}

namespace {

struct Loaded {
  std::mutex mu;
  EnvPlan plan;
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

// Runs when libnccl.so.2 is loaded, before any call can read COLLIE_* variables.
__attribute__((constructor)) void mapAtLoad() {
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = strchr(*e, '=');
    if (eq == nullptr) continue;
    std::string name(*e, static_cast<size_t>(eq - *e));
    if (name.rfind("NCCL_", 0) == 0 || name.rfind("TORCH_NCCL_", 0) == 0 || name.rfind("COLLIE_", 0) == 0)
      vars.emplace_back(name, eq + 1);
  }
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mu);
  l.plan = planEnvironment(vars);
  for (const auto& f : l.plan.fallbacks) env::setFallback(f.first.c_str(), f.second);
}

}  // namespace

void announce() {
  static std::once_flag once;
  std::call_once(once, [] {
    Loaded& l = loaded();
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.plan.printVersion && logLevel() >= LogLevel::kWarn)
      logMessage(LogLevel::kWarn, __FILE__, __LINE__, "NCCL version %d.%d.%d (Collie %d.%d.%d drop-in libnccl.so.2)",
                 NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, COLLIE_MAJOR, COLLIE_MINOR, COLLIE_PATCH);
    for (const std::string& line : l.plan.info) COLLIE_INFO("%s", line.c_str());
  });
}

}  // namespace nccl
}  // namespace collie
