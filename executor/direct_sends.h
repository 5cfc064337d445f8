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
// call returns). Input and output may be one buffer (in place), so ranges are
// compared as addresses. Scratch is never read in place: rounds reuse it.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/program.h"

namespace collie {

/// The bytes a send of step `s` hands over, and where: its source, or for
/// the forwarding steps the destination it just wrote (the same values: a
/// kRecvCopySend that divides forwards what it received, not what it wrote,
/// so it is never read in place then). Null when the step cannot be read in
/// place at all.
struct SentBytes {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
};

/// marks[i] = 1 when step i's send may be read in place: its peer is in
/// `inProcess` (a rank whose loads reach our memory), it sends at least
/// `minBytes`, and no step after it (nor the step itself, but for the bytes
/// it sends) writes a byte of what it sends. `bufs` are the input, output
/// and scratch buffers as the executor passes them (Buffer order).
void markDirectSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                     const std::vector<bool>& inProcess, uint64_t minBytes, std::vector<uint8_t>* marks);

}  // namespace collie
