// MSCCL XML import (msccl_xml.h). Three passes:
//
//   read     the XML into gpus, thread blocks and steps, every attribute checked where it is read;
//   match    the k-th send of a (sender, receiver, channel) to the k-th receive of the same, counts equal;
//   order    all ranks' thread blocks run together, symbolically: a step is ready when its block's previous
//            step and the step it depends on are done and, if it receives, when its message is the oldest one
//            not yet received from its peer (Collie has one FIFO per ordered pair of ranks, MSCCL one per
//            channel). The ready step of the lowest (rank, block) runs next; a rank's program is its steps in
//            the order they ran. Running them also says which writes complete a reduction: those finalize.
//
// Chunks. MSCCL cuts the larger of a call's buffers into nchunksperloop chunks (the count argument times ngpus
// for allgather, reduce_scatter and alltoall, times 1 for allreduce); Collie cuts the count argument into
// `chunks`. The file's chunks are C = nchunksperloop / gcd(nchunksperloop, m), m being that multiplier, and one
// MSCCL chunk is k = m / gcd(nchunksperloop, m) of them: C = nchunksperloop when m divides nchunksperloop.
#include "algorithms/msccl_xml.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <numeric>
#include <pugixml.hpp>
#include <set>
#include <utility>
#include <vector>

#include "base/hash.h"

namespace collie {

namespace {

constexpr int64_t kMostRanks = 64;                    // ProgramFile's nranks
constexpr int64_t kMostChannels = 64;                 // MSCCL's own limit is lower
constexpr int64_t kMostBlocks = 256;                  // thread blocks per gpu
constexpr int64_t kMostSteps = int64_t{1} << 16;      // steps of one gpu, as parseProgramFile allows per rank
constexpr uint64_t kMostTracked = uint64_t{1} << 21;  // chunks of all ranks' buffers that ordering tracks
constexpr uint64_t kMostMoved = uint64_t{1} << 26;    // chunks all steps move together

// What an MSCCL step type does on its own gpu, and the Collie step it becomes.
struct StepType {
  const char* name;
  StepOp op;
  bool nop;  // orders its block only
  bool src;  // reads srcbuf/srcoff here (for a send, dstbuf/dstoff name the peer's buffer, which is not read)
  bool dst;  // writes dstbuf/dstoff here
};
constexpr StepType kStepTypes[] = {
    {"s", StepOp::kSend, false, true, false},
    {"r", StepOp::kRecv, false, false, true},
    {"rcs", StepOp::kRecvCopySend, false, false, true},
    {"rrs", StepOp::kRecvReduceSend, false, true, false},
    {"rrc", StepOp::kRecvReduceCopy, false, true, true},
    {"rrcs", StepOp::kRecvReduceCopySend, false, true, true},
    {"cpy", StepOp::kCopy, false, true, true},
    {"re", StepOp::kReduce, false, true, true},
    {"nop", StepOp::kCopy, true, false, false},
};

struct CollInfo {
  const char* name;
  Collective collective;
  bool blockedIn, blockedOut;  // cut into ngpus blocks of the count argument
  bool reduces;
};
constexpr CollInfo kColls[] = {
    {"allreduce", Collective::kAllReduce, false, false, true},
    {"allgather", Collective::kAllGather, false, true, false},
    {"reduce_scatter", Collective::kReduceScatter, true, false, true},
    {"reducescatter", Collective::kReduceScatter, true, false, true},
    {"alltoall", Collective::kAllToAll, true, true, false},
};

struct XStep {
  const StepType* type = nullptr;
  int s = 0;
  Buffer srcBuf = Buffer::kInput, dstBuf = Buffer::kInput;
  uint64_t srcOff = 0, dstOff = 0, cnt = 0;  // MSCCL chunks
  int depTb = -1, depStep = -1;              // the block (its place in XGpu::tbs) and step it waits for
  int sendSeq = -1, recvSeq = -1;            // which of its block's sends and receives it is
  std::vector<int> waiters;                  // blocks with a step that waits for this one
  bool sends() const { return !type->nop && stepSends(type->op); }
  bool receives() const { return !type->nop && stepReceives(type->op); }
};

struct XTb {
  int id = 0, send = -1, recv = -1, chan = 0;
  std::vector<XStep> steps;
  size_t next = 0;  // ordering: the first step not yet run
};

struct XGpu {
  int id = 0;
  uint64_t iChunks = 0, oChunks = 0, sChunks = 0;
  std::vector<XTb> tbs;                       // by id
  std::map<std::pair<int, int>, int> sendTb;  // (peer, channel) -> the block that sends on it
  std::map<std::pair<int, int>, int> recvTb;  // (peer, channel) -> the block that receives on it
};

// A chunk's contributions, as the verifier counts them, to find the writes that complete a reduction.
struct Val {
  uint64_t ranks = 0;
  bool finalized = false;
};

struct Msg {
  int chan = 0, tb = 0, step = 0;  // the sender's block and step, for messages
  std::vector<Val> vals;
};

// A sentence quoting a file's bytes, made printable and short: it reaches logs and collieGetLastError.
std::string printable(std::string s, size_t longest) {
  if (s.size() > longest) s = s.substr(0, longest) + "...";
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return s;
}

const char* bufferName(Buffer b) { return b == Buffer::kInput ? "input" : b == Buffer::kOutput ? "output" : "scratch"; }

std::string where(const XGpu& g, const XTb* t = nullptr, int step = -1) {
  std::string w = "gpu " + std::to_string(g.id);
  if (t != nullptr) w += ", tb " + std::to_string(t->id);
  if (step >= 0) w += ", step " + std::to_string(step);
  return w;
}

struct Reader {
  std::string path;

