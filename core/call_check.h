// Cross-rank call checks (COLLIE_CHECK=1).
//
// A rank that calls a different collective, count, type, op or root than its
// peers makes the others wait forever or compute garbage. (Without the check,
// the host executor still refuses a peer's slice of another call, carried with
// its call's signature, executor/protocol.h; but it cannot say what differs,
// and the kernels and peers on other hosts do not sign.) With COLLIE_CHECK=1,
// before each collective runs, every rank sends a short record of the call to
// all others over the communicator's bootstrap (TCP, independent of the data
// path) and compares. A disagreement becomes collieInvalidUsage on every rank
// with a sentence naming the field and which ranks hold which value; the data
// path is never touched, so the communicator stays usable.
//
// All-to-all-v also compares counts across ranks: what rank i sends to j must
// be what j expects from i, which no rank can check alone.
//
// A rank that rejected its own arguments still takes part (with its reason), so
// its peers fail at once naming it rather than after COLLIE_TIMEOUT.
//
// Cost: one bootstrap ring allgather per call (n - 1 TCP hops), two for
// all-to-all-v (docs/PERFORMANCE.md has the figures). Send/recv are not checked: they are
// not collective.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/program.h"
#include "base/status.h"
#include "collie.h"

struct collieComm;

namespace collie {

/// What a rank was asked to do, as far as it must agree with its peers.
struct CallShape {
  const char* call = "";  // the API function, e.g. "collieBarrier"
  Collective collective = Collective::kAllReduce;
  collieDataType_t type = collieInt8;
  collieRedOp_t op = collieSum;                       // a pre-multiplied sum of any scalar is collieNumOps
  uint64_t count = 0;                                 // all-to-all-v: 0 (its per-peer counts are compared instead)
  int root = 0;                                       // 0 for collectives without a root
  const char* algorithm = "";                         // the algorithm this rank would run
  const std::vector<uint64_t>* sendCounts = nullptr;  // all-to-all-v only
  const std::vector<uint64_t>* recvCounts = nullptr;
};

/// Compares `shape` with every rank's; collective over comm's bootstrap.
/// `local` is this rank's own verdict on its arguments: when it failed, the
/// peers are told why and `local` is returned. Ok when all ranks agree.
Status checkAcrossRanks(collieComm* comm, const CallShape& shape, const Status& local);

/// The sentence for ranks that disagree; exposed for the unit test of its wording.
/// values[r] is rank r's value of the field.
std::string describeDisagreement(const char* field, const std::vector<std::string>& values);

}  // namespace collie
