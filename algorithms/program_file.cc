#include "algorithms/program_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "algorithms/msccl_xml.h"
#include "algorithms/simulator.h"
#include "algorithms/verifier.h"
#include "algorithms/verify_sweep.h"
#include "base/hash.h"

namespace collie {

namespace {

using nlohmann::json;

constexpr int kFileVersion = 1;
constexpr size_t kMaxFileSteps = 1 << 16;  // per rank: far beyond any schedule, small enough to load at once
constexpr StepOp kAllOps[] = {
    StepOp::kSend,    StepOp::kRecv,     StepOp::kRecvReduceSend, StepOp::kRecvReduceCopy, StepOp::kRecvCopySend,
    StepOp::kCopy,    StepOp::kSendRecv, StepOp::kSendRecvReduce, StepOp::kReduce,         StepOp::kRecvReduceCopySend,
    StepOp::kCopySend};
constexpr Buffer kAllBuffers[] = {Buffer::kInput, Buffer::kOutput, Buffer::kScratch};

const char* bufferText(Buffer b) {
  switch (b) {
    case Buffer::kInput:
      return "input";
    case Buffer::kOutput:
      return "output";
    case Buffer::kScratch:
      return "scratch";
  }
  return "?";
}

// Whether a step reads its src range, and whether it writes its dst range (program.h's table of StepOp).
bool readsSrc(StepOp op) { return op != StepOp::kRecv && op != StepOp::kRecvCopySend; }
bool writesDst(StepOp op) { return op != StepOp::kSend && op != StepOp::kRecvReduceSend; }

// ------------------------------------------------------------------ writing

nlohmann::ordered_json rangeJson(const Range& r) {
  return nlohmann::ordered_json::array({bufferText(r.buffer), r.offset});
}

// The fields that differ from Step's defaults, in Step's order, so that a file reads like the schedule it is.
nlohmann::ordered_json stepJson(const Step& s) {
  const Step d;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["op"] = stepOpName(s.op);
  if (s.sendPeer != d.sendPeer) j["send"] = s.sendPeer;
  if (s.recvPeer != d.recvPeer) j["recv"] = s.recvPeer;
  if (s.src.buffer != d.src.buffer || s.src.offset != d.src.offset) j["src"] = rangeJson(s.src);
  if (s.dst.buffer != d.dst.buffer || s.dst.offset != d.dst.offset) j["dst"] = rangeJson(s.dst);
  if (s.count != d.count) j["count"] = s.count;
  if (s.recvCount != d.recvCount) j["recv_count"] = s.recvCount;
  if (s.finalize) j["finalize"] = true;
  if (s.joined) j["joined"] = true;
  return j;
}

// ------------------------------------------------------------------ reading

// A sentence quoting a file's bytes, made printable and short: it reaches logs and collieGetLastError.
std::string printableText(std::string s) {
  constexpr size_t kLongest = 400;
  if (s.size() > kLongest) s = s.substr(0, kLongest) + "...";
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return s;
}

// Each check names the file and where in it ("rank 2, step 5: ...").
struct Reader {
  std::string path;
  Status fail(const std::string& where, const std::string& what) const {
    return Status::error(collieInvalidArgument, "%s",
                         printableText(path + ": " + where + (where.empty() ? "" : ": ") + what).c_str());
  }
  // An integer field in [lo, hi]; `fallback` when absent (required when `required`).
  Status integer(const json& obj, const char* key, int64_t lo, int64_t hi, bool required, int64_t fallback,
                 const std::string& where, int64_t* out) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (required) return fail(where, std::string("no \"") + key + "\"");
      *out = fallback;
      return Status();
    }
    if (!it->is_number_integer())
      return fail(where, std::string("\"") + key + "\" must be a whole number, not " + it->dump());
    // Unsigned values above INT64_MAX read as unsigned: out of range either way.
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return fail(where, std::string("\"") + key + "\" is " + it->dump() + ", out of range");
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi)
      return fail(where, std::string("\"") + key + "\" is " + std::to_string(v) + ", outside " + std::to_string(lo) +
                             ".." + std::to_string(hi));
    *out = v;
    return Status();
  }
  Status onlyKeys(const json& obj, std::initializer_list<const char*> keys, const std::string& where) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) {
        std::string list;
        for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
        return fail(where, "unknown field \"" + it.key() + "\" (known: " + list + ")");
      }
    }
    return Status();
  }
  Status range(const json& obj, const char* key, const std::string& where, Range* out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return Status();
    if (!it->is_array() || it->size() != 2 || !(*it)[0].is_string() || !(*it)[1].is_number_integer() ||
        ((*it)[1].is_number_integer() && !(*it)[1].is_number_unsigned()))
      return fail(where,
                  std::string("\"") + key + "\" must be [\"input\"|\"output\"|\"scratch\", offset], not " + it->dump());
    const std::string name = (*it)[0].get<std::string>();
    bool found = false;
    for (Buffer b : kAllBuffers)
      if (name == bufferText(b)) {
        out->buffer = b;
        found = true;
      }
    if (!found) return fail(where, std::string("\"") + key + "\" names buffer \"" + name + "\"");
    const uint64_t offset = (*it)[1].get<uint64_t>();
    if (offset > kMaxFileChunks)
      return fail(where, std::string("\"") + key + "\" offset " + std::to_string(offset) + " is past any buffer");
    out->offset = offset;
    return Status();
  }
};