  Status fail(const std::string& at, const std::string& what) const {
    return Status::error(collieInvalidArgument, "%s",
                         printable(path + ": " + at + (at.empty() ? "" : ": ") + what, 600).c_str());
  }
  // An integer attribute in [lo, hi]: an optional '-' and decimal digits; `fallback` when absent and not required.
  Status number(const pugi::xml_node& node, const char* attr, int64_t lo, int64_t hi, bool required, int64_t fallback,
                const std::string& at, int64_t* out) const {
    const pugi::xml_attribute a = node.attribute(attr);
    if (!a) {
      if (required) return fail(at, std::string("<") + node.name() + "> has no attribute \"" + attr + "\"");
      *out = fallback;
      return Status();
    }
    std::string t = a.value();
    const size_t first = t.find_first_not_of(" \t\r\n"), last = t.find_last_not_of(" \t\r\n");
    t = first == std::string::npos ? "" : t.substr(first, last - first + 1);
    const bool negative = !t.empty() && t[0] == '-';
    const size_t digits = t.size() - (negative ? 1 : 0);
    bool whole = digits > 0 && digits <= 18;
    int64_t v = 0;
    for (size_t i = negative ? 1 : 0; whole && i < t.size(); ++i) {
      whole = std::isdigit(static_cast<unsigned char>(t[i])) != 0;
      v = v * 10 + (t[i] - '0');
    }
    if (!whole) return fail(at, std::string("attribute \"") + attr + "\" must be a whole number, not \"" + t + "\"");
    v = negative ? -v : v;
    if (v < lo || v > hi)
      return fail(at, std::string("attribute \"") + attr + "\" is " + std::to_string(v) + ", outside " +
                          std::to_string(lo) + ".." + std::to_string(hi));
    *out = v;
    return Status();
  }
  Status buffer(const pugi::xml_node& node, const char* attr, const std::string& at, Buffer* out) const {
    const pugi::xml_attribute a = node.attribute(attr);
    if (!a) return fail(at, std::string("<step> has no attribute \"") + attr + "\"");
    const std::string v = a.value();
    if (v == "i") *out = Buffer::kInput;
    if (v == "o") *out = Buffer::kOutput;
    if (v == "s") *out = Buffer::kScratch;
    if (v != "i" && v != "o" && v != "s")
      return fail(at, std::string("attribute \"") + attr + "\" is \"" + printable(v, 40) + "\", not i, o or s");
    return Status();
  }
};

// Chunks of the file's view of a buffer, `collie` Collie chunks, in MSCCL chunks of k each ("6/4" when not whole).
std::string mscclChunks(uint64_t collie, uint64_t k) {
  return collie % k == 0 ? std::to_string(collie / k) : std::to_string(collie) + "/" + std::to_string(k);
}

// The whole import; one object per call, so that its passes share what they read.
class Importer {
 public:
  explicit Importer(const std::string& path) : rd_{path} {}
  Status run(const std::string& text, ProgramFile* out);

 private:
  Status readAlgo(const pugi::xml_node& algo);
  Status readGpu(const pugi::xml_node& node, int index);
  Status readTb(const pugi::xml_node& node, XGpu* g);
  Status readStep(const pugi::xml_node& node, const XGpu& g, const XTb& t, XStep* x);
  Status link(XGpu* g);
  Status match();
  Status order();
  Status stuck() const;
  Range place(int rank, Buffer b, uint64_t x) const;
  Status execute(int rank, Step st, const Msg& sender, const std::string& at);
  std::vector<Val>& space(int rank, Buffer b) { return vals_[static_cast<size_t>(rank) * 3 + static_cast<size_t>(b)]; }
  std::deque<Msg>& fifo(int from, int to) { return fifos_[static_cast<size_t>(from * n_ + to)]; }
  uint64_t size(Buffer b) const { return b == Buffer::kInput ? inSize_ : b == Buffer::kOutput ? outSize_ : 0; }

