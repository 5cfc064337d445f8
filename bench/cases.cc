#include "bench/cases.h"

#include <algorithm>

#include "executor/reduce_ops.h"

namespace collie {
namespace bench {

const std::vector<CollInfo>& collInfos() {
  static const std::vector<CollInfo> infos = {
      {Coll::kAllReduce, "allreduce", true, false, true},
      {Coll::kAllGather, "allgather", false, false, true},
      {Coll::kReduceScatter, "reducescatter", true, false, true},
      {Coll::kBroadcast, "broadcast", false, true, true},
      {Coll::kReduce, "reduce", true, true, true},
      {Coll::kAllToAll, "alltoall", false, false, false},
      {Coll::kAllToAllv, "alltoallv", false, false, false},
      {Coll::kGather, "gather", false, true, true},
      {Coll::kScatter, "scatter", false, true, true},
      {Coll::kSendRecv, "sendrecv", false, false, false},
  };
  return infos;
}

const CollInfo& collInfo(Coll c) {
  for (const CollInfo& i : collInfos())
    if (i.coll == c) return i;
  return collInfos().front();
}

bool collFromName(const std::string& name, Coll* out) {
  for (const CollInfo& i : collInfos()) {
    if (name == i.name) {
      *out = i.coll;
      return true;
    }
  }
  return false;
}

double busFactor(Coll c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Coll::kAllReduce:
      return nranks > 1 ? 2.0 * (n - 1) / n : 0.0;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kAllToAllv:
    case Coll::kGather:
    case Coll::kScatter:
      return (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double floorBytes(Coll c, int nranks, size_t rowBytes) {
  const double n = nranks, s = static_cast<double>(rowBytes);
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kAllToAll:
    case Coll::kAllToAllv:
    case Coll::kSendRecv:
      return 2 * s;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kBroadcast:
    case Coll::kReduce:
      return (n + 1) * s / n;
    case Coll::kGather:
    case Coll::kScatter:
      return 2 * s / n;
  }
  return -1;
}

size_t Case::typeBytes() const { return collie::typeSize(type); }

bool Case::hasOutput() const {
  if (coll == Coll::kReduce || coll == Coll::kGather) return rank == root;
  return true;
}

size_t alltoallvSendDispl(const std::vector<size_t>& matrix, int nranks, int sender, int receiver) {
  size_t displ = 0;
  for (int p = 0; p < receiver; ++p) displ += matrix[static_cast<size_t>(sender) * nranks + p];
  return displ;
}

Case makeCase(Coll coll, collieDataType_t type, collieRedOp_t op, int root, int nranks, int rank, size_t bytes,
              const std::vector<size_t>* matrix) {
  Case c;
  c.coll = coll;
  c.type = type;
  c.op = collInfo(coll).reduces ? op : collieSum;
  c.root = collInfo(coll).rooted ? root : -1;
  c.nranks = nranks;
  c.rank = rank;
  const size_t es = collie::typeSize(type);
  const size_t n = static_cast<size_t>(nranks);
  const size_t total = bytes / es;
  const size_t block = total / n;  // per-rank block of the collectives whose size counts every rank's block
  switch (coll) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
      c.count = c.rowCount = total;
      c.sendElems = c.recvElems = c.bufElems = total;
      break;
    case Coll::kAllGather:
    case Coll::kGather:
      // In place: the send block is this rank's block of the output.
      c.count = block;
      c.rowCount = block * n;
      c.sendElems = block;
      c.recvElems = c.bufElems = block * n;
      c.sendOff = block * static_cast<size_t>(rank);
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:
      // In place: the output is this rank's block of the input.
      c.count = block;
      c.rowCount = block * n;
      c.sendElems = c.bufElems = block * n;
      c.recvElems = block;
      c.recvOff = block * static_cast<size_t>(rank);
      break;
    case Coll::kAllToAll:
      c.count = block;
      c.rowCount = block * n;
      c.sendElems = c.recvElems = c.bufElems = block * n;
      break;
    case Coll::kAllToAllv: {
      c.matrix = *matrix;
      size_t all = 0;
      for (size_t v : c.matrix) all += v;
      c.rowCount = all / n;  // the mean row: what one rank sends on average
      for (int p = 0; p < nranks; ++p) {
        c.sendCounts.push_back(c.matrix[static_cast<size_t>(rank) * n + p]);
        c.recvCounts.push_back(c.matrix[static_cast<size_t>(p) * n + rank]);
      }
      size_t s = 0, r = 0;
      for (int p = 0; p < nranks; ++p) {
        c.sendDispls.push_back(s);
        c.recvDispls.push_back(r);
        s += c.sendCounts[static_cast<size_t>(p)];
        r += c.recvCounts[static_cast<size_t>(p)];
      }
      c.sendElems = s;
      c.recvElems = c.bufElems = r;
      c.count = s;
      break;
    }
  }
  c.rowBytes = c.rowCount * es;
  return c;
}

}  // namespace bench
}  // namespace collie