Status readStep(const Reader& rd, const json& j, int nranks, const std::string& where, Step* out) {
  if (!j.is_object()) return rd.fail(where, "a step must be an object, not " + j.dump());
  COLLIE_RETURN_IF_ERROR(
      rd.onlyKeys(j, {"op", "send", "recv", "src", "dst", "count", "recv_count", "finalize", "joined"}, where));
  auto op = j.find("op");
  if (op == j.end() || !op->is_string()) return rd.fail(where, "\"op\" must be a step kind's name");
  const std::string name = op->get<std::string>();
  bool found = false;
  std::string names;
  for (StepOp o : kAllOps) {
    names += std::string(names.empty() ? "" : ", ") + stepOpName(o);
    if (name == stepOpName(o)) {
      out->op = o;
      found = true;
    }
  }
  if (!found) return rd.fail(where, "unknown op \"" + name + "\" (known: " + names + ")");
  int64_t v = 0;
  COLLIE_RETURN_IF_ERROR(rd.integer(j, "send", -1, nranks - 1, false, -1, where, &v));
  out->sendPeer = static_cast<int32_t>(v);
  COLLIE_RETURN_IF_ERROR(rd.integer(j, "recv", -1, nranks - 1, false, -1, where, &v));
  out->recvPeer = static_cast<int32_t>(v);
  if (stepSends(out->op) != (out->sendPeer >= 0))
    return rd.fail(where, std::string(name) + (stepSends(out->op) ? " needs a \"send\" peer" : " sends to no peer"));
  if (stepReceives(out->op) != (out->recvPeer >= 0))
    return rd.fail(where,
                   std::string(name) + (stepReceives(out->op) ? " needs a \"recv\" peer" : " receives from no peer"));
  COLLIE_RETURN_IF_ERROR(rd.range(j, "src", where, &out->src));
  COLLIE_RETURN_IF_ERROR(rd.range(j, "dst", where, &out->dst));
  COLLIE_RETURN_IF_ERROR(rd.integer(j, "count", 0, static_cast<int64_t>(kMaxFileChunks), false, 0, where, &v));
  out->count = static_cast<uint64_t>(v);
  COLLIE_RETURN_IF_ERROR(rd.integer(j, "recv_count", 0, static_cast<int64_t>(kMaxFileChunks), false, 0, where, &v));
  out->recvCount = static_cast<uint64_t>(v);
  if (out->recvCount != 0 && !stepIsExchange(out->op))
    return rd.fail(where, "\"recv_count\" belongs to sendRecv and sendRecvReduce only");
  for (const char* flag : {"finalize", "joined"}) {
    auto it = j.find(flag);
    if (it == j.end()) continue;
    if (!it->is_boolean()) return rd.fail(where, std::string("\"") + flag + "\" must be true or false");
    (std::strcmp(flag, "finalize") == 0 ? out->finalize : out->joined) = it->get<bool>();
  }
  return Status();
}