  Reader rd_;
  std::string name_;
  const CollInfo* coll_ = nullptr;
  int n_ = 1, nchannels_ = 1;
  uint64_t k_ = 1, chunks_ = 1, inSize_ = 0, outSize_ = 0;  // Collie chunks
  bool aliased_ = false;  // in place only: the file's buffers are one, as an in-place call's are
  uint64_t minBytes_ = 0, maxBytes_ = UINT64_MAX;
  FileProtocol protocol_ = FileProtocol::kAuto;
  uint64_t moved_ = 0;
  std::vector<XGpu> gpus_;
  std::vector<Program> programs_;
  std::vector<std::vector<Val>> vals_;
  std::vector<std::deque<Msg>> fifos_;
};

Status Importer::readAlgo(const pugi::xml_node& algo) {
  const std::string at = "<algo>";
  const pugi::xml_attribute name = algo.attribute("name");
  if (!name) return rd_.fail(at, "<algo> has no attribute \"name\"");
  name_ = printable(std::string(name.value()).substr(0, 64), 64);
  if (name_.empty()) return rd_.fail(at, "attribute \"name\" is empty");
  const pugi::xml_attribute coll = algo.attribute("coll");
  if (!coll) return rd_.fail(at, "<algo> has no attribute \"coll\"");
  for (const CollInfo& c : kColls)
    if (std::strcmp(coll.value(), c.name) == 0) coll_ = &c;
  if (coll_ == nullptr)
    return rd_.fail(at, "attribute \"coll\" is \"" + printable(coll.value(), 40) +
                            "\": Collie imports allreduce, allgather, reduce_scatter and alltoall");
  int64_t v = 0;
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "ngpus", 1, kMostRanks, true, 0, at, &v));
  n_ = static_cast<int>(v);
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "nchunksperloop", 1, static_cast<int64_t>(kMaxFileChunks), true, 0, at, &v));
  const uint64_t perLoop = static_cast<uint64_t>(v);
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "nchannels", 1, kMostChannels, true, 0, at, &v));
  nchannels_ = static_cast<int>(v);
  // Collie's protocols for MSCCL's (program_file.h, FileProtocol): LL128 has none of its own, so Collie picks by
  // size there.
  const pugi::xml_attribute proto = algo.attribute("proto");
  const std::string p = proto ? proto.value() : "Simple";
  if (p != "Simple" && p != "LL" && p != "LL128")
    return rd_.fail(at, "attribute \"proto\" is \"" + printable(p, 40) + "\", not Simple, LL or LL128");
  protocol_ = p == "Simple" ? FileProtocol::kSimple : p == "LL" ? FileProtocol::kLL : FileProtocol::kAuto;
  int64_t inplace = 0, outofplace = 0;
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "inplace", 0, 1, false, 0, at, &inplace));
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "outofplace", 0, 1, false, 1 - inplace, at, &outofplace));
  if (inplace == 0 && outofplace == 0) return rd_.fail(at, "inplace and outofplace are both 0: it serves no call");
  aliased_ = inplace == 1 && outofplace == 0;
  // The call sizes the file serves (program_file.h, fileCallBytes, which measures as MSCCL does); a maxBytes of
  // 0 or none is no upper bound.
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "minBytes", 0, INT64_MAX, false, 0, at, &v));
  minBytes_ = static_cast<uint64_t>(v);
  COLLIE_RETURN_IF_ERROR(rd_.number(algo, "maxBytes", 0, INT64_MAX, false, 0, at, &v));
  maxBytes_ = v == 0 ? UINT64_MAX : static_cast<uint64_t>(v);
  if (maxBytes_ < minBytes_)
    return rd_.fail(at, "maxBytes " + std::to_string(maxBytes_) + " is below minBytes " + std::to_string(minBytes_) +
                            ": the file would serve no call");
  const uint64_t m = coll_->blockedIn || coll_->blockedOut ? static_cast<uint64_t>(n_) : 1;
  const uint64_t g = std::gcd(perLoop, m);
  k_ = m / g;
  chunks_ = perLoop / g;
  inSize_ = chunks_ * (coll_->blockedIn ? static_cast<uint64_t>(n_) : 1);
  outSize_ = chunks_ * (coll_->blockedOut ? static_cast<uint64_t>(n_) : 1);
  return Status();
}

Status Importer::readStep(const pugi::xml_node& node, const XGpu& g, const XTb& t, XStep* x) {
  const std::string at = where(g, &t, x->s);
  const pugi::xml_attribute type = node.attribute("type");
  if (!type) return rd_.fail(at, "<step> has no attribute \"type\"");
  for (const StepType& st : kStepTypes)
    if (std::strcmp(type.value(), st.name) == 0) x->type = &st;
  if (x->type == nullptr)
    return rd_.fail(at, "unknown step type \"" + printable(type.value(), 40) +
                            "\" (known: s, r, rcs, rrs, rrc, rrcs, cpy, re, nop)");
  int64_t v = 0;
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "depid", -1, kMostBlocks - 1, false, -1, at, &v));
  x->depTb = static_cast<int>(v);
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "deps", -1, kMostSteps - 1, false, -1, at, &v));
  x->depStep = static_cast<int>(v);
  if ((x->depTb < 0) != (x->depStep < 0))
    return rd_.fail(at, "attributes \"depid\" and \"deps\" must both name a step or both be -1");
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "hasdep", 0, 1, false, 0, at, &v));
  if (x->type->nop) return Status();
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "cnt", 1, static_cast<int64_t>(kMaxFileChunks), true, 0, at, &v));
  x->cnt = static_cast<uint64_t>(v);
  moved_ += x->cnt * k_;
  if (x->sends() && t.send < 0)
    return rd_.fail(at, std::string("a \"") + x->type->name + "\" step sends, but its tb has send=\"-1\"");
  if (x->receives() && t.recv < 0)
    return rd_.fail(at, std::string("a \"") + x->type->name + "\" step receives, but its tb has recv=\"-1\"");
  // Every range lies inside the file's own view of its buffer (scratch: s_chunks), in MSCCL chunks.
  auto range = [&](const char* buf, const char* off, Buffer* b, uint64_t* offset) {
    COLLIE_RETURN_IF_ERROR(rd_.buffer(node, buf, at, b));
    COLLIE_RETURN_IF_ERROR(rd_.number(node, off, 0, static_cast<int64_t>(kMaxFileChunks), true, 0, at, &v));
    *offset = static_cast<uint64_t>(v);
    const uint64_t limit = *b == Buffer::kScratch ? g.sChunks * k_ : size(*b);
    if ((*offset + x->cnt) * k_ > limit)
      return rd_.fail(at, std::string(off) + " " + std::to_string(*offset) + " + cnt " + std::to_string(x->cnt) +
                              " is past the end of the " + bufferName(*b) + " (" + mscclChunks(limit, k_) + " chunks)");
    return Status();
  };
  if (x->type->src) COLLIE_RETURN_IF_ERROR(range("srcbuf", "srcoff", &x->srcBuf, &x->srcOff));
  if (x->type->dst) COLLIE_RETURN_IF_ERROR(range("dstbuf", "dstoff", &x->dstBuf, &x->dstOff));
  return Status();
}

