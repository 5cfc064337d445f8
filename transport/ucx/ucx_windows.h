// UCX windows: how a host rank reaches the windows of peers on other hosts.
//
// One UCP context and worker per communicator (nothing is created when all
// ranks share a host). At init the ranks exchange their worker addresses over
// the bootstrap (lengths first, then padded blobs); each rank then opens an
// endpoint to every peer on another host with UCP_ERR_HANDLING_MODE_PEER, so
// a peer that dies turns into an error here, not a hang.
//
// Data path (see docs/design.md): every transfer is one UCP active message
// whose header carries the slot's offset, the counter's offset and its new
// value. The receiver's handler (run by its own progress calls) writes the
// data into the slot and then advances the counter. Up to ~8 KiB the data
// rides in the message (eager); a larger slice goes by rendezvous, UCX moving
// it straight into the slot (zero-copy where it can) before the counter
// moves. No RMA: in UCX 1.13 RMA over shared memory and tcp is emulated with
// messages anyway, costs a flush round trip before each flag, and a target
// answering a put from a peer that died aborts the process. Messages need not
// arrive in order: the receiver moves a counter to v only once every value
// below v has landed (flag_order.h). Nothing here knows the window layout:
// offsets come from the executor (executor/protocol.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "transport/remote_window.h"

namespace collie {

class Bootstrap;

/// Whether this build has the UCX transport (CMake option COLLIE_WITH_UCX).
bool ucxBuilt();

/// Collective over `bootstrap` (every rank calls it). remote[r]: rank r is on
/// another host and gets an endpoint. `window` (windowBytes) is our window,
/// which those peers will write into. Fails on every rank, naming the rank,
/// when any rank cannot set up UCX or reach a peer's worker. Without UCX in
/// the build: collieInvalidUsage saying so.
Status createUcxWindows(Bootstrap* bootstrap, const std::vector<bool>& remote, uint8_t* window, size_t windowBytes,
                        std::unique_ptr<RemoteWindows>* out);

}  // namespace collie