// Every range a step touches lies inside its buffer (sizes in chunks, from bufferCounts at count == chunks).
Status checkBounds(const Reader& rd, const Program& p, const Step& s, const std::string& where) {
  uint64_t input = 0, output = 0;
  bufferCounts(p, &input, &output);
  auto inside = [&](const Range& r, uint64_t n, const char* which) {
    const uint64_t size = r.buffer == Buffer::kInput ? input : r.buffer == Buffer::kOutput ? output : p.scratchCount;
    if (n == 0 || r.offset + n <= size) return Status();
    return rd.fail(where, std::string(which) + " " + bufferText(r.buffer) + "[" + std::to_string(r.offset) + ", " +
                              std::to_string(r.offset + n) + ") is past the end of rank " + std::to_string(p.rank) +
                              "'s " + bufferText(r.buffer) + " (" + std::to_string(size) + " chunks)");
  };
  if (readsSrc(s.op)) COLLIE_RETURN_IF_ERROR(inside(s.src, s.count, "src"));
  if (writesDst(s.op)) COLLIE_RETURN_IF_ERROR(inside(s.dst, stepIsExchange(s.op) ? s.recvCount : s.count, "dst"));
  return Status();
}

bool knownCollective(const std::string& name, Collective* out) {
  for (const AlgorithmInfo& a : algorithms())
    if (name == collectiveName(a.collective)) {
      *out = a.collective;
      return true;
    }
  return false;
}

// Whether `b` is cut into rank blocks in `p` (built at count == chunks): reduce-scatter's input, allgather's
// output, all-to-all's both, gather's output and scatter's input. Their blocks lie `stride` apart in a call.
bool blocked(const Program& p, Buffer b) {
  uint64_t input = 0, output = 0;
  bufferCounts(p, &input, &output);
  const uint64_t size = b == Buffer::kInput ? input : b == Buffer::kOutput ? output : 0;
  return p.nranks > 1 && size == p.count * static_cast<uint64_t>(p.nranks);
}

// `p` (built at count == chunks) for `unit` elements per chunk and rank blocks `stride` elements apart.
Program scaled(const Program& p, uint64_t unit, uint64_t stride) {
  const uint64_t chunks = p.count;
  const bool inputBlocked = blocked(p, Buffer::kInput), outputBlocked = blocked(p, Buffer::kOutput);
  auto place = [&](Range* r) {
    const bool inBlocks =
        (r->buffer == Buffer::kInput && inputBlocked) || (r->buffer == Buffer::kOutput && outputBlocked);
    r->offset = inBlocks ? r->offset / chunks * stride + r->offset % chunks * unit : r->offset * unit;
  };
  Program q = p;
  q.count = chunks * unit;
  q.stride = stride;
  q.scratchCount = p.scratchCount * unit;
  for (Step& s : q.steps) {
    place(&s.src);
    place(&s.dst);
    s.count *= unit;
    s.recvCount *= unit;
  }
  return q;
}

Program scaled(const Program& p, uint64_t unit) { return scaled(p, unit, p.count * unit); }

}  // namespace