Status Importer::readTb(const pugi::xml_node& node, XGpu* g) {
  XTb t;
  int64_t v = 0;
  const std::string at = where(*g) + ", tb #" + std::to_string(g->tbs.size());
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "id", 0, kMostBlocks - 1, true, 0, at, &v));
  t.id = static_cast<int>(v);
  for (const XTb& other : g->tbs)
    if (other.id == t.id) return rd_.fail(where(*g, &t), "a second <tb> with this id");
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "send", -1, n_ - 1, true, 0, where(*g, &t), &v));
  t.send = static_cast<int>(v);
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "recv", -1, n_ - 1, true, 0, where(*g, &t), &v));
  t.recv = static_cast<int>(v);
  // msccl-tools gives a tb that neither sends nor receives channel -1.
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "chan", -1, nchannels_ - 1, true, 0, where(*g, &t), &v));
  t.chan = static_cast<int>(v);
  if (t.chan < 0 && (t.send >= 0 || t.recv >= 0))
    return rd_.fail(where(*g, &t), "attribute \"chan\" is -1, but the tb sends or receives");
  if (t.send == g->id || t.recv == g->id)
    return rd_.fail(where(*g, &t),
                    std::string("attribute \"") + (t.send == g->id ? "send" : "recv") + "\" is the gpu itself");
  for (const pugi::xml_node& s : node.children()) {
    if (s.type() != pugi::node_element) continue;
    if (std::strcmp(s.name(), "step") != 0)
      return rd_.fail(where(*g, &t), "unknown element <" + printable(s.name(), 40) + "> (known: step)");
    XStep x;
    x.s = static_cast<int>(t.steps.size());
    COLLIE_RETURN_IF_ERROR(rd_.number(s, "s", 0, kMostSteps - 1, true, 0, where(*g, &t, x.s), &v));
    if (v != x.s)
      return rd_.fail(where(*g, &t, x.s), "attribute \"s\" is " + std::to_string(v) + ", but the step is number " +
                                              std::to_string(x.s) + " of its tb (counting from 0)");
    COLLIE_RETURN_IF_ERROR(readStep(s, *g, t, &x));
    t.steps.push_back(std::move(x));
  }
  g->tbs.push_back(std::move(t));
  return Status();
}

Status Importer::readGpu(const pugi::xml_node& node, int index) {
  int64_t v = 0;
  const std::string at = "<gpu> #" + std::to_string(index);
  COLLIE_RETURN_IF_ERROR(rd_.number(node, "id", 0, n_ - 1, true, 0, at, &v));
  XGpu& g = gpus_[static_cast<size_t>(v)];
  if (g.id >= 0) return rd_.fail("gpu " + std::to_string(v), "a second <gpu> with this id");
  g.id = static_cast<int>(v);
  const uint64_t sizes[] = {inSize_, outSize_};
  const char* const attrs[] = {"i_chunks", "o_chunks", "s_chunks"};
  uint64_t* const fields[] = {&g.iChunks, &g.oChunks, &g.sChunks};
  for (int i = 0; i < 3; ++i) {
    COLLIE_RETURN_IF_ERROR(rd_.number(node, attrs[i], 0, static_cast<int64_t>(kMaxFileChunks), true, 0, where(g), &v));
    *fields[i] = static_cast<uint64_t>(v);
    if (i < 2 && *fields[i] * k_ > sizes[i])
      return rd_.fail(where(g), std::string("attribute \"") + attrs[i] + "\" is " + std::to_string(v) +
                                    ", more than the " + coll_->name + "'s " + (i == 0 ? "input" : "output") +
                                    " holds (" + mscclChunks(sizes[i], k_) + " chunks at nchunksperloop and ngpus)");
  }
  if (g.sChunks * k_ + (aliased_ && coll_->collective == Collective::kReduceScatter ? inSize_ : 0) > kMaxFileChunks)
    return rd_.fail(where(g), "attribute \"s_chunks\" is " + std::to_string(g.sChunks) + ", too large");
  size_t steps = 0;
  for (const pugi::xml_node& t : node.children()) {
    if (t.type() != pugi::node_element) continue;
    if (std::strcmp(t.name(), "tb") != 0)
      return rd_.fail(where(g), "unknown element <" + printable(t.name(), 40) + "> (known: tb)");
    if (g.tbs.size() >= static_cast<size_t>(kMostBlocks))
      return rd_.fail(where(g), "more than " + std::to_string(kMostBlocks) + " <tb> elements");
    COLLIE_RETURN_IF_ERROR(readTb(t, &g));
    steps += g.tbs.back().steps.size();
    if (steps + kMostRanks + 1 > static_cast<size_t>(kMostSteps))
      return rd_.fail(where(g), "more than " + std::to_string(kMostSteps - kMostRanks - 1) + " steps");
  }
  return link(&g);
}

