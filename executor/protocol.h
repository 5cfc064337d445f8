// The slot-and-flag protocol between two ranks, shared by the host executor
// (g++) and the CUDA kernels (nvcc): where slots and flags sit in a window and
// when a slot may be written or read. Only the innermost moves (copy a slice,
// load/store a flag with the right ordering) differ between the two.
//
// Each rank owns one window; its peers map it. A window holds C channels
// (independent pipelines: the CUDA executor runs one block per channel and
// gives each a part of every step; the host executor uses one). Layout of rank
// R's window for n peers (offsets from the window base, c = channel):
//
//   0                        WindowHeader (checked by every peer that maps it)
//   kLine * (1 + c*n + p)    ready[c][p]:  u64, written by peer p: slices p has posted into R's slots[c][p]
//   kLine * (1 + C*n + c*n + p)  credit[c][p]: u64, written by peer p: slices p has consumed of those R posted to p
//   creditOffset + 8         reading[c][p]: u64, written by peer p (a rank of R's process, reading in place): 1 +
//                            the number of the first slice p took in its current call while R's counter said that
//                            some of the call's slices lie in R's memory ("Giving up" below)
//   sourcesBase() + 8*(...)  source[c][p][k]: u64, written by peer p with each slice it posts into slot k: 0 when
//                            the slice is in the slot, else the address of the slice in p's own memory, which R
//                            reads in place (only between ranks of one process; executor/direct_sends.h)
//   signaturesBase() + 8*(...)  signature[c][p][k]: u64, written by peer p's host executor, or its kernels'
//                            Simple posts, with each slice it posts into slot k: the callSignature of the call the
//                            slice belongs to, which R compares with its own before it reads the slice (the
//                            kernels: the first slice of a launch from each peer); 0: a sender that does not sign
//   slotsBase()              slots[c][p][k]: nslots slots of slotBytes for the connection p -> R
//   llBase()                 the LL slots, as many (CUDA windows only)
//   directBase()             with directSlotLines > 0, the direct kernels' region (kernels/direct_kernels.h): R's
//                            barrier flags, written by its peers, then R's one-shot scratch, written by its peers
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

#include "executor/reduce_ops.h"     // COLLIE_HD
#include "kernels/direct_kernels.h"  // the direct region's sizes

namespace collie {

// "colliew" and the version of the window's format (10, ':': the direct kernels' region, WindowHeader::directSlotLines;
// 9: an LL post marks its ready counter, kFlagLL, and LL flags
// carry 16 bits of their call's signature; 8: LL flags carry 8 bits of it, llTag;
// 7: counters carry kFlagWithdrawn and kFlagInPlace, and reading[][] sits beside each credit; 6: slices carry their
// call's signature, signature[][][]; 5: slices may be read in place, source[][][]), which peers check at init.
constexpr uint64_t kWindowMagic = 0x636f6c6c6965773aull;
constexpr uint64_t kLine = 64;

struct WindowHeader {
  uint64_t magic;
  uint32_t nranks;
  uint32_t nslots;
  uint64_t slotBytes;
  uint32_t nchannels;
  uint32_t llSlotBytes;
  uint32_t llFlagPeriod;
  uint32_t directSlotLines;
};

/// LL flags repeat after this many slices of a connection (a power of two; COLLIE_TEST_LL_FLAG_PERIOD shrinks it in
/// tests). At most 2^15, so that a flag's slice part (1..period) stays below kLLTagShift's bits.
constexpr uint32_t kLLFlagPeriod = 1u << 15;
/// The smallest period allowed for a connection of `nslots` slots: no line is ever more than half a period plus
/// nslots slices old, which must stay below the period, so half of it must exceed nslots, here with room to spare:
/// a power of two of at least 4 x nslots, and never below 16.
inline uint32_t llFlagPeriodMin(uint32_t nslots) {
  uint32_t p = 16;
  while (p < 4 * nslots) p *= 2;
  return p;
}

struct WindowLayout {
  uint32_t nranks = 1;
  uint32_t nslots = 4;
  uint64_t slotBytes = 1 << 18;
  uint32_t nchannels = 1;
  uint32_t llSlotBytes = 0;  // > 0: LL slots follow the Simple ones (CUDA windows only)
  uint32_t llFlagPeriod = kLLFlagPeriod;
  // > 0: the window ends with the direct kernels' region, one-shot slots of this many lines (CUDA windows of ranks
  // that all map each other's: one host, P2P, 2..kDirectMaxRanks ranks)
  uint32_t directSlotLines = 0;

