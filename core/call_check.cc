// Cross-rank call checks (COLLIE_CHECK=1); see call_check.h for what and why.
#include "core/call_check.h"

#include <cstring>
#include <string>
#include <vector>

#include "core/comm.h"
#include "executor/reduce_ops.h"
#include "transport/bootstrap/bootstrap.h"

namespace collie {

namespace {

constexpr uint32_t kRecordMagic = 0x434c4b31;  // "CLK1": both sides run the same build
constexpr size_t kMaxListedPairs = 4;          // all-to-all-v pairs named in one sentence

// One rank's call, as raw bytes over the bootstrap: fixed size, so ranks that
// disagree on everything still exchange the same number of bytes.
struct Record {
  uint32_t magic;
  uint32_t valid;  // 0: this rank rejected its own arguments (reason says why)
  uint64_t seq;    // collectives this rank has checked before this one
  uint64_t count;
  int32_t type;
  int32_t op;
  int32_t root;
  int32_t alltoallv;  // 1: a second exchange of per-peer counts follows
  char call[32];
  char algorithm[32];
  char reason[192];
};

void copyText(char* dst, size_t size, const char* src) {
  strncpy(dst, src, size - 1);
  dst[size - 1] = '\0';
}

// "0", "0-2", "0-1,3,5-6": ranks in increasing order.
std::string rankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string opText(int32_t op) {
  if (op >= collieNumOps) return "a pre-multiplied sum";
  return opName(static_cast<collieRedOp_t>(op));
}

// Appends "field ..." to *out when the ranks' values differ.
void compareField(const char* field, const std::vector<std::string>& values, std::string* out) {
  for (const std::string& v : values) {
    if (v == values[0]) continue;
    if (!out->empty()) *out += "; ";
    *out += describeDisagreement(field, values);
    return;
  }
}

// The sentence for ranks whose all-to-all-v counts do not pair up; empty when they do.
std::string countMismatches(const std::vector<uint64_t>& all, int n) {
  // all[r * 2n + p]: rank r's send count to p; all[r * 2n + n + p]: its receive count from p.
  const size_t un = static_cast<size_t>(n);
  std::string out;
  size_t found = 0;
  for (size_t i = 0; i < un; ++i)
    for (size_t j = 0; j < un; ++j) {
      const uint64_t sends = all[i * 2 * un + j], expects = all[j * 2 * un + un + i];
      if (sends == expects) continue;
      if (found++ < kMaxListedPairs) {
        if (!out.empty()) out += "; ";
        out += "rank " + std::to_string(i) + " sends " + std::to_string(sends) + " elements to rank " +
               std::to_string(j) + ", which expects " + std::to_string(expects) + " from it";
      }
    }
  if (found > kMaxListedPairs) out += "; and " + std::to_string(found - kMaxListedPairs) + " more pairs";
  return out;
}

}  // namespace

std::string describeDisagreement(const char* field, const std::vector<std::string>& values) {
  // Values in the order of the first rank holding each, with the ranks holding it.
  std::vector<std::string> distinct;
  std::vector<std::vector<int>> holders;
  for (size_t r = 0; r < values.size(); ++r) {
    size_t k = 0;
    while (k < distinct.size() && distinct[k] != values[r]) ++k;
    if (k == distinct.size()) {
      distinct.push_back(values[r]);
      holders.emplace_back();
    }
    holders[k].push_back(static_cast<int>(r));
  }
  std::string out = std::string(field) + " is ";
  for (size_t k = 0; k < distinct.size(); ++k) {
    if (k > 0) out += k + 1 == distinct.size() ? " and " : ", ";
    out += distinct[k] + " on rank" + (holders[k].size() > 1 ? "s " : " ") + rankList(holders[k]);
  }
  return out;
}

Status checkAcrossRanks(collieComm* comm, const CallShape& shape, const Status& local) {
  const int n = comm->nranks;
  const uint64_t seq = comm->checkedCalls++;
  Record mine;
  memset(&mine, 0, sizeof(mine));
  mine.magic = kRecordMagic;
  mine.valid = local.ok() ? 1 : 0;
  mine.seq = seq;
  mine.count = shape.count;
  mine.type = shape.type;
  mine.op = shape.op;
  mine.root = shape.root;
  mine.alltoallv = shape.collective == Collective::kAllToAllv ? 1 : 0;
  copyText(mine.call, sizeof(mine.call), shape.call);
  copyText(mine.algorithm, sizeof(mine.algorithm), shape.algorithm);
  if (!local.ok()) copyText(mine.reason, sizeof(mine.reason), local.message().c_str());

  std::vector<Record> all(static_cast<size_t>(n));
  all[static_cast<size_t>(comm->rank)] = mine;
  const std::string what = std::string(shape.call) + ": COLLIE_CHECK";
  Status st = comm->bootstrap->allGather(all.data(), sizeof(Record));
  if (!st.ok()) return st.withContext(what + ": comparing call #" + std::to_string(seq) + " with the other ranks");
  if (!local.ok()) return local;

  std::string bad;
  for (int r = 0; r < n; ++r) {
    const Record& rec = all[static_cast<size_t>(r)];
    if (rec.magic != kRecordMagic)
      return Status::error(collieInternalError, "%s: rank %d sent a malformed call record", what.c_str(), r);
    if (rec.valid == 0) {
      if (!bad.empty()) bad += "; ";
      bad += "rank " + std::to_string(r) + " rejected its arguments (" +
             std::string(rec.reason, strnlen(rec.reason, sizeof(rec.reason))) + ")";
    }
  }
  if (!bad.empty())
    return Status::error(collieInvalidUsage, "%s: call #%llu failed on other ranks: %s", what.c_str(),
                         static_cast<unsigned long long>(seq), bad.c_str());

  std::vector<std::string> calls, counts, types, ops, roots, algos, seqs;
  for (const Record& rec : all) {
    calls.emplace_back(rec.call, strnlen(rec.call, sizeof(rec.call)));
    seqs.push_back("#" + std::to_string(rec.seq));
    counts.push_back(std::to_string(rec.count));
    types.push_back(typeName(static_cast<collieDataType_t>(rec.type)));
    ops.push_back(opText(rec.op));
    roots.push_back(std::to_string(rec.root));
    algos.emplace_back(rec.algorithm, strnlen(rec.algorithm, sizeof(rec.algorithm)));
  }
  compareField("the call", calls, &bad);
  compareField("the checked-call number", seqs, &bad);
  compareField("count", counts, &bad);
  compareField("datatype", types, &bad);
  compareField("op", ops, &bad);
  compareField("root", roots, &bad);
  // Algorithms follow from the fields above; only worth saying when those agree.
  if (bad.empty()) compareField("the algorithm", algos, &bad);
  if (!bad.empty())
    return Status::error(collieInvalidUsage, "%s: the ranks disagree on call #%llu: %s", what.c_str(),
                         static_cast<unsigned long long>(seq), bad.c_str());
  if (mine.alltoallv == 0) return Status();

  // All ranks agree this is an all-to-all-v, so all of them make this second exchange.
  const size_t un = static_cast<size_t>(n);
  std::vector<uint64_t> counts2(un * 2 * un);
  for (size_t p = 0; p < un; ++p) {
    counts2[static_cast<size_t>(comm->rank) * 2 * un + p] = (*shape.sendCounts)[p];
    counts2[static_cast<size_t>(comm->rank) * 2 * un + un + p] = (*shape.recvCounts)[p];
  }
  st = comm->bootstrap->allGather(counts2.data(), 2 * un * sizeof(uint64_t));
  if (!st.ok()) return st.withContext(what + ": comparing all-to-all-v counts with the other ranks");
  const std::string mismatch = countMismatches(counts2, n);
  if (!mismatch.empty())
    return Status::error(collieInvalidUsage, "%s: all-to-all-v counts do not pair up in call #%llu: %s", what.c_str(),
                         static_cast<unsigned long long>(seq), mismatch.c_str());
  return Status();
}

}  // namespace collie