// Sorts a gpu's blocks by id, resolves its dependencies and indexes its connections.
Status Importer::link(XGpu* g) {
  std::sort(g->tbs.begin(), g->tbs.end(), [](const XTb& a, const XTb& b) { return a.id < b.id; });
  std::map<int, int> byId;
  for (size_t i = 0; i < g->tbs.size(); ++i) byId[g->tbs[i].id] = static_cast<int>(i);
  for (size_t i = 0; i < g->tbs.size(); ++i) {
    XTb& t = g->tbs[i];
    const int me = static_cast<int>(i);
    int sends = 0, receives = 0;
    for (XStep& x : t.steps) {
      if (x.sends()) x.sendSeq = sends++;
      if (x.receives()) x.recvSeq = receives++;
      if (x.depTb < 0) continue;
      const auto dep = byId.find(x.depTb);
      if (dep == byId.end())
        return rd_.fail(where(*g, &t, x.s), "attribute \"depid\" is " + std::to_string(x.depTb) + ", but gpu " +
                                                std::to_string(g->id) + " has no tb " + std::to_string(x.depTb));
      const XTb& d = g->tbs[static_cast<size_t>(dep->second)];
      if (static_cast<size_t>(x.depStep) >= d.steps.size())
        return rd_.fail(where(*g, &t, x.s), "attribute \"deps\" is " + std::to_string(x.depStep) + ", but tb " +
                                                std::to_string(d.id) + " has " + std::to_string(d.steps.size()) +
                                                " steps");
      x.depTb = dep->second;
    }
    for (int dir = 0; dir < 2; ++dir) {
      const int peer = dir == 0 ? t.send : t.recv;
      if (peer < 0) continue;
      auto& index = dir == 0 ? g->sendTb : g->recvTb;
      const auto [it, fresh] = index.emplace(std::make_pair(peer, t.chan), me);
      if (!fresh)
        return rd_.fail(where(*g, &t), "tb " + std::to_string(g->tbs[static_cast<size_t>(it->second)].id) + " also " +
                                           (dir == 0 ? "sends to" : "receives from") + " gpu " + std::to_string(peer) +
                                           " on channel " + std::to_string(t.chan) +
                                           ": one tb per peer, direction and channel");
    }
  }
  for (XTb& t : g->tbs)
    for (const XStep& x : t.steps)
      if (x.depTb >= 0) {
        std::vector<int>& w = g->tbs[static_cast<size_t>(x.depTb)].steps[static_cast<size_t>(x.depStep)].waiters;
        const int me = static_cast<int>(&t - g->tbs.data());
        if (w.empty() || w.back() != me) w.push_back(me);
      }
  return Status();
}

// The k-th send of each (sender, receiver, channel) meets the k-th receive of the same, with as many chunks.
Status Importer::match() {
  for (XGpu& g : gpus_)
    for (const XTb& t : g.tbs)
      for (int dir = 0; dir < 2; ++dir) {
        const int peer = dir == 0 ? t.send : t.recv;
        if (peer < 0) continue;
        const XGpu& p = gpus_[static_cast<size_t>(peer)];
        const auto& index = dir == 0 ? p.recvTb : p.sendTb;
        const auto other = index.find(std::make_pair(g.id, t.chan));
        std::vector<const XStep*> theirs;
        if (other != index.end())
          for (const XStep& y : p.tbs[static_cast<size_t>(other->second)].steps)
            if (dir == 0 ? y.receives() : y.sends()) theirs.push_back(&y);
        for (const XStep& x : t.steps) {
          if (!(dir == 0 ? x.sends() : x.receives())) continue;
          const int seq = dir == 0 ? x.sendSeq : x.recvSeq;
          const std::string what = std::string(dir == 0 ? "sends message " : "receives message ") +
                                   std::to_string(seq + 1) + (dir == 0 ? " to" : " from") + " gpu " +
                                   std::to_string(peer) + " on channel " + std::to_string(t.chan);
          if (static_cast<size_t>(seq) >= theirs.size())
            return rd_.fail(where(g, &t, x.s),
                            what + ", but gpu " + std::to_string(peer) + " " + (dir == 0 ? "receives" : "sends") +
                                " only " + std::to_string(theirs.size()) + " on that channel (a " +
                                (dir == 0 ? "send without a receive" : "receive without a send") + ")");
          const XStep& y = *theirs[static_cast<size_t>(seq)];
          if (dir == 0 && y.cnt != x.cnt)
            return rd_.fail(where(g, &t, x.s), what + " of cnt " + std::to_string(x.cnt) + ", but step " +
                                                   std::to_string(y.s) + " of gpu " + std::to_string(peer) +
                                                   " that receives it has cnt " + std::to_string(y.cnt));
        }
      }
  return Status();
}

