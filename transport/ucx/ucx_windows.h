// UCX windows: how a host rank reaches the windows of peers on other hosts.
//
// One UCP context and worker per communicator (nothing is created when all
// ranks share a host). At init every rank maps its own window with
// ucp_mem_map and the ranks exchange, over the bootstrap, their worker
// addresses and packed rkeys (variable lengths: lengths first, then padded
// blobs); each rank then opens an endpoint to every peer on another host with
// UCP_ERR_HANDLING_MODE_PEER, so a peer that dies turns into an error here,
// not a hang.
//
// Data path (see docs/design.md): a slice of up to ~8 KiB travels as one
// UCP active message carrying data, offset and the new `ready` value; the
// receiver's handler (run by its own progress calls) copies it into the slot
// and then advances the counter. A larger slice goes out with ucp_put_nbx from
// a local staging slot into the peer's slot; an ucp_ep_flush_nbx behind it
// tells when it has landed (a fence would not do: in UCX 1.13 it orders
// operations per transport lane only, and a large put may take other lanes),
// and only then does its `ready` value follow as a message. Messages need not
// arrive in order: the receiver moves a counter to v only once every value
// below v has landed. Nothing here knows the window layout: offsets come from
// the executor (executor/protocol.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "executor/remote_window.h"

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
