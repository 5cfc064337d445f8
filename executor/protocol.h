// The slot-and-flag protocol between two ranks, shared by the host executor
// (g++) and the CUDA kernels (nvcc): where slots and flags sit in a window and
// when a slot may be written or read. Only the innermost moves (copy a slice,
// load/store a flag with the right ordering) differ between the two.
//
// Each rank owns one window; its peers map it. Layout of rank R's window for
// nranks peers (offsets from the window base):
//
//   0                    WindowHeader (checked by every peer that maps it)
//   kLine * (1 + p)      ready[p]:  u64, written by peer p: slices p has posted into R's slots[p]
//   kLine * (1+n + p)    credit[p]: u64, written by peer p: slices p has consumed of those R posted to p
//   slotsBase()          slots[p][k]: nslots slots of slotBytes for the connection p -> R
//
// Each flag sits on its own cache line, and every rank polls only flags in its
// own window (a sender waits on credit[q] in its window; a receiver on
// ready[p] in its window), so waiting never hammers a remote line.
//
// Counters only grow over the communicator's life: a sender may write slice
// number `posted` into slot posted % nslots of the receiver when
// posted - credit < nslots; a receiver may read slice number `consumed` when
// ready > consumed. Nothing is reset between collectives, so back-to-back
// calls need no barrier.
#pragma once

#include <cstdint>

#include "executor/reduce_ops.h"  // COLLIE_HD

namespace collie {

constexpr uint64_t kWindowMagic = 0x636f6c6c69657731ull;  // "colliew1"
constexpr uint64_t kLine = 64;

struct WindowHeader {
  uint64_t magic;
  uint32_t nranks;
  uint32_t nslots;
  uint64_t slotBytes;
};

struct WindowLayout {
  uint32_t nranks = 1;
  uint32_t nslots = 4;
  uint64_t slotBytes = 1 << 18;

  COLLIE_HD uint64_t readyOffset(int peer) const { return kLine * (1 + static_cast<uint64_t>(peer)); }
  COLLIE_HD uint64_t creditOffset(int peer) const { return kLine * (1 + nranks + static_cast<uint64_t>(peer)); }
  COLLIE_HD uint64_t slotsBase() const {
    const uint64_t end = kLine * (1 + 2 * static_cast<uint64_t>(nranks));
    return (end + 4095) & ~uint64_t{4095};
  }
  /// The slot of connection peer -> owner that carries slice number `seq`.
  COLLIE_HD uint64_t slotOffset(int peer, uint64_t seq) const {
    return slotsBase() + (static_cast<uint64_t>(peer) * nslots + seq % nslots) * slotBytes;
  }
  COLLIE_HD uint64_t totalBytes() const { return slotsBase() + static_cast<uint64_t>(nranks) * nslots * slotBytes; }
};

/// A sender may fill its next slot.
COLLIE_HD bool slotFree(uint64_t posted, uint64_t credit, uint32_t nslots) { return posted - credit < nslots; }
/// A receiver's next slice has arrived.
COLLIE_HD bool sliceReady(uint64_t consumed, uint64_t ready) { return ready > consumed; }

}  // namespace collie
