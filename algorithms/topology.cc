#include "algorithms/topology.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace collie {

namespace {

constexpr double kUs = 1e-6;
constexpr double kGBps = 1e9;  // GB/s as bytes per second

LinkCost cost(double alphaUs, double gbps) { return LinkCost{alphaUs * kUs, 1.0 / (gbps * kGBps)}; }

// The figures, and where each comes from. "FACTS" is the team's
// design/FACTS.md; NCCL's per-hop latencies are from its src/graph/tuning.cc
// (hwLat: NVLink 0.6 us LL / 3.4 us Simple per ring hop, PCI 1.0 / 5.7, NET
// 2.7 / 14). Our slot-and-flag protocol is Simple-like but moves small slices
// with one flag each, so we take a value between NCCL's LL and Simple figures.
// They are a model's inputs, not measurements: replace them with collie-bench
// numbers from your machine through a topology file.
Topology h100Node(const char* name, int nodes) {
  Topology t;
  t.name = name;
  t.ranksPerNode = 8;
  t.nranks = 8 * nodes;
  t.intra = LinkClass::kNvlink;
  t.inter = LinkClass::kNetwork;
  // Host shared memory: the conservative figures of the "host" topology below.
  t.link(LinkClass::kSameHost) = cost(2.0, 5.0);
  // One H100: a device-to-device copy moves about 3.0 TB/s read + written
  // (FACTS, measured on the lent H100), so 1.5 TB/s of data copied.
  t.link(LinkClass::kSharedGpu) = cost(1.0, 1500.0);
  // H100 SXM NVLink 4: 450 GB/s per direction per GPU through the NVSwitches
  // (FACTS). NCCL reaches a ring busbw of 365-370 GB/s on it (FACTS), 82%.
  // Alpha: 1 us per slice hop (NCCL: 0.6 LL, 3.4 Simple, see above).
  t.link(LinkClass::kNvlink) = cost(1.0, 450.0);
  // PCIe 4.0 x16: 31.5 GB/s per direction raw (PCIe spec), about 25 usable
  // (assumed); alpha 2 us (NCCL PCI: 1.0 LL, 5.7 Simple).
  t.link(LinkClass::kPcie) = cost(2.0, 25.0);
  // 400 Gb/s per GPU (one NIC each, as on DGX H100) = 50 GB/s per direction;
  // alpha 5 us (NCCL NET: 2.7 ring LL, 5.0 tree LL, 14 Simple).
  t.link(LinkClass::kNetwork) = cost(5.0, 50.0);
  // A reduction reads two streams and writes one: 3 bytes of memory traffic
  // per byte reduced at the 3.0 TB/s above gives 1.0 TB/s.
  t.gamma = 1.0 / (1000.0 * kGBps);
  return t;
}

}  // namespace

Topology sharedGpuTopology(double peakBytesPerSec) {
  // A device-to-device copy reaches 0.84-0.90 of the peak (FACTS: 3.0 of 3.35 TB/s on the H100; 4.0-4.1 of 4.8 on
  // the H200, docs/PERFORMANCE.md): one rank alone moves data at half that (each byte read and written) and
  // reduces at a third.
  const double copyTraffic = 0.85 * peakBytesPerSec;
  Topology t = h100Node("shared-gpu", 1);
  t.intra = LinkClass::kSharedGpu;
  t.link(LinkClass::kSharedGpu) = LinkCost{1.0 * kUs, 2.0 / copyTraffic};
  t.gamma = 3.0 / copyTraffic;
  // What the ranks together move: our kernels' traffic on a GPU shared by 2, 4 and 8 ranks came to 0.36 of the
  // peak on the H100 (1.22 TB/s at 4 ranks, 8 and 128 MiB allreduce) and 0.38-0.41 on the H200 (1.82-1.97 TB/s,
  // 128 MiB allreduce at 2, 4 and 8 ranks; docs/PERFORMANCE.md, "Memory traffic"), rhd or ring alike. Copies alone
  // (allgather, all-to-all) moved more, 0.46: their times come out long, their algorithms in the same order.
  t.sharedMemoryBeta = 1.0 / (0.38 * peakBytesPerSec);
  // The kernels take a batch's slices one peer after another, each at the cost of a lone exchange (an H200's
  // small one-shot allreduce spends about 4 us per peer in its batch, as much as a recursive-doubling step, in
  // docs/PERFORMANCE.md). Modelled as one batch, one-shot would be picked where tree is faster.
  t.serialBatches = true;
  return t;
}

