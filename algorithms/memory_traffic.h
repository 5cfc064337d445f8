// Memory traffic: the bytes one rank reads and writes in memory when an
// executor runs its Program with the Simple protocol: the byte count a "share
// of the copy bandwidth" figure needs per algorithm. A
// device-to-device copy reads and writes each byte once, so a rank that moves
// its traffic in the time a copy of the same bytes takes is as fast as its
// memory allows for that algorithm. busbw (nccl-tests' count) says how fast the
// collective is; traffic over time says how well the kernels use memory, and
// traffic over busbw bytes how many passes the algorithm costs.
//
// Per step, in elements of count c (received rc), as the step runner moves
// them: a send reads its source and writes the peer's slot (2c); a receive
// reads its own slot and writes its destination (2c); a receive that reduces
// also reads its source (3c), one that forwards also writes the next slot
// (recvCopySend: one read, two writes, 3c); a local copy is 2c, or nothing
// when in place it lands where it reads (the executors skip it); a local
// reduce is 3c; an exchange counts its send and its receive; a put into a
// peer's buffer 2c; a reduce of k ranks' buffers (k+1)c. A group of
// joined steps (program.h) runs as one: its head's source (a copy's, or dst)
// is read and dst written once for the group (2rc), and each step's receive
// is read once (rc), plus its send. Flags, credits,
// counters and LL lines' flag halves are not counted: the LL protocol moves
// twice the bytes of a slice through its slots, and only small calls use it.
//
// A send that the receiver reads in place, from our buffer (executor/
// direct_sends.h), costs the sender nothing: no slot is written, the source is
// not read for it; the receiver's read of our buffer is its receive, counted as
// before. A forward so sent writes only its destination.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/program.h"

namespace collie {

/// Elements `p`'s rank reads and writes in memory (see above). `inPlace`: the
/// output buffer begins `outputShift` elements after the input buffer
/// (negative: before), as the in-place form of the collective lays them out, so
/// that copies between equal addresses count nothing. `direct` (markDirectSends' marks, may be null): the
/// steps whose sends the receivers read in place.
uint64_t memoryTrafficElems(const Program& p, bool inPlace = false, int64_t outputShift = 0,
                            const std::vector<uint8_t>* direct = nullptr);

}  // namespace collie