Status parseProgramFile(const std::string& text, const std::string& path, ProgramFile* out) {
  const Reader rd{path};
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number too large for any type
    return rd.fail("", std::string("not JSON: ") + e.what());
  }
  if (!doc.is_object()) return rd.fail("", "the file must hold one JSON object");
  COLLIE_RETURN_IF_ERROR(rd.onlyKeys(doc,
                                     {"collie_program", "collective", "name", "nranks", "root", "chunks", "min_bytes",
                                      "max_bytes", "protocol", "ranks"},
                                     ""));
  int64_t version = 0;
  COLLIE_RETURN_IF_ERROR(rd.integer(doc, "collie_program", 1, kFileVersion, true, 0, "", &version));
  ProgramFile f;
  auto coll = doc.find("collective");
  if (coll == doc.end() || !coll->is_string() || !knownCollective(coll->get<std::string>(), &f.collective))
    return rd.fail("", "\"collective\" must name a collective (allreduce, reducescatter, allgather, ...)");
  if (f.collective == Collective::kAllToAllv)
    return rd.fail("", "alltoallv cannot come from a file: its programs depend on each call's per-peer counts");
  auto name = doc.find("name");
  if (name == doc.end() || !name->is_string() || name->get<std::string>().empty() ||
      name->get<std::string>().size() > 64)
    return rd.fail("", "\"name\" must be a string of 1 to 64 characters");
  f.name = name->get<std::string>();
  int64_t v = 0;
  COLLIE_RETURN_IF_ERROR(rd.integer(doc, "nranks", 1, 64, true, 0, "", &v));
  f.nranks = static_cast<int>(v);
  COLLIE_RETURN_IF_ERROR(rd.integer(doc, "root", 0, f.nranks - 1, false, 0, "", &v));
  f.root = static_cast<int>(v);
  COLLIE_RETURN_IF_ERROR(rd.integer(doc, "chunks", 1, static_cast<int64_t>(kMaxFileChunks), true, 0, "", &v));
  f.chunks = static_cast<uint64_t>(v);
  COLLIE_RETURN_IF_ERROR(rd.integer(doc, "min_bytes", 0, INT64_MAX, false, 0, "", &v));
  f.minBytes = static_cast<uint64_t>(v);
  COLLIE_RETURN_IF_ERROR(rd.integer(doc, "max_bytes", 0, INT64_MAX, false, INT64_MAX, "", &v));
  f.maxBytes = v == INT64_MAX ? UINT64_MAX : static_cast<uint64_t>(v);
  if (f.maxBytes < f.minBytes)
    return rd.fail("", "\"max_bytes\" " + std::to_string(f.maxBytes) + " is below \"min_bytes\" " +
                           std::to_string(f.minBytes) + ": the file would serve no call");
  auto protocol = doc.find("protocol");
  if (protocol != doc.end()) {
    const std::string p = protocol->is_string() ? protocol->get<std::string>() : "";
    if (p == "auto") {
      f.protocol = FileProtocol::kAuto;
    } else if (p == "simple") {
      f.protocol = FileProtocol::kSimple;
    } else if (p == "ll") {
      f.protocol = FileProtocol::kLL;
    } else {
      return rd.fail("", "\"protocol\" must be \"auto\", \"simple\" or \"ll\", not " + protocol->dump());
    }
  }
  auto ranks = doc.find("ranks");
  if (ranks == doc.end() || !ranks->is_array() || ranks->size() != static_cast<size_t>(f.nranks))
    return rd.fail("", "\"ranks\" must be an array of nranks (" + std::to_string(f.nranks) + ") programs");
  for (int r = 0; r < f.nranks; ++r) {
    const json& jr = (*ranks)[static_cast<size_t>(r)];
    const std::string where = "rank " + std::to_string(r);
    if (!jr.is_object()) return rd.fail(where, "a rank's program must be an object");
    COLLIE_RETURN_IF_ERROR(rd.onlyKeys(jr, {"rank", "scratch", "steps"}, where));
    COLLIE_RETURN_IF_ERROR(rd.integer(jr, "rank", r, r, true, 0, where, &v));
    Program p;
    p.collective = f.collective;
    p.algorithm = f.name;
    p.nranks = f.nranks;
    p.rank = r;
    p.count = p.stride = f.chunks;
    p.root = f.root;
    COLLIE_RETURN_IF_ERROR(rd.integer(jr, "scratch", 0, static_cast<int64_t>(kMaxFileChunks), false, 0, where, &v));
    p.scratchCount = static_cast<uint64_t>(v);
    auto steps = jr.find("steps");
    if (steps == jr.end() || !steps->is_array()) return rd.fail(where, "\"steps\" must be an array");
    if (steps->size() > kMaxFileSteps)
      return rd.fail(where, std::to_string(steps->size()) + " steps, more than " + std::to_string(kMaxFileSteps));
    for (size_t i = 0; i < steps->size(); ++i) {
      const std::string at = where + ", step " + std::to_string(i);
      Step s;
      COLLIE_RETURN_IF_ERROR(readStep(rd, (*steps)[i], f.nranks, at, &s));
      COLLIE_RETURN_IF_ERROR(checkBounds(rd, p, s, at));
      f.maxStepChunks = std::max({f.maxStepChunks, s.sent(), s.received()});
      for (int which = 0; which < 2; ++which) {
        const Range& range = which == 0 ? s.src : s.dst;
        const uint64_t n = which == 0 ? (readsSrc(s.op) ? s.count : 0)
                                      : (writesDst(s.op) ? (stepIsExchange(s.op) ? s.recvCount : s.count) : 0);
        if (n > 0 && blocked(p, range.buffer) && range.offset % f.chunks + n > f.chunks) f.crossesBlocks = true;
      }
      p.steps.push_back(s);
    }
    f.programs.push_back(std::move(p));
  }
  f.hash = fnv1a(text.data(), text.size());
  *out = std::move(f);
  return Status();
}