namespace {

std::vector<Topology> makeBuiltins() {
  std::vector<Topology> list;
  list.push_back(h100Node("h100-nvlink", 1));

  Topology a100 = h100Node("a100-nvlink", 1);
  // A100 SXM NVLink 3: 600 GB/s bidirectional = 300 GB/s per direction per GPU
  // (NVIDIA A100 datasheet; not in FACTS). NCCL's ring busbw on 8x A100 is
  // about 230 GB/s (FACTS), 77% of it.
  a100.link(LinkClass::kNvlink) = cost(1.0, 300.0);
  // HBM2e 2.0 TB/s (A100 80GB datasheet) at the H100's measured/datasheet ratio
  // (3.0 of 3.35 TB/s, FACTS) is 1.8 TB/s read + written: 900 GB/s copied and
  // 600 GB/s reduced.
  a100.link(LinkClass::kSharedGpu) = cost(1.0, 900.0);
  a100.gamma = 1.0 / (600.0 * kGBps);
  // DGX A100: one 200 Gb/s NIC per GPU = 25 GB/s (datasheet).
  a100.link(LinkClass::kNetwork) = cost(5.0, 25.0);
  list.push_back(a100);

  list.push_back(h100Node("h100-2x8-400g", 2));
  list.push_back(h100Node("h100-16x8-400g", 16));

  // Ranks as processes of one CPU host over POSIX shared memory: a slice is
  // written into the receiver's slot and copied out again. Conservative: 2 us
  // per slice (a flag handshake between processes that may share a core) and
  // 5 GB/s per copy path; a single-thread memcpy measured 12.8 GB/s on the
  // 2-core build machine, and two copies per slice share it. Reductions on the
  // CPU at the same 5 GB/s. Every rank is on the one host, however many.
  Topology host = h100Node("host", 1);
  host.intra = host.inter = LinkClass::kSameHost;
  host.gamma = 1.0 / (5.0 * kGBps);
  list.push_back(host);

  // Ranks sharing one GPU, from the memory's peak (read + written): HBM3 of the H100 SXM 3.35 TB/s, HBM3e of the
  // H200 4.8 TB/s (datasheets).
  Topology h100 = sharedGpuTopology(3.35e12);
  h100.name = "h100-shared";
  list.push_back(h100);
  Topology h200 = sharedGpuTopology(4.8e12);
  h200.name = "h200-shared";
  list.push_back(h200);
  return list;
}

const char* const kClassNames[kLinkClasses] = {"samehost", "sharedgpu", "nvlink", "pcie", "network"};

// A token as it may be quoted in a message: printable, at most 40 characters.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (s.size() > 40) out += "...";
  return out + "'";
}

bool parseUnsigned(const std::string& s, uint64_t max, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (max - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

// A finite decimal number in [lo, hi] (lo excluded when `open`).
bool parseNumber(const std::string& s, double lo, double hi, bool open, double* out) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
      return false;  // refuses "inf", "nan", hex floats
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  if (v < lo || v > hi || (open && v == lo)) return false;
  *out = v;
  return true;
}

bool validName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

std::string classKeys(const char* suffix) {
  std::string out;
  for (const char* c : kClassNames) out += std::string(out.empty() ? "" : ", ") + c + suffix;
  return out;
}

}  // namespace

const char* linkClassName(LinkClass c) {
  const int i = static_cast<int>(c);
  return i >= 0 && i < kLinkClasses ? kClassNames[i] : "?";
}

bool linkClassFromName(const std::string& name, LinkClass* out) {
  for (int i = 0; i < kLinkClasses; ++i)
    if (name == kClassNames[i]) {
      *out = static_cast<LinkClass>(i);
      return true;
    }
  return false;
}

