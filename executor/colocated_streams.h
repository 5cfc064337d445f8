// Ranks of one communicator that are threads of one process on one GPU (Collie
// allows several ranks per GPU; NCCL does not) run their parts of a collective
// as kernels side by side, each waiting inside for the others. CUDA runs two
// kernels of one stream one after the other, and orders the legacy default
// stream after every blocking stream of the context and they after it. So two
// such ranks putting one collective on one stream (or one on the legacy default
// stream, the other on a blocking stream) deadlock until COLLIE_TIMEOUT, and the
// timeout's report does not say why. ColocatedStreams finds that at the second
// rank's enqueue and refuses the call with a sentence that does.
//
// Distinct streams can still share one of the GPU's hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS): there a kernel that waits for the previous
// kernel of its stream holds back everything queued behind it, from any
// stream. A rank that queued its next work before a peer had queued its part
// of the current work would hold that peer's kernel back behind its own, which
// waits for its current kernel, which waits for the peer's: a deadlock until
// COLLIE_TIMEOUT. So a rank queues a collective or a group of sends and
// receives only once every co-located peer has queued what this rank's queued
// work cannot finish without: its part of the same collectives, and the
// receives and sends matching this rank's sends to it and receives from it
// (waitForPeers; docs/cuda-executor.md, "Ranks sharing hardware queues"). The
// wait is on the host and short: a rank that far ahead could not finish its
// work before the peer's anyway.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"

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

  /// Waits until every co-located peer has queued its part of the collectives this rank has queued and the
  /// receives and sends matching its sends and receives (queuedCollective, queuedP2p), or has gone. `stop` is asked
  /// between polls; a status it returns other than OK ends the wait with that status (an abort, a kernel of this rank
  /// that failed). After `timeoutSec`: collieTimeout naming the late peer and what it owes. *waited: whether any peer
  /// was behind.
  Status waitForPeers(double timeoutSec, const std::function<Status()>& stop, bool* waited);
  /// This rank will put nothing more of collective #`seq` into a queue (launched, refused, or failed).
  void queuedCollective(uint64_t seq);
  /// The same for `sends` sends to and `recvs` receives from rank `peer` (ignored unless co-located).
  void queuedP2p(int peer, uint64_t sends, uint64_t recvs);

  struct Note;  // what one rank last enqueued; shared with its peers (colocated_streams.cc)

 private:
  int rank_;
  int device_;
  const void* own_;
  std::shared_ptr<Note> note_;
  std::vector<std::pair<int, const void*>> peerKeys_;
  std::vector<std::shared_ptr<Note>> peers_;  // found in the table on first use (a peer may register later)
  size_t slots_ = 0;                          // Note::sends and recvs: ranks 0 .. the highest co-located one

  // peers_[i], looked up in the table if not found before; null while the peer has not registered.
  Note* peer(size_t i);
};

}  // namespace collie