Status loadProgramFile(const std::string& path, ProgramFile* out) {
  // Not a device, a pipe or a folder: reading one could block or never end.
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return Status::error(collieInvalidArgument, "%s: cannot be read", printableText(path).c_str());
  if (!S_ISREG(st.st_mode) || st.st_size > (64 << 20))
    return Status::error(collieInvalidArgument, "%s: not a regular file of at most 64 MiB",
                         printableText(path).c_str());
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(collieInvalidArgument, "%s: cannot be read", printableText(path).c_str());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::error(collieSystemError, "%s: read failed", printableText(path).c_str());
  const std::string body = text.str();
  return looksLikeMscclXml(body, path) ? parseMscclXml(body, path, out) : parseProgramFile(body, path, out);
}

Status programsForCount(const ProgramFile& file, uint64_t count, std::vector<Program>* out) {
  if (count % file.chunks != 0)
    return Status::error(collieInvalidArgument,
                         "program file '%s' (%s): count %llu is not a multiple of its %llu chunks", file.name.c_str(),
                         collectiveName(file.collective), static_cast<unsigned long long>(count),
                         static_cast<unsigned long long>(file.chunks));
  const uint64_t unit = count / file.chunks;
  out->clear();
  for (const Program& p : file.programs) {
    // Offsets and counts are at most kMaxFileChunks: the products fit unless `unit` is huge.
    uint64_t ignored;
    if (__builtin_mul_overflow(kMaxFileChunks * 2, unit, &ignored))
      return Status::error(collieInvalidArgument, "program file '%s': count %llu is too large to scale its chunks to",
                           file.name.c_str(), static_cast<unsigned long long>(count));
    out->push_back(scaled(p, unit));
  }
  return Status();
}

Program fileProgram(const ProgramFile& file, const ProgramArgs& args) {
  const uint64_t unit = args.count / file.chunks;
  Program p = scaled(file.programs[static_cast<size_t>(args.rank)], unit, args.blockStride());
  p.count = args.count;
  return p;
}

uint64_t fileRoundCount(const ProgramFile& file, uint64_t slotElems) {
  if (file.crossesBlocks || file.maxStepChunks == 0) return UINT64_MAX;
  return std::max<uint64_t>(1, slotElems / file.maxStepChunks) * file.chunks;
}