std::string Topology::describe() const {
  std::string out;
  char line[160];
  auto add = [&](const char* fmt, auto... v) {
    snprintf(line, sizeof(line), fmt, v...);
    out += line;
  };
  add("name %s\n", name.c_str());
  add("nodes %d\n", (nranks + ranksPerNode - 1) / ranksPerNode);
  add("ranks_per_node %d\n", ranksPerNode);
  add("intra %s\n", linkClassName(intra));
  add("inter %s\n", linkClassName(inter));
  for (int i = 0; i < kLinkClasses; ++i) {
    add("%s_alpha_us %.6g\n", kClassNames[i], links[i].alpha / kUs);
    add("%s_gbps %.6g\n", kClassNames[i], links[i].beta > 0 ? 1.0 / links[i].beta / kGBps : 0.0);
  }
  add("gamma_gbps %.6g\n", gamma > 0 ? 1.0 / gamma / kGBps : 0.0);
  if (sharedMemoryBeta > 0) add("shared_memory_gbps %.6g\n", 1.0 / sharedMemoryBeta / kGBps);
  if (serialBatches) add("serial_batches %d\n", 1);
  add("slot_bytes %llu\n", static_cast<unsigned long long>(slotBytes));
  add("slots %u\n", slots);
  return out;
}

const std::vector<Topology>& builtinTopologies() {
  static const std::vector<Topology> list = makeBuiltins();
  return list;
}

const Topology* findTopology(const std::string& name) {
  for (const Topology& t : builtinTopologies())
    if (t.name == name) return &t;
  return nullptr;
}