  COLLIE_HD uint64_t connection(int channel, int peer) const {
    return static_cast<uint64_t>(channel) * nranks + static_cast<uint64_t>(peer);
  }
  COLLIE_HD uint64_t readyOffset(int channel, int peer) const { return kLine * (1 + connection(channel, peer)); }
  COLLIE_HD uint64_t creditOffset(int channel, int peer) const {
    return kLine * (1 + static_cast<uint64_t>(nchannels) * nranks + connection(channel, peer));
  }
  /// reading[c][p], beside credit[c][p] on its line (see the layout above).
  COLLIE_HD uint64_t readingOffset(int channel, int peer) const { return creditOffset(channel, peer) + 8; }
  COLLIE_HD uint64_t sourcesBase() const { return kLine * (1 + 2 * static_cast<uint64_t>(nchannels) * nranks); }
  /// Where the sender of slice number `seq` of connection peer -> owner on `channel` says where it lies.
  COLLIE_HD uint64_t sourceOffset(int channel, int peer, uint64_t seq) const {
    return sourcesBase() + (connection(channel, peer) * nslots + seq % nslots) * 8;
  }
  COLLIE_HD uint64_t signaturesBase() const {
    return sourcesBase() + static_cast<uint64_t>(nchannels) * nranks * nslots * 8;
  }
  /// Where the sender of slice number `seq` of connection peer -> owner on `channel` signs it.
  COLLIE_HD uint64_t signatureOffset(int channel, int peer, uint64_t seq) const {
    return signaturesBase() + (connection(channel, peer) * nslots + seq % nslots) * 8;
  }
  COLLIE_HD uint64_t slotsBase() const {
    const uint64_t end = signaturesBase() + static_cast<uint64_t>(nchannels) * nranks * nslots * 8;
    return (end + 4095) & ~uint64_t{4095};
  }
  /// The slot of connection peer -> owner on `channel` that carries slice number `seq`.
  COLLIE_HD uint64_t slotOffset(int channel, int peer, uint64_t seq) const {
    return slotsBase() + (connection(channel, peer) * nslots + seq % nslots) * slotBytes;
  }
  COLLIE_HD uint64_t llBase() const {
    return slotsBase() + static_cast<uint64_t>(nchannels) * nranks * nslots * slotBytes;
  }
  /// The LL slot of connection peer -> owner on `channel` for slice number `seq`.
  COLLIE_HD uint64_t llSlotOffset(int channel, int peer, uint64_t seq) const {
    return llBase() + (connection(channel, peer) * nslots + seq % nslots) * llSlotBytes;
  }
  COLLIE_HD uint64_t llEnd() const {
    return llBase() + static_cast<uint64_t>(nchannels) * nranks * nslots * llSlotBytes;
  }
  COLLIE_HD uint64_t directBase() const { return (llEnd() + 4095) & ~uint64_t{4095}; }
  /// The owner's barrier flags, [block][sender] (kDirectBarrierBytes).
  COLLIE_HD uint64_t directBarriersOffset() const { return directBase(); }
  /// The owner's one-shot scratch, [parity][sender][directSlotLines lines].
  COLLIE_HD uint64_t directScratchOffset() const { return directBase() + kDirectBarrierBytes; }
  COLLIE_HD uint64_t totalBytes() const {
    return directSlotLines == 0 ? llEnd() : directScratchOffset() + directScratchBytes(nranks, directSlotLines);
  }
};

/// After the header, in the window's first line: 1 + the call number (seq) of the newest launch whose
/// kernel has begun on the owner (0: none yet), written by the kernel's blocks as they start. A rank
/// that gives up waiting on a peer reads it, so the error can say whether the peer's kernel had even
/// started: a peer whose host thread is blocked, or whose kernel cannot start on a shared GPU, looks
/// like a peer that waits in turn otherwise (docs/cuda-executor.md, "Ranks sharing hardware queues").
constexpr uint64_t kStartedOffset = 40;
static_assert(sizeof(WindowHeader) <= kStartedOffset && kStartedOffset + 8 <= kLine, "the started mark fits line 0");

/// Also in line 0: nonzero once the owner's host executor or kernel refused a call, finding that a peer's slice
/// belonged to another call than its own (signature[][][]). It runs nothing more, and its peers, waiting on it, fail at
/// once too instead of after COLLIE_TIMEOUT.
constexpr uint64_t kRefusedOffset = 48;
static_assert(kRefusedOffset >= kStartedOffset + 8 && kRefusedOffset + 8 <= kLine, "the refusal fits line 0");

/// Also in line 0: nonzero once the owner's kernels or host executor failed a call otherwise (a timeout, an abort, a
/// peer that exited or failed first). Its communicator runs nothing more either, so its peers, waiting on it, fail at
/// once too, instead of after COLLIE_TIMEOUT: a rank waiting on one that waits on a dead process learns it in
/// milliseconds, not only the ranks that wait on the dead one.
constexpr uint64_t kFailedOffset = 56;
static_assert(kFailedOffset >= kRefusedOffset + 8 && kFailedOffset + 8 <= kLine, "the failure mark fits line 0");

/// A call's signature, which every slice of it carries: for a collective, the low 24 bits of its number among
/// the communicator's collectives over the low 40 bits of a hash of what the ranks must agree on (never 0 or
/// kPointToPoint); kPointToPoint for sends and receives, which peers do not compare (they differ by design).
constexpr int kCallHashBits = 40;
constexpr uint64_t kPointToPoint = 1;
inline uint64_t callSignature(uint64_t collectiveSeq, uint64_t hash) {
  const uint64_t s = ((collectiveSeq & 0xffffffu) << kCallHashBits) | (hash & ((uint64_t{1} << kCallHashBits) - 1));
  return s < 2 ? s + 2 : s;
}
/// The collective number (low 24 bits) a signature carries.
inline uint64_t callNumber(uint64_t signature) { return signature >> kCallHashBits; }
/// What a kernel launch of the call signs with: the signature without the collective's number (0), or
/// kPointToPoint. A launch captured into a CUDA graph replays with the number of its capture, so ranks that
/// replay a graph where a peer makes the same call anew would otherwise differ in the number alone. The price:
/// a skipped call of the same shape as the next is not found by the kernels.
inline uint64_t launchSignature(uint64_t signature) {
  return signature == 0 || signature == kPointToPoint ? kPointToPoint : callSignature(0, signature);
}

/// The header a rank writes at the start of its window (and gathers for peers it cannot map).
inline WindowHeader windowHeader(const WindowLayout& l) {
  return WindowHeader{kWindowMagic, l.nranks,      l.nslots,       l.slotBytes,
                      l.nchannels,  l.llSlotBytes, l.llFlagPeriod, l.directSlotLines};
}
/// Whether a peer's window header is of this format and describes the layout `l` (checked by every rank at init).
inline bool sameLayout(const WindowHeader& h, const WindowLayout& l) {
  return h.magic == kWindowMagic && h.nranks == l.nranks && h.nslots == l.nslots && h.slotBytes == l.slotBytes &&
         h.nchannels == l.nchannels && h.llSlotBytes == l.llSlotBytes && h.llFlagPeriod == l.llFlagPeriod &&
         h.directSlotLines == l.directSlotLines;
}
/// The layout a window's header describes (for tools and tests that read a peer's window).
inline WindowLayout layoutOf(const WindowHeader& h) {
  WindowLayout l;
  l.nranks = h.nranks;
  l.nslots = h.nslots;
  l.slotBytes = h.slotBytes;
  l.nchannels = h.nchannels;
  l.llSlotBytes = h.llSlotBytes;
  l.llFlagPeriod = h.llFlagPeriod;
  l.directSlotLines = h.directSlotLines;
  return l;
}

// The LL (low-latency) protocol, for small slices: a slot is a run of 8-byte
// lines, each {4 data bytes, 4 flag bytes} written by one 64-bit store, so a
// line is valid exactly when its flag is that of the expected slice and no
// fence is needed between data and flag. Every line carries data: the
// receiver knows a slice's size from its own program, as the sender does. LL
// slots are memory of their own: a Simple slot's data could contain a word
// equal to some future flag. Slices of both protocols share the ready/credit
// counters, so consecutive launches may use either.
constexpr uint64_t kLLLine = 8;
/// A flag's top 16 bits, from kLLTagShift, carry llTag of the sender's call; the bits below, its slice part.
constexpr int kLLTagShift = 16;
constexpr uint32_t kLLSliceMask = (1u << kLLTagShift) - 1;
static_assert(kLLFlagPeriod <= kLLSliceMask, "a flag's slice part stays below its tag");
/// The flag of slice number `seq` of a launch tagged `tag`: its slice part is 1..period, never 0 (the value of
/// fresh memory).
///
/// Flags repeat every `period` slices of a connection, so a line left from a slice exactly that many slices
/// earlier would pass for new. Lines past the end of a short slice keep the flag of the last slice long enough to
/// reach them, and Simple slices advance the count without touching LL slots, so the sender rewrites stale lines
/// (kernels/device_prims_ll.cuh, "Stale lines"): no line is ever llStaleAfter(period) + nslots + 1 slices older
/// than the next slice, well short of `period`. So a line whose slice part is that of the slice a receiver
/// expects is always that slice's: with another tag, the sender's call is not the receiver's (llOtherCall), and
/// the receiver refuses it. One difference in 65536 goes unseen there.
COLLIE_HD uint32_t llFlag(uint64_t seq, uint32_t period, uint32_t tag) {
  return (static_cast<uint32_t>(seq & (period - 1)) + 1) | (tag << kLLTagShift);
}
/// 16 bits of a launch's signature (KernelArgs::callSignature): the XOR of its four 16-bit parts.
COLLIE_HD uint32_t llTag(uint64_t signature) {
  signature ^= signature >> 32;
  signature ^= signature >> 16;
  return static_cast<uint32_t>(signature & 0xffff);
}
/// Whether a line's flag `seen` is that of the slice expected (`expected`, an llFlag) sent by another call.
COLLIE_HD bool llOtherCall(uint32_t seen, uint32_t expected) {
  return seen != expected && (seen & kLLSliceMask) == (expected & kLLSliceMask);
}
/// Slices after which the sender rewrites a connection's LL slots.
COLLIE_HD uint64_t llStaleAfter(uint32_t period) { return period / 2; }
/// Data bytes one LL slot carries (half of it), a multiple of 16.
COLLIE_HD uint64_t llPayloadBytes(uint64_t llSlotBytes) { return (llSlotBytes / kLLLine * 4) & ~uint64_t{15}; }

/// The part of a step's `count` elements that channel `c` of `nchannels` moves:
/// equal parts rounded up to `align` elements (16-byte vectors on the GPU), so
/// sender and receiver, which split the same count, agree on every boundary.
/// A part is never larger than ceil(count / nchannels) rounded up to `align`.
struct ChannelPart {
  uint64_t offset;
  uint64_t count;
};
COLLIE_HD ChannelPart channelPart(uint64_t count, int c, int nchannels, uint64_t align) {
  uint64_t per = (count + static_cast<uint64_t>(nchannels) - 1) / static_cast<uint64_t>(nchannels);
  per = (per + align - 1) / align * align;
  const uint64_t lo = per * static_cast<uint64_t>(c) < count ? per * static_cast<uint64_t>(c) : count;
  const uint64_t hi = lo + per < count ? lo + per : count;
  return ChannelPart{lo, hi - lo};
}

// Giving up without leaving a reader in freed memory (between ranks of one process that read each other's sends in
// place). A call that gives up returns its buffers to their owner, who may free them at once; a peer still
// reading one would read freed memory. So the two top bits of a ready and a credit counter carry:
//   ready, kFlagWithdrawn: the sender gave up; the reader must take nothing more from it, in place or not.
//   ready, kFlagInPlace:   some slice of the sender's current call (a kernel: launch) on this connection lies in
//                          its own memory.
//   credit, kFlagWithdrawn: the reader gave up and reads nothing more of what was posted to it.
// The first time in a call that a reader takes a slice whose ready counter shows kFlagInPlace, it writes
// reading[][] and fences, then loads the counter again; a sender that gives up writes kFlagWithdrawn and fences,
// then loads reading[][]. Either the reader sees the withdrawal before it reads anything in place, or the sender
// sees that it may be reading and waits (up to COLLIE_TIMEOUT) for its credit, or its kFlagWithdrawn credit. Set
// by the executors that read in place (the kernels' DevicePrims, the host executor's HostPrims), only on
// connections that may, and only while sends may be read in place; a proxy or a peer process never sees them.
constexpr uint64_t kFlagWithdrawn = uint64_t{1} << 63;
constexpr uint64_t kFlagInPlace = uint64_t{1} << 62;
// The protocol of a connection's latest post (kernels only). An LL post stores its ready counter with kFlagLL;
// a Simple post, without. A launch ends only once every slice it posted is credited (its drain), so a sender's
// slices of one protocol have all been taken before it posts one of the other. A receiver waiting for slice k
// whose peer's counter has passed k with the other protocol's mark therefore knows that slice k itself was
// posted with the other protocol: the two ranks' calls differ (by size across the LL line, COLLIE_PROTO=auto),
// which the slice's signature (Simple) or its lines' tag (LL) cannot show, since neither protocol writes the
// other's. postedWithOtherProtocol.
constexpr uint64_t kFlagLL = uint64_t{1} << 61;
constexpr uint64_t kFlagCount = kFlagLL - 1;

/// A sender may fill its next slot.
COLLIE_HD bool slotFree(uint64_t posted, uint64_t credit, uint32_t nslots) { return posted - credit < nslots; }
/// A receiver's next slice has arrived.
COLLIE_HD bool sliceReady(uint64_t consumed, uint64_t ready) { return ready > consumed; }
/// A receiver of protocol LL (`ll`) or Simple, waiting for slice number `consumed`, whose peer's ready counter reads
/// `ready`: whether the peer posted that slice with the other protocol (kFlagLL), so that it never comes.
COLLIE_HD bool postedWithOtherProtocol(uint64_t consumed, uint64_t ready, bool ll) {
  return sliceReady(consumed, ready & kFlagCount) && ((ready & kFlagLL) != 0) != ll;
}

}  // namespace collie
