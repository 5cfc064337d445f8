// The simulator: predicts how long a collective call takes on a Topology by
// running every rank's programs as a discrete-event simulation, moving data
// the way the executors do (and the verifier checks): each step's transfer in
// slices of one slot, through a FIFO of `slots` slots per connection, rounds
// cut exactly as core/collectives.cc cuts the call.
//
// Per slice of b bytes from rank r to rank q (link class L between them):
//   * it may start when r has finished its previous slice, the slice it
//     forwards has arrived, q has freed the slot (credit of slice k - slots),
//     and r's outgoing and q's incoming port of L's kind are free;
//   * it holds both ports for b * beta(L) and reaches q alpha(L) after that;
//   * a reduction costs r b * gamma, a copy out of a slot 2/3 of that,
//     overlapping its own transfer (the executor reduces and stores in one pass);
//   * the receiver frees the slot when it has consumed the slice; the sender
//     sees the credit alpha(L) later.
// Exchange steps (kSendRecv*) progress their two directions independently, and
// consecutive small exchanges run as one batch, every send before any receive
// is waited for, cut by the executors' own rule (program.h, cutExchangeBatch):
// a one-shot allreduce or a pairwise all-to-all of a small call pays one round
// trip, not one per peer. Joined steps (program.h) run one after another, as
// the GPU's LL path runs them; the host and Simple reduce them in one pass.
// Ranks that share one memory (Topology::sharedMemoryBeta: ranks on one GPU)
// take at least their node's summed memory traffic (memory_traffic.h) times
// it: a roofline over the simulated time, not a resource in the simulation.
// Each rank has one port pair for its node's link class and one for the
// network, so a rank sending to several peers of one class is serialized
// while NVLink and the NIC work in parallel.
// Direct programs (program.h, "Direct steps") have no slots: each epoch
// between barriers costs its busiest rank's bytes over its ports (puts and
// reads of peers' buffers) or its local memory work, whichever is longer,
// plus one alpha, and each barrier one alpha (simulator.cc, simulateDirect).
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/registry.h"
#include "algorithms/topology.h"
#include "base/status.h"

namespace collie {

struct Prediction {
  double seconds = 0;
  uint64_t bytes = 0;            // nccl-tests' size S (see collectiveBytes)
  double algbw = 0;              // S / seconds, bytes per second (0 for an empty call)
  double busbw = 0;              // algbw x busBandwidthFactor
  uint64_t rounds = 0;           // rounds the call is cut into
  uint64_t roundsSimulated = 0;  // < rounds: the rest were extrapolated at the steady-state rate
  uint64_t sliceBytes = 0;       // slice size simulated: the slot, or a multiple of it for long steps; 0: direct
  uint64_t slices = 0;           // slice transfers simulated (the work done); direct: puts and reads of peers
  uint64_t barriers = 0;         // direct programs: the barriers each rank passes over the whole call
  // The most bytes one rank's programs read and write in memory over the whole call, every round
  // (algorithms/memory_traffic.h, out of place).
  uint64_t trafficBytes = 0;
  // The same summed over the ranks of the busiest node; with a topology's sharedMemoryBeta the call takes at least
  // this times it (memoryBound: and that is what `seconds` is).
  uint64_t nodeTrafficBytes = 0;
  bool memoryBound = false;
};

/// The largest call the simulator takes, in ranks.
constexpr int kMaxSimulatedRanks = 512;

/// Predicts `call` (collective, nranks, count = the whole call's count argument,
/// root; rank and stride are ignored) of `algo` with elements of `elemBytes`.
/// All-to-all-v: when call.sendCounts has nranks entries, rank r sends
/// sendCounts[(j - r) mod n] elements to rank j (every rank the same pattern,
/// rotated); otherwise `count` to every peer.
Status predict(const AlgorithmInfo& algo, const ProgramArgs& call, size_t elemBytes, const Topology& topo,
               Prediction* out);

/// nccl-tests' size S of a call of `count` (the count argument) elements:
/// count x nranks x elemBytes for the collectives with rank blocks (allgather,
/// reduce-scatter, all-to-all, gather, scatter; all-to-all-v with `count` per
/// peer as predict() takes it), else count x elemBytes.
uint64_t collectiveBytes(Collective c, uint64_t count, int nranks, size_t elemBytes);

/// Whether predict()'s count is one rank block, so that S = count x nranks x elemBytes.
bool hasRankBlocks(Collective c);

/// nccl-tests' busbw / algbw: allreduce 2(n-1)/n; reduce-scatter, allgather,
/// all-to-all(v), gather, scatter (n-1)/n; broadcast, reduce and others 1.
double busBandwidthFactor(Collective c, int nranks);

}  // namespace collie
