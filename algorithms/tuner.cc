#include "algorithms/tuner.h"

#include <cctype>
#include <mutex>
#include <tuple>

#include "algorithms/program_file.h"
#include "algorithms/simulator.h"

namespace collie {

namespace {

constexpr Collective kCollectives[] = {
    Collective::kAllReduce,     Collective::kBroadcast, Collective::kReduce,    Collective::kAllGather,
    Collective::kReduceScatter, Collective::kAllToAll,  Collective::kAllToAllv, Collective::kGather,
    Collective::kScatter,       Collective::kSendRecv,  Collective::kBarrier,
};

// Lower case without '_' and '-', so "All_Reduce" reads as "allreduce".
std::string squash(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// At most 40 printable characters of what the user wrote, for messages.
std::string shown(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return s.size() > 40 ? out + "..." : out;
}

using CacheKey = std::tuple<Collective, uint64_t, int, std::string, bool>;

// Every field of a topology as raw bytes: a cache key built in well under a
// microsecond, since the tuner is asked on every collective call.
std::string fingerprint(const Topology& t) {
  std::string key = t.name;
  auto add = [&key](const auto& v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  add(t.nranks);
  add(t.ranksPerNode);
  add(t.intra);
  add(t.inter);
  for (const LinkCost& l : t.links) {
    add(l.alpha);
    add(l.beta);
  }
  add(t.gamma);
  add(t.sharedMemoryBeta);
  add(t.serialBatches);
  add(t.slotBytes);
  add(t.slots);
  return key;
}

}  // namespace

bool collectiveFromName(const std::string& name, Collective* out) {
  const std::string want = squash(name);
  if (want == "bcast") {
    *out = Collective::kBroadcast;
    return true;
  }
  for (Collective c : kCollectives)
    if (want == collectiveName(c)) {
      *out = c;
      return true;
    }
  return false;
}

std::string collectiveNames() {
  std::string out;
  for (Collective c : kCollectives)
    if (defaultAlgorithm(c) != nullptr) out += std::string(out.empty() ? "" : ", ") + collectiveName(c);
  return out;
}

const AlgorithmInfo* tunedAlgorithm(Collective c, uint64_t bytes, int nranks, const Topology& topo, bool direct) {
  const AlgorithmInfo* fallback = defaultAlgorithm(c);
  if (fallback == nullptr) return nullptr;
  static std::mutex mutex;
  static std::map<CacheKey, const AlgorithmInfo*> cache;
  const CacheKey key{c, bytes, nranks, fingerprint(topo), direct};
  // Held while simulating too: ranks that are threads of one process ask the
  // same question at once, and all but the first then find the answer cached.
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const size_t es = bytes % 4 == 0 ? 4 : (bytes % 2 == 0 ? 2 : 1);
  ProgramArgs call;
  call.collective = c;
  call.nranks = nranks;
  call.count = bytes / es;
  // All-to-all-v's bytes are a rank's whole send buffer: spread it evenly.
  if (c == Collective::kAllToAllv && nranks > 0) call.count /= static_cast<uint64_t>(nranks);
  const AlgorithmInfo* best = nullptr;
  double bestTime = 0;
  for (const AlgorithmInfo& a : algorithms()) {
    // Direct algorithms run only where ranks map each other's buffers, which the caller knows; a named-only one
    // never.
    if (a.collective != c || (a.mapsPeers && !direct) || a.namedOnly) continue;
    Prediction p;
    if (!predict(a, call, es, topo, &p).ok()) continue;
    if (best == nullptr || p.seconds < bestTime) {
      best = &a;
      bestTime = p.seconds;
    }
  }
  if (best == nullptr) best = fallback;
  if (cache.size() >= 4096) cache.clear();  // bounded: a program's sizes repeat
  cache.emplace(key, best);
  return best;
}

Status parseAlgorithmOverrides(const std::string& spec, std::map<Collective, const AlgorithmInfo*>* out,
                               const char* source) {
  std::map<Collective, const AlgorithmInfo*> result;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find_first_of(";,", start);
    if (end == std::string::npos) end = spec.size();
    const std::string entry = trim(spec.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon == std::string::npos)
      return Status::error(collieInvalidArgument, "%s: entry '%s' is not COLLECTIVE:ALGORITHM (e.g. allreduce:ring)",
                           source, shown(entry).c_str());
    const std::string collective = trim(entry.substr(0, colon));
    const std::string name = trim(entry.substr(colon + 1));
    Collective c;
    if (!collectiveFromName(collective, &c) || defaultAlgorithm(c) == nullptr)
      return Status::error(collieInvalidArgument, "%s: unknown collective '%s' (valid: %s)", source,
                           shown(collective).c_str(), collectiveNames().c_str());
    const AlgorithmInfo* a = nullptr;
    if (name.rfind("file:", 0) == 0) {
      // A program file (program_file.h): loaded, checked and proved here, so a bad file fails init.
      const Status st = fileAlgorithm(name.substr(5), c, &a);
      if (!st.ok()) return Status::error(st.code(), "%s: %s", source, st.message().c_str());
      result[c] = a;
      continue;
    }
    // Names compared squashed on both sides: "direct_twoshot", "direct-twoshot" and "DirectTwoShot" are one.
    for (const AlgorithmInfo& candidate : algorithms())
      if (a == nullptr && candidate.collective == c && squash(candidate.name) == squash(name)) a = &candidate;
    if (a == nullptr || name.empty())
      return Status::error(collieInvalidArgument, "%s: %s has no algorithm '%s' (valid: %s)", source, collectiveName(c),
                           shown(name).c_str(), algorithmNames(c).c_str());
    result[c] = a;
  }
  *out = std::move(result);
  return Status();
}

}  // namespace collie
