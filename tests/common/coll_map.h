// The test's name for a collective (Coll) from the library's (Collective),
// for tests that walk the algorithm registry.
#pragma once

#include "algorithms/program.h"
#include "common/test_util.h"

namespace collie {
namespace test {

/// False for collectives with tests of their own (all-to-all-v, send/recv, barrier).
inline bool toColl(collie::Collective c, Coll* out) {
  switch (c) {
    case collie::Collective::kAllReduce:
      *out = Coll::kAllReduce;
      return true;
    case collie::Collective::kReduceScatter:
      *out = Coll::kReduceScatter;
      return true;
    case collie::Collective::kAllGather:
      *out = Coll::kAllGather;
      return true;
    case collie::Collective::kBroadcast:
      *out = Coll::kBroadcast;
      return true;
    case collie::Collective::kReduce:
      *out = Coll::kReduce;
      return true;
    case collie::Collective::kAllToAll:
      *out = Coll::kAllToAll;
      return true;
    case collie::Collective::kGather:
      *out = Coll::kGather;
      return true;
    case collie::Collective::kScatter:
      *out = Coll::kScatter;
      return true;
    default:
      return false;  // all-to-all-v and send/recv have their own tests
  }
}

}  // namespace test
}  // namespace collie
