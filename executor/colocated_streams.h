// Ranks of one communicator that are threads of one process on one GPU (Collie
// allows several ranks per GPU; NCCL does not) run their parts of a collective
// as kernels side by side, each waiting inside for the others. CUDA runs two
// kernels of one stream one after the other, and orders the legacy default
// stream after every blocking stream of the context and they after it. So two
// such ranks putting one collective on one stream (or one on the legacy default
// stream, the other on a blocking stream) deadlock until COLLIE_TIMEOUT, and the
// timeout's report does not say why. ColocatedStreams finds that at the second
// rank's enqueue and refuses the call with a sentence that does.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/status.h"

namespace collie {

class ColocatedStreams {
 public:
  /// `own` keys this rank in a process-wide table (its device window's address: unique in the process while the
  /// communicator lives); `peers` are the co-located peers' ranks and keys. `device`: for messages.
  ColocatedStreams(int rank, int device, const void* own, std::vector<std::pair<int, const void*>> peers);
  ~ColocatedStreams();
  ColocatedStreams(const ColocatedStreams&) = delete;
  ColocatedStreams& operator=(const ColocatedStreams&) = delete;

  /// Notes that this rank puts its part of collective #`seq` (counting collectives only: every rank makes them in
  /// the same order) on `stream` (a cudaStream_t) from this thread, and checks it against the parts of the same
  /// collective that co-located peers have enqueued already: collieInvalidUsage when two would serialize.
  Status note(uint64_t seq, void* stream);

  struct Note;  // what one rank last enqueued; shared with its peers (colocated_streams.cc)

 private:
  int rank_;
  int device_;
  const void* own_;
  std::shared_ptr<Note> note_;
  std::vector<std::pair<int, const void*>> peerKeys_;
  std::vector<std::shared_ptr<Note>> peers_;  // found in the table on first use (a peer may register later)
};

}  // namespace collie