// Where the file's range of `b` at `x` (Collie chunks) lies in Collie's buffers. In place only, the file's
// buffers are one: Collie's output (allgather's input being the rank's block of it), or for reduce_scatter, whose
// output is a block of its input and which Collie never writes, a working copy in scratch.
Range Importer::place(int rank, Buffer b, uint64_t x) const {
  if (!aliased_ || b == Buffer::kScratch) return Range{b, x};
  const uint64_t block = static_cast<uint64_t>(rank) * chunks_;
  switch (coll_->collective) {
    case Collective::kAllGather:
      return Range{Buffer::kOutput, b == Buffer::kInput ? block + x : x};
    case Collective::kReduceScatter:
      return Range{Buffer::kScratch,
                   gpus_[static_cast<size_t>(rank)].sChunks * k_ + (b == Buffer::kOutput ? block + x : x)};
    default:
      return Range{Buffer::kOutput, x};
  }
}

// Runs one Collie step of rank `rank` on the tracked chunks, marks it finalize when what it writes completes a
// reduction, and appends it to the rank's program.
Status Importer::execute(int rank, Step st, const Msg& sender, const std::string& at) {
  const uint64_t n = st.count;
  std::vector<Val> in;
  if (stepReceives(st.op)) {
    std::deque<Msg>& q = fifo(st.recvPeer, rank);
    in = std::move(q.front().vals);
    q.pop_front();
  }
  auto value = [&](const Range& r, uint64_t i) { return space(rank, r.buffer)[r.offset + i]; };
  auto reduce = [](Val a, Val b) { return Val{a.ranks | b.ranks, false}; };
  std::vector<Val> wrote(n), sent(n);
  for (uint64_t i = 0; i < n; ++i) {
    switch (st.op) {
      case StepOp::kSend:
        sent[i] = value(st.src, i);
        break;
      case StepOp::kRecv:
      case StepOp::kRecvCopySend:
        wrote[i] = sent[i] = in[i];
        break;
      case StepOp::kCopy:
        wrote[i] = value(st.src, i);
        break;
      case StepOp::kReduce:
        wrote[i] = reduce(value(st.dst, i), value(st.src, i));
        break;
      default:  // kRecvReduceSend, kRecvReduceCopy, kRecvReduceCopySend
        wrote[i] = sent[i] = reduce(in[i], value(st.src, i));
        break;
    }
  }
  const bool writes = st.op != StepOp::kSend && st.op != StepOp::kRecvReduceSend;
  if (writes && coll_->reduces) {
    const uint64_t all = n_ == 64 ? ~uint64_t{0} : (uint64_t{1} << n_) - 1;
    uint64_t complete = 0;
    for (const Val& v : wrote) complete += v.ranks == all && !v.finalized ? 1 : 0;
    if (complete != 0 && complete != n)
      return rd_.fail(at, "writes " + std::to_string(complete) + " of " + std::to_string(n) +
                              " chunks as their reduction completes and the others not: Collie finalizes a "
                              "reduction (avg's division) per step; split the step");
    st.finalize = complete != 0;
    for (Val& v : wrote) v.finalized = v.finalized || st.finalize;
    // A reduction sent on as it completes carries the division; a received copy forwarded does not.
    if (st.op == StepOp::kRecvReduceCopySend) sent = wrote;
  }
  if (writes)
    for (uint64_t i = 0; i < n; ++i) space(rank, st.dst.buffer)[st.dst.offset + i] = wrote[i];
  if (stepSends(st.op)) {
    Msg m = sender;
    m.vals = std::move(sent);
    fifo(rank, st.sendPeer).push_back(std::move(m));
  }
  programs_[static_cast<size_t>(rank)].steps.push_back(st);
  return Status();
}