Status verifyFileSlots(const ProgramFile& file, const std::string& path, uint32_t nslots) {
  // In rounds every step moves at most one slice: the file at one element per chunk, a slice as large as its
  // largest step. In one round a step may move any number of slices: one slot, every step of two or more.
  const bool oneRound = fileRoundCount(file, 1) == UINT64_MAX;
  if (file.maxStepChunks == 0) return Status();
  std::vector<Program> programs;
  COLLIE_RETURN_IF_ERROR(programsForCount(file, oneRound ? 2 * file.chunks : file.chunks, &programs));
  for (int joined = 1; joined >= 0; --joined) {
    VerifyOptions options;
    options.sliceElems = oneRound ? 1 : file.maxStepChunks;
    options.nslots = oneRound ? 1 : nslots;
    options.joinReceives = joined != 0;
    const Status st = verifyPrograms(programs, options);
    if (!st.ok())
      return Status::error(
          collieInvalidArgument, "%s",
          printableText(path + ": " +
                        (oneRound ? std::string("a range crosses rank blocks, so it runs in one round, and with one "
                                                "slot per connection ")
                                  : "cut into rounds, with " + std::to_string(nslots) + " slots per connection ") +
                        st.message())
              .c_str());
  }
  return Status();
}

Status fileAlgorithm(const std::string& path, Collective c, const AlgorithmInfo** out) {
  struct Entry {
    std::string path, name, description;
    ProgramFile file;
    AlgorithmInfo info;
  };
  static std::mutex mu;
  static std::deque<Entry> loaded;  // never shrinks: communicators and program caches hold its addresses
  ProgramFile file;
  COLLIE_RETURN_IF_ERROR(loadProgramFile(path, &file));
  if (file.collective != c)
    return Status::error(collieInvalidArgument, "%s: the file is a %s, not a %s", printableText(path).c_str(),
                         collectiveName(file.collective), collectiveName(c));
  std::lock_guard<std::mutex> lock(mu);
  for (const Entry& e : loaded)
    if (e.path == path && e.file.hash == file.hash) {
      *out = &e.info;
      return Status();
    }
  COLLIE_RETURN_IF_ERROR(verifyProgramFile(file, path));
  loaded.emplace_back();
  Entry& e = loaded.back();
  e.path = path;
  e.name = "file:" + file.name;
  e.description = "program file " + path;
  e.file = std::move(file);
  for (Program& p : e.file.programs) p.algorithm = e.name;
  e.info = AlgorithmInfo{c, e.name.c_str(), e.description.c_str(), nullptr, RoundRule::kFile, false, &e.file};
  *out = &e.info;
  return Status();
}

Status verifyProgramFile(const ProgramFile& file, const std::string& path, std::string* counts) {
  // The verifier keeps a contribution set per element of every rank's buffers: bound what a file may ask of it.
  constexpr uint64_t kMostElements = uint64_t{1} << 24;
  uint64_t elements = 0;
  for (const Program& p : file.programs) {
    uint64_t input = 0, output = 0;
    bufferCounts(p, &input, &output);
    elements += 3 * (input + output + p.scratchCount);
  }
  if (elements > kMostElements)
    return Status::error(collieInvalidArgument,
                         "%s: too large to prove: %llu elements in all ranks' buffers at 3 x %llu chunks, more "
                         "than %llu; use fewer chunks",
                         printableText(path).c_str(), static_cast<unsigned long long>(elements),
                         static_cast<unsigned long long>(file.chunks), static_cast<unsigned long long>(kMostElements));
  std::string proved;
  for (uint64_t k = 1; k <= 3; ++k) {
    const uint64_t count = file.chunks * k;
    std::vector<Program> programs;
    COLLIE_RETURN_IF_ERROR(programsForCount(file, count, &programs));
    uint64_t inBase = 0, outBase = 0;
    const bool hasInPlace = inPlaceBases(programs.front(), &inBase, &outBase);
    for (int inPlace = 0; inPlace <= (hasInPlace ? 1 : 0); ++inPlace)
      for (int joined = 1; joined >= 0; --joined) {
        VerifyOptions options;
        options.inPlace = inPlace != 0;
        options.joinReceives = joined != 0;
        const Status st = verifyPrograms(programs, options);
        if (!st.ok())
          return Status::error(collieInvalidArgument, "%s",
                               printableText(path + ": count " + std::to_string(count) +
                                             (inPlace ? " in place" : " out of place") + ": " + st.message())
                                   .c_str());
      }
    proved += (proved.empty() ? "" : ", ") + std::to_string(count);
    if (k == 3) proved += hasInPlace ? ", in and out of place" : ", out of place (it has no in-place form)";
  }
  if (counts != nullptr) *counts = "counts " + proved + ", joined steps as one and one by one";
  return Status();
}

