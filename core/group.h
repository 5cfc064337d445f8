// Groups: calls made between collieGroupStart and collieGroupEnd on one thread
// are queued and run at the outermost collieGroupEnd. Send and receive always
// go through here (outside a group each is a group of one).
//
// At GroupEnd each communicator's queue runs in the order it was issued, with
// consecutive sends and receives batched into one pairwise schedule
// (core/p2p.cc). Queues of different communicators run on threads of their
// own (kept from group to group: core/group_workers.h), so one thread may
// drive every rank of a clique inside one group, as collieCommInitAll users
// and NCCL's grouped calls expect; nothing blocks before GroupEnd.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "collie.h"

namespace collie {
namespace group {

/// One point-to-point operation, in bytes (send and receive need not agree on type).
struct P2pOp {
  bool send = true;
  void* buffer = nullptr;  // const for sends
  uint64_t bytes = 0;
  int peer = 0;
  collieStream_t stream = nullptr;  // CUDA backend: the stream the call named
};

/// True between collieGroupStart and its matching collieGroupEnd on this thread.
bool active();

/// Queues a collective of `comm` (already checked) to run at GroupEnd.
void enqueue(collieComm_t comm, std::function<Status()> run);

/// Queues a send or receive of `comm` (already checked).
void enqueueP2p(collieComm_t comm, const P2pOp& op);

/// Queues a communicator init (collieCommInitRank inside a group, as NCCL
/// allows): inits run first at GroupEnd, all at once, since each blocks until
/// its peers, which may be inits of the same group, have joined.
void enqueueInit(std::function<Status()> init);

Status start();
Status end();
/// Closes a group like end() without running its collectives and sends/receives (ncclGroupSimulateEnd: Collie
/// does not simulate, but the caller's group must not stay open). Queued inits still run, since their peers wait
/// for them. *dropped: the operations discarded (0 when an inner group closes).
Status endWithoutRunning(size_t* dropped);

/// Runs a batch of sends and receives of one communicator (core/p2p.cc).
Status runP2p(collieComm_t comm, const std::vector<P2pOp>& ops);

}  // namespace group
}  // namespace collie
