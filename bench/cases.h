// The collectives collie-bench measures and the shape of one call on one rank:
// counts, buffer extents, where in-place puts the send and receive data, and
// nccl-tests' size column and bus-bandwidth factor. Pure arithmetic, shared by
// every implementation (Collie, NCCL, MPI), so they run exactly the same cases.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "collie.h"

namespace collie {
namespace bench {

enum class Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,
  kAllToAllv,
  kGather,
  kScatter,
  kSendRecv,
};

struct CollInfo {
  Coll coll;
  const char* name;  // the subcommand
  bool reduces;      // takes a reduction operator
  bool rooted;       // takes a root
  bool inPlace;      // has an in-place form (all-to-all(v) and send/recv do not)
};

const std::vector<CollInfo>& collInfos();
const CollInfo& collInfo(Coll c);
bool collFromName(const std::string& name, Coll* out);

/// nccl-tests' factor from algbw to busbw: 2(n-1)/n for allreduce, (n-1)/n for
/// allgather, reduce-scatter, all-to-all(v), gather and scatter, 1 for
/// broadcast, reduce and send/recv.
double busFactor(Coll c, int nranks);

/// The byte floor per rank of a call whose size column is `rowBytes` (S): the bytes a collective of `nranks` ranks
/// on one GPU must read and write in its memory, every input read once and every output written once, over the
/// ranks: allreduce, all-to-all(v) and send/recv 2S, reduce-scatter, allgather, broadcast and reduce (n+1)S/n,
/// gather and scatter 2S/n. Placement does not change it. At the rate of device-to-device copies with every rank
/// copying at once (--limit) it is the floor time of docs/PERFORMANCE.md, "Floors and ceilings".
double floorBytes(Coll c, int nranks, size_t rowBytes);

/// One call on one rank. Counts are in elements of `type`.
struct Case {
  Coll coll = Coll::kAllReduce;
  collieDataType_t type = collieFloat32;
  collieRedOp_t op = collieSum;  // collieSum where the collective has none
  int root = 0;
  int nranks = 1;
  int rank = 0;

  size_t count = 0;     // the API's count argument (per-rank block where the collective has blocks)
  size_t rowCount = 0;  // nccl-tests' count column
  size_t rowBytes = 0;  // nccl-tests' size column: what algbw divides

  size_t sendElems = 0, recvElems = 0;  // out-of-place buffer extents
  // In place: one buffer of bufElems; the call's send data starts at sendOff, its receive data at recvOff.
  size_t bufElems = 0, sendOff = 0, recvOff = 0;

  // All-to-all-v: the whole matrix (row = sender, elements) and this rank's splits (contiguous displacements).
  std::vector<size_t> matrix;
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;

  size_t typeBytes() const;
  /// Whether this rank's output is defined (reduce and gather write on the root only).
  bool hasOutput() const;
};

/// The case of `bytes` (nccl-tests' size argument) for rank `rank`. For
/// all-to-all-v `matrix` (nranks x nranks elements) gives the counts and
/// `bytes` is ignored.
Case makeCase(Coll coll, collieDataType_t type, collieRedOp_t op, int root, int nranks, int rank, size_t bytes,
              const std::vector<size_t>* matrix);

/// Where rank `sender` puts the block it sends to `receiver` (all-to-all-v:
/// contiguous displacements in row order), in elements.
size_t alltoallvSendDispl(const std::vector<size_t>& matrix, int nranks, int sender, int receiver);

}  // namespace bench
}  // namespace collie
