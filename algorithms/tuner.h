// The tuner: which registered algorithm a call should use. It asks the
// simulator for every algorithm of the collective and takes the fastest, so an
// algorithm added to the registry competes as soon as it is there. COLLIE_ALGO
// overrides the choice per collective (parseAlgorithmOverrides).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "algorithms/registry.h"
#include "algorithms/topology.h"
#include "base/status.h"

namespace collie {

/// The registered algorithm of `c` with the smallest predicted time on `topo`
/// for `nranks` ranks (ties go to the registry's first), of those that need no
/// mapped peers (AlgorithmInfo::mapsPeers) unless `direct` says the ranks map
/// each other's buffers (COLLIE_DIRECT_TUNE, core/comm.h). `bytes` is the call's
/// count argument times the element size, as core/collectives.cc has it: one
/// rank block for reduce-scatter, allgather, gather and scatter, one peer's
/// block for all-to-all, the whole send buffer of a rank for all-to-all-v.
/// Elements are taken as 4 bytes when `bytes` is a multiple of 4 (else 2, else 1).
/// Falls back to the default algorithm when no prediction succeeds; nullptr
/// when `c` has no algorithm. A simulation per algorithm costs from
/// microseconds to a few hundred milliseconds (1 GiB on 128 ranks), so answers
/// are cached (thread-safe, by collective, size, ranks, topology and `direct`).
const AlgorithmInfo* tunedAlgorithm(Collective c, uint64_t bytes, int nranks, const Topology& topo,
                                    bool direct = false);

/// Parses a collective's name: allreduce, broadcast, reduce, allgather,
/// reducescatter, alltoall, alltoallv, gather, scatter, sendrecv, barrier
/// (case, '_' and '-' ignored: "all_reduce", "AllReduce"; "bcast" for broadcast).
bool collectiveFromName(const std::string& name, Collective* out);

/// The collectives that have registered algorithms, comma-separated, for messages.
std::string collectiveNames();

/// Parses COLLIE_ALGO: "allreduce:ring;broadcast:binomial". Entries are
/// separated by ';' or ',', whitespace around names is ignored, empty entries
/// are skipped, a later entry for the same collective replaces an earlier one.
/// An empty spec overrides nothing. An unknown collective or algorithm is an
/// error naming the valid ones; `out` is left untouched on error. Errors begin with `source`, where the spec came
/// from.
Status parseAlgorithmOverrides(const std::string& spec, std::map<Collective, const AlgorithmInfo*>* out,
                               const char* source = "COLLIE_ALGO");

}  // namespace collie