std::string programFileText(const std::vector<Program>& programs, uint64_t chunks) {
  const Program& first = programs.front();
  std::string t = "{\n  \"collie_program\": " + std::to_string(kFileVersion) + ",\n";
  t += "  \"collective\": " + json(collectiveName(first.collective)).dump() + ",\n";
  t += "  \"name\": " + json(first.algorithm).dump() + ",\n";
  t += "  \"nranks\": " + std::to_string(first.nranks) + ",\n";
  t += "  \"root\": " + std::to_string(first.root) + ",\n";
  t += "  \"chunks\": " + std::to_string(chunks) + ",\n";
  t += "  \"ranks\": [";
  for (size_t r = 0; r < programs.size(); ++r) {
    const Program& p = programs[r];
    t += std::string(r ? "," : "") + "\n    {\"rank\": " + std::to_string(p.rank) +
         ", \"scratch\": " + std::to_string(p.scratchCount) + ", \"steps\": [";
    for (size_t i = 0; i < p.steps.size(); ++i)
      t += std::string(i ? "," : "") + "\n      " + stepJson(p.steps[i]).dump();
    t += p.steps.empty() ? "]}" : "\n    ]}";
  }
  t += "\n  ]\n}\n";
  return t;
}

uint64_t fileCallBytes(Collective c, uint64_t bytes, int nranks) {
  // The collectives whose count is one rank's block (alltoallv among them, which no file can be).
  if (!hasRankBlocks(c) || nranks <= 1) return bytes;
  const uint64_t n = static_cast<uint64_t>(nranks);
  return bytes > UINT64_MAX / n ? UINT64_MAX : bytes * n;
}

bool fileServes(const ProgramFile& file, uint64_t callBytes) {
  return callBytes >= file.minBytes && callBytes <= file.maxBytes;
}

Status exportAlgorithm(const AlgorithmInfo& algo, int nranks, int root, int ranksPerNode, std::string* text,
                       uint64_t* chunks) {
  if (algo.collective == Collective::kAllToAllv)
    return Status::error(collieInvalidArgument,
                         "alltoallv %s: its programs depend on each call's per-peer counts; a file cannot hold them",
                         algo.name);
  if (algo.mapsPeers)
    return Status::error(collieInvalidArgument,
                         "%s %s: its programs hold direct steps (program.h), which a program file cannot hold",
                         collectiveName(algo.collective), algo.name);
  auto build = [&](uint64_t count) { return buildPrograms(algo, nranks, count, count, root, ranksPerNode); };
  const uint64_t most = 64 * static_cast<uint64_t>(nranks);
  for (uint64_t c = 1; c <= most; ++c) {
    const std::vector<Program> base = build(c);
    bool scales = true;
    for (uint64_t k = 2; k <= 3 && scales; ++k) {
      const std::vector<Program> big = build(c * k);
      for (size_t r = 0; r < base.size() && scales; ++r) {
        const Program s = scaled(base[r], k);
        scales = s.scratchCount == big[r].scratchCount && sameSteps(s.steps, big[r].steps);
      }
    }
    if (!scales) continue;
    *chunks = c;
    *text = programFileText(base, c);
    return Status();
  }
  return Status::error(collieInvalidArgument,
                       "%s %s on %d ranks: no chunk count up to %llu at which its programs scale with the count",
                       collectiveName(algo.collective), algo.name, nranks, static_cast<unsigned long long>(most));
}

}  // namespace collie
