// Which sends of a rank's Program a receiver may read in place, from the
// sender's own buffer, instead of the sender copying each slice into the
// receiver's slot first (the "read in place" path of the slot protocol,
// executor/protocol.h). It saves a pass over memory per byte sent: the
// sender's read and the slot's write become nothing, the receiver reads the
// sender's buffer where it would have read its slot.
//
// A slice read in place must not change until the receiver has credited it.
// Instead of making later writes wait for credits (new waits the verifier's
// deadlock proof knows nothing of), only sends whose bytes no later step of
// the program writes are marked, and the executor waits for every credit of
// the channel before it moves on (the user may write the buffers once the
// call returns; a kernel ends with that wait, its drain). Input and output
// may be one buffer (in place), so ranges are compared as addresses. Scratch
// is never read in place: rounds reuse it.
//
// Who reads in place: ranks that are threads of one process, on the host
// (core/comm.cc) and on one GPU (executor/cuda_executor.cc), never through a proxy.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/program.h"
#include "core/status.h"

namespace collie {

/// marks[i] = 1 when step i's send may be read in place: its peer is in
/// `inProcess` (a rank whose loads reach our memory), it sends at least
/// `minBytes`, and no step after it (nor the step itself, but for the bytes
/// it sends) writes a byte of what it sends. What it sends is its source, or
/// for the forwarding kinds the destination it has just written: the same
/// values, except for a kRecvCopySend that divides (it forwards what it
/// received, not the mean it wrote), which is never marked. `bufs` are the
/// input, output and scratch buffers as the executor passes them (Buffer order).
/// Returns whether any step is marked.
bool markDirectSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                     const std::vector<bool>& inProcess, uint64_t minBytes, std::vector<uint8_t>* marks);

/// COLLIE_DIRECT_READ_BYTES: the smallest send read in place (default 131072; 0: every send; negative: none).
/// An unparsable value is an error naming the variable.
Status readDirectReadBytes(int64_t* out);

}  // namespace collie