// Why no step is ready while some remain. Every blocked step waits for one step that is blocked too: the step
// it depends on, the send of the message it receives, or, when another channel's message is ahead of its own in
// the pair's FIFO, the receive of that message. Following these waits from the first blocked block (lowest rank,
// then tb) comes back to a step already met: the sentence names that cycle.
Status Importer::stuck() const {
  enum Kind { kDependency, kMessage, kFifo };
  std::pair<int, int> at{-1, -1};
  for (const XGpu& g : gpus_)
    for (size_t i = 0; i < g.tbs.size() && at.first < 0; ++i)
      if (g.tbs[i].next < g.tbs[i].steps.size()) at = {g.id, static_cast<int>(i)};
  std::map<std::pair<int, int>, size_t> seen;
  std::vector<std::string> says;
  std::vector<Kind> kinds;
  while (seen.find(at) == seen.end()) {
    seen[at] = says.size();
    const XGpu& g = gpus_[static_cast<size_t>(at.first)];
    const XTb& t = g.tbs[static_cast<size_t>(at.second)];
    const XStep& x = t.steps[t.next];
    std::string s = where(g, &t, x.s) + " (" + x.type->name + ") ";
    if (x.depTb >= 0 && g.tbs[static_cast<size_t>(x.depTb)].next <= static_cast<size_t>(x.depStep)) {
      s += "waits for step " + std::to_string(x.depStep) + " of tb " +
           std::to_string(g.tbs[static_cast<size_t>(x.depTb)].id);
      kinds.push_back(kDependency);
      at = {g.id, x.depTb};
    } else {
      const std::deque<Msg>& q = fifos_[static_cast<size_t>(t.recv * n_ + g.id)];
      const std::string from = "gpu " + std::to_string(t.recv);
      if (q.empty()) {
        const XGpu& p = gpus_[static_cast<size_t>(t.recv)];
        const auto it = p.sendTb.find(std::make_pair(g.id, t.chan));
        if (it == p.sendTb.end())
          return rd_.fail("", "no step can run: " + s + "receives from no tb");  // match() saw to it
        const int sender = it->second;
        const XTb& u = p.tbs[static_cast<size_t>(sender)];
        s += "receives message " + std::to_string(x.recvSeq + 1) + " from " + from + " on channel " +
             std::to_string(t.chan) + ", which tb " + std::to_string(u.id) + " of " + from + " has not sent";
        kinds.push_back(kMessage);
        at = {t.recv, sender};
      } else {
        const auto it = g.recvTb.find(std::make_pair(t.recv, q.front().chan));
        if (it == g.recvTb.end())
          return rd_.fail("", "no step can run: " + s + "receives behind a message no tb takes");
        const int taker = it->second;
        s += "receives from " + from + " on channel " + std::to_string(t.chan) + ", but Collie's one FIFO from " +
             from + " to gpu " + std::to_string(g.id) + " holds first the message of channel " +
             std::to_string(q.front().chan) + " (" + from + ", tb " + std::to_string(q.front().tb) + ", step " +
             std::to_string(q.front().step) + "), which tb " + std::to_string(g.tbs[static_cast<size_t>(taker)].id) +
             " receives";
        kinds.push_back(kFifo);
        at = {g.id, taker};
      }
    }
    says.push_back(s);
  }
  const size_t first = seen[at];
  std::string cycle;
  bool dependencies = true, fifo = false;
  for (size_t i = first; i < says.size(); ++i) {
    if (i - first == 4) {
      cycle += "; ...";
      break;
    }
    cycle += (i == first ? "" : "; ") + says[i];
  }
  for (size_t i = first; i < says.size(); ++i) {
    dependencies = dependencies && kinds[i] == kDependency;
    fifo = fifo || kinds[i] == kFifo;
  }
  return rd_.fail("", "no step can run: " + cycle + ": " +
                          (dependencies ? "a dependency cycle"
                           : fifo       ? "one FIFO per pair of ranks cannot keep the order of these sends"
                                        : "a cycle of waits across gpus"));
}

Status Importer::order() {
  const bool workCopy = aliased_ && coll_->collective == Collective::kReduceScatter;
  vals_.assign(static_cast<size_t>(n_) * 3, {});
  fifos_.assign(static_cast<size_t>(n_ * n_), {});
  programs_.assign(static_cast<size_t>(n_), Program());
  for (int r = 0; r < n_; ++r) {
    const XGpu& g = gpus_[static_cast<size_t>(r)];
    Program& p = programs_[static_cast<size_t>(r)];
    p.collective = coll_->collective;
    p.algorithm = name_;
    p.nranks = n_;
    p.rank = r;
    p.count = p.stride = chunks_;
    p.scratchCount = g.sChunks * k_ + (workCopy ? inSize_ : 0);
    space(r, Buffer::kInput).assign(inSize_, Val{uint64_t{1} << r, false});
    space(r, Buffer::kOutput).assign(outSize_, Val{});
    space(r, Buffer::kScratch).assign(p.scratchCount, Val{});
  }
  // In place only: the one buffer starts as the input, as it does in an in-place call; a copy per rank block, so
  // that no range crosses blocks (which would keep the file from running in rounds).
  if (aliased_)
    for (int r = 0; r < n_; ++r)
      for (uint64_t b = 0; b < inSize_ / chunks_; ++b)
        COLLIE_RETURN_IF_ERROR(execute(r,
                                       makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, b * chunks_},
                                                place(r, Buffer::kInput, b * chunks_), chunks_),
                                       Msg(), where(gpus_[static_cast<size_t>(r)])));
  std::set<std::pair<int, int>> ready;
  auto consider = [&](int r, int tb) {
    const XGpu& g = gpus_[static_cast<size_t>(r)];
    const XTb& t = g.tbs[static_cast<size_t>(tb)];
    if (t.next >= t.steps.size()) return;
    const XStep& x = t.steps[t.next];
    if (x.depTb >= 0 && g.tbs[static_cast<size_t>(x.depTb)].next <= static_cast<size_t>(x.depStep)) return;
    if (x.receives()) {
      const std::deque<Msg>& q = fifo(t.recv, r);
      if (q.empty() || q.front().chan != t.chan) return;
    }
    ready.emplace(r, tb);
  };
  // The block of rank r that receives the oldest message from `from`, if any.
  auto considerReceiver = [&](int from, int r) {
    const std::deque<Msg>& q = fifo(from, r);
    if (q.empty()) return;
    const XGpu& g = gpus_[static_cast<size_t>(r)];
    const auto it = g.recvTb.find(std::make_pair(from, q.front().chan));
    if (it != g.recvTb.end()) consider(r, it->second);
  };
  for (int r = 0; r < n_; ++r)
    for (size_t t = 0; t < gpus_[static_cast<size_t>(r)].tbs.size(); ++t) consider(r, static_cast<int>(t));
  while (!ready.empty()) {
    const auto [r, tb] = *ready.begin();
    ready.erase(ready.begin());
    XGpu& g = gpus_[static_cast<size_t>(r)];
    XTb& t = g.tbs[static_cast<size_t>(tb)];
    const XStep& x = t.steps[t.next];
    if (!x.type->nop) {
      const StepOp op = x.type->op;
      const Range src = x.type->src ? place(r, x.srcBuf, x.srcOff * k_) : Range();
      const Range dst = x.type->dst ? place(r, x.dstBuf, x.dstOff * k_) : Range();
      Msg from;
      from.chan = t.chan;
      from.tb = t.id;
      from.step = x.s;
      COLLIE_RETURN_IF_ERROR(
          execute(r, makeStep(op, stepSends(op) ? t.send : -1, stepReceives(op) ? t.recv : -1, src, dst, x.cnt * k_),
                  from, where(g, &t, x.s)));
    }
    ++t.next;
    consider(r, tb);
    for (int w : x.waiters) consider(r, w);
    if (x.sends()) considerReceiver(r, t.send);
    if (x.receives()) considerReceiver(t.recv, r);
  }
  for (const XGpu& g : gpus_)
    for (const XTb& t : g.tbs)
      if (t.next < t.steps.size()) return stuck();
  // An in-place-only reduce_scatter's result is the rank's block of its working copy.
  if (workCopy)
    for (int r = 0; r < n_; ++r)
      COLLIE_RETURN_IF_ERROR(
          execute(r, makeStep(StepOp::kCopy, -1, -1, place(r, Buffer::kOutput, 0), Range{Buffer::kOutput, 0}, chunks_),
                  Msg(), where(gpus_[static_cast<size_t>(r)])));
  return Status();
}