std::string topologyNames() {
  std::string out;
  for (const Topology& t : builtinTopologies()) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

Status parseTopology(const std::string& text, const std::string& source, Topology* out) {
  Topology t = builtinTopologies()[0];  // the figures of a class nobody overrides
  t.name = "custom";
  uint64_t nodes = 1, perNode = static_cast<uint64_t>(t.ranksPerNode);
  std::vector<std::pair<std::string, int>> seen;  // key, line
  const std::string where = source.empty() ? "topology" : source;
  auto fail = [&](int line, const std::string& what) {
    return Status::error(collieInvalidArgument, "%s:%d: %s", where.c_str(), line, what.c_str());
  };

  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  while (std::getline(in, raw)) {
    ++lineNo;
    const size_t hash = raw.find('#');
    if (hash != std::string::npos) raw.resize(hash);
    std::vector<std::string> words;
    std::string word;
    for (char c : raw) {
      if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
        if (!word.empty()) words.push_back(word);
        word.clear();
        continue;
      }
      const unsigned char u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) return fail(lineNo, "unexpected character (byte " + std::to_string(u) + ")");
      word += c;
    }
    if (!word.empty()) words.push_back(word);
    if (words.empty()) continue;
    if (words.size() != 2)
      return fail(lineNo,
                  "expected 'KEY VALUE', got " + std::to_string(words.size()) + " words starting " + quoted(words[0]));
    const std::string& key = words[0];
    const std::string& value = words[1];
    for (const auto& s : seen)
      if (s.first == key) return fail(lineNo, quoted(key) + " already set on line " + std::to_string(s.second));
    seen.emplace_back(key, lineNo);

    uint64_t u = 0;
    double d = 0;
    if (key == "base") {
      if (seen.size() != 1) return fail(lineNo, "'base' must come before every other key");
      const Topology* b = findTopology(value);
      if (b == nullptr)
        return fail(lineNo, "unknown base topology " + quoted(value) + " (expected one of " + topologyNames() + ")");
      t = *b;
      nodes = static_cast<uint64_t>(b->nranks / b->ranksPerNode);
      perNode = static_cast<uint64_t>(b->ranksPerNode);
    } else if (key == "name") {
      if (!validName(value))
        return fail(lineNo, "name " + quoted(value) + ": expected 1-64 letters, digits, '-', '_' or '.'");
      t.name = value;
    } else if (key == "nodes" || key == "ranks_per_node") {
      if (!parseUnsigned(value, kMaxTopologyRanks, &u) || u < 1)
        return fail(lineNo, key + ": expected a whole number from 1 to " + std::to_string(kMaxTopologyRanks) +
                                ", got " + quoted(value));
      (key == "nodes" ? nodes : perNode) = u;
    } else if (key == "intra" || key == "inter") {
      LinkClass c;
      if (!linkClassFromName(value, &c))
        return fail(lineNo, key + ": expected a link class (" + classKeys("") + "), got " + quoted(value));
      (key == "intra" ? t.intra : t.inter) = c;
    } else if (key == "gamma_gbps") {
      if (!parseNumber(value, 0, 1e6, true, &d))
        return fail(lineNo, "gamma_gbps: expected a number of GB/s above 0 and at most 1e6, got " + quoted(value));
      t.gamma = 1.0 / (d * kGBps);
    } else if (key == "shared_memory_gbps") {
      if (!parseNumber(value, 0, 1e6, false, &d))
        return fail(lineNo,
                    "shared_memory_gbps: expected a number of GB/s from 0 (none shared) to 1e6, got " + quoted(value));
      t.sharedMemoryBeta = d > 0 ? 1.0 / (d * kGBps) : 0;
    } else if (key == "serial_batches") {
      if (value != "0" && value != "1")
        return fail(lineNo,
                    "serial_batches: expected 0 (a batch of small exchanges costs one round trip) or 1 (one "
                    "per exchange), got " +
                        quoted(value));
      t.serialBatches = value == "1";
    } else if (key == "slot_bytes") {
      if (!parseUnsigned(value, uint64_t{1} << 30, &u) || u < 64 || u % 8 != 0)
        return fail(lineNo, "slot_bytes: expected a multiple of 8 from 64 to 1073741824, got " + quoted(value));
      t.slotBytes = u;
    } else if (key == "slots") {
      if (!parseUnsigned(value, kMaxSlots, &u) || u < 2)
        return fail(lineNo,
                    "slots: expected a whole number from 2 to " + std::to_string(kMaxSlots) + ", got " + quoted(value));
      t.slots = static_cast<uint32_t>(u);
    } else {
      // <class>_alpha_us or <class>_gbps
      const size_t cut = key.find('_');
      LinkClass c;
      const std::string field = cut == std::string::npos ? "" : key.substr(cut + 1);
      if (cut == std::string::npos || !linkClassFromName(key.substr(0, cut), &c) ||
          (field != "alpha_us" && field != "gbps"))
        return fail(lineNo,
                    "unknown key " + quoted(key) +
                        " (expected base, name, nodes, ranks_per_node, intra, inter, gamma_gbps, "
                        "shared_memory_gbps, slot_bytes, slots, CLASS_alpha_us or CLASS_gbps with CLASS one of " +
                        classKeys("") + ")");
      if (field == "alpha_us") {
        if (!parseNumber(value, 0, 1e6, false, &d))
          return fail(lineNo, key + ": expected microseconds from 0 to 1e6, got " + quoted(value));
        t.link(c).alpha = d * kUs;
      } else {
        if (!parseNumber(value, 0, 1e6, true, &d))
          return fail(lineNo, key + ": expected a number of GB/s above 0 and at most 1e6, got " + quoted(value));
        t.link(c).beta = 1.0 / (d * kGBps);
      }
    }
  }
  if (seen.empty()) return fail(lineNo, "no settings (expected lines of 'KEY VALUE', e.g. 'base h100-nvlink')");
  if (nodes * perNode > static_cast<uint64_t>(kMaxTopologyRanks))
    return fail(lineNo, "nodes x ranks_per_node = " + std::to_string(nodes * perNode) + " ranks, more than " +
                            std::to_string(kMaxTopologyRanks));
  t.ranksPerNode = static_cast<int>(perNode);
  t.nranks = static_cast<int>(nodes * perNode);
  *out = t;
  return Status();
}

Status loadTopology(const std::string& nameOrPath, Topology* out) {
  if (const Topology* t = findTopology(nameOrPath)) {
    *out = *t;
    return Status();
  }
  struct stat st;
  if (stat(nameOrPath.c_str(), &st) != 0)
    return Status::error(collieInvalidArgument, "%s is neither a built-in topology (%s) nor a readable file: %s",
                         quoted(nameOrPath).c_str(), topologyNames().c_str(), strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error(collieInvalidArgument, "topology %s is not a regular file", quoted(nameOrPath).c_str());
  if (st.st_size > (1 << 20))
    return Status::error(collieInvalidArgument, "topology file %s is %lld bytes; a topology is a few lines",
                         quoted(nameOrPath).c_str(), static_cast<long long>(st.st_size));
  std::ifstream file(nameOrPath, std::ios::binary);
  if (!file) return Status::error(collieInvalidArgument, "cannot read topology file %s", quoted(nameOrPath).c_str());
  std::ostringstream text;
  text << file.rdbuf();
  return parseTopology(text.str(), nameOrPath, out);
}

}  // namespace collie