Status Importer::run(const std::string& text, ProgramFile* out) {
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) return rd_.fail("", "not XML: a NUL byte at byte " + std::to_string(nul));
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed =
      doc.load_buffer(text.data(), text.size(), pugi::parse_default, pugi::encoding_utf8);
  if (!parsed)
    return rd_.fail("", std::string("not XML: ") + parsed.description() + " at byte " + std::to_string(parsed.offset));
  pugi::xml_node algo;
  int elements = 0;
  for (const pugi::xml_node& node : doc.children())
    if (node.type() == pugi::node_element) {
      ++elements;
      algo = node;
    }
  if (elements != 1 || std::strcmp(algo.name(), "algo") != 0)
    return rd_.fail("", "an MSCCL algorithm is one <algo> element");
  COLLIE_RETURN_IF_ERROR(readAlgo(algo));
  gpus_.assign(static_cast<size_t>(n_), XGpu());
  for (XGpu& g : gpus_) g.id = -1;
  int index = 0;
  for (const pugi::xml_node& node : algo.children()) {
    if (node.type() != pugi::node_element) continue;
    if (std::strcmp(node.name(), "gpu") != 0)
      return rd_.fail("<algo>", "unknown element <" + printable(node.name(), 40) + "> (known: gpu)");
    COLLIE_RETURN_IF_ERROR(readGpu(node, index++));
  }
  uint64_t tracked = 0;
  for (size_t r = 0; r < gpus_.size(); ++r) {
    if (gpus_[r].id < 0)
      return rd_.fail("<algo>", "no <gpu> with id " + std::to_string(r) + " (ngpus is " + std::to_string(n_) + ")");
    tracked += inSize_ + outSize_ + gpus_[r].sChunks * k_ + (aliased_ ? inSize_ : 0);
  }
  if (tracked > kMostTracked || moved_ > kMostMoved)
    return rd_.fail("<algo>", "too large to import: " + std::to_string(tracked) + " chunks in all ranks' buffers and " +
                                  std::to_string(moved_) + " moved by all steps, at most " +
                                  std::to_string(kMostTracked) + " and " + std::to_string(kMostMoved));
  COLLIE_RETURN_IF_ERROR(match());
  COLLIE_RETURN_IF_ERROR(order());
  ProgramFile f;
  COLLIE_RETURN_IF_ERROR(parseProgramFile(programFileText(programs_, chunks_), rd_.path, &f));
  f.hash = fnv1a(text.data(), text.size());
  f.minBytes = minBytes_;
  f.maxBytes = maxBytes_;
  f.protocol = protocol_;
  *out = std::move(f);
  return Status();
}

}  // namespace

Status parseMscclXml(const std::string& text, const std::string& path, ProgramFile* out) {
  Importer importer(path);
  return importer.run(text, out);
}

bool looksLikeMscclXml(const std::string& text, const std::string& path) {
  size_t at = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark
  at = text.find_first_not_of(" \t\r\n", at);
  if (at != std::string::npos && text[at] == '<') return true;
  return path.size() >= 4 && path.compare(path.size() - 4, 4, ".xml") == 0;
}

}  // namespace collie
