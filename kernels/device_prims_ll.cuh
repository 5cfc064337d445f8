// The GPU's LL (low-latency) primitives for the shared step runner: the same
// contract as DevicePrims (device_prims.cuh), but a slice travels as 8-byte
// {data, flag} lines (executor/protocol.h), so the sender needs no fence and
// the receiver no separate flag round trip: each thread waits for its own
// lines. A slice is staged in shared memory on both sides, which is what lets
// outSlot/inSlot stay plain arrays for the step runner. Slot reuse still goes
// through the credit counters, returned by plain stores: no system-scope fence
// anywhere on the LL path. Never used when peers on other hosts go through the
// proxy (executor/remote_proxy.h): an LL slice has no byte count the proxy
// could read, so the CUDA executor turns LL off.
//
// Stale lines. A line's flag is its slice number modulo the flag period
// (executor/protocol.h), so a line left from a slice exactly one period
// earlier would pass for new: lines past the end of a short slice keep the
// flag of the last slice that reached them, and Simple slices advance the
// count without touching LL slots. A receiver may wait for a slice as soon as
// it has taken the one before, before its sender has done anything about it,
// so the sender keeps every line of its LL slots to a peer less than a period
// older than the next slice at all times: clean[q] is a slice count such that
// every line was last written by slice clean[q] - 1 or later, and no slice is
// posted more than llStaleAfter(period) (half a period) plus nslots past it.
//  * An LL slice posted half a period or more past clean[q] also writes the
//    rest of its slot (with its own flag, which no later slice's receiver
//    takes). Slices are numbered without gaps, so after nslots of them in a
//    row every slot has been rewritten, and clean[q] advances by half a period.
//  * A Simple slice posted half a period or more past clean[q] rewrites every
//    LL slot to q with the flag of the slice before it (DevicePrims::post).
//    They are all free: a launch runs one protocol, and the last LL launch
//    drained. clean[q] becomes that slice's number.
// clean[] lives with the other counters between launches.
#pragma once

#include <cstdint>

#include "executor/step_runner.h"  // Outgoing
#include "kernels/device_prims.cuh"

namespace collie {

template <typename T, ReduceOp Op>
class DevicePrimsLL : public TimedMoves<T, Op> {
 public:
  // Slices always go through the receiver's slot: no peer reads ours in place (executor/direct_sends.h).
  static constexpr bool kReadsInPlace = false;
  // One incoming slice at a time (staged in shared memory): joined steps (program.h) run one after another.
  static constexpr bool kJoinsReceives = false;
  // A batch's slices go out in one pass of the block (sendTogether).
  static constexpr bool kSendsTogether = true;

  /// `counters` holds four arrays of nranks (posted, consumed, credited, clean); `stage` is 2 x llPayloadBytes of
  /// shared memory: outgoing, then incoming slice.
  __device__ DevicePrimsLL(const KernelArgs& a, int channel, uint64_t* counters, int* shared, uint32_t* stage)
      : TimedMoves<T, Op>(a),
        a_(a),
        channel_(channel),
        mine_(a.windows[a.rank]),
        posted_(counters),
        consumed_(counters + a.layout.nranks),
        credited_(counters + 2 * a.layout.nranks),
        clean_(counters + 3 * a.layout.nranks),
        shared_(shared),
        out_(stage),
        in_(stage + llPayloadBytes(a.layout.llSlotBytes) / 4),
        tag_(llTag(a.callSignature)),
        clock_(a) {}

  /// Elements one LL slice carries.
  __device__ uint64_t perSlice() const { return llPayloadBytes(a_.layout.llSlotBytes) / sizeof(T); }

  // A slice whose lines stopped coming (unpack() gave up) is reported by the
  // next wait: arrived() and room() say no until then.
  __device__ bool arrived(int p, uint64_t n) {
    PhaseSpan span = this->taking();
    if (pending_ != 0) return false;
    // One poll of the slice's first line; unpack() then waits for the others, which land in no set order.
    if (!dev::syncOr(dev::tid() == 0 && firstLineIn(p))) return false;
    pending_ = unpack(p, n);
    return pending_ == 0;
  }
  __device__ bool room(int q) {
    PhaseSpan span = this->posting();
    return pending_ == 0 && dev::syncOr(dev::tid() == 0 && pollRoom(q));
  }
  // Every thread waits for its own lines at once: no flag round trip before the data.
  __device__ int waitArrived(int p, uint64_t n) {
    PhaseSpan span = this->taking();
    return pending_ != 0 ? pending_ : unpack(p, n);
  }
  __device__ int waitRoom(int q) { return wait(true, q, false, 0); }
  __device__ int waitEither(bool sending, int q, bool receiving, int p) {
    // The caller polls arrived()/room() again after this returns, which unpacks.
    return wait(sending, q, receiving, p);
  }

  __device__ const T* inSlot(int) const { return reinterpret_cast<const T*>(in_); }
  __device__ T* outSlot(int) const { return reinterpret_cast<T*>(out_); }

  // unpack() handed the slot back as soon as the slice was staged; what is
  // left is the staged copy: every thread is done reading it before the next
  // unpack() overwrites it (and sees the counter thread 0 advanced).
  __device__ void release(int) {
    PhaseSpan span = this->taking();
    dev::sync();
  }

  // Writes the staged slice as lines into the peer's LL slot. Each line is
  // self-validating, so no fence. The ready counter still advances, so that a
  // later Simple launch finds the counters where it expects them, marked LL so
  // that a Simple receiver of another call knows it (protocol.h, kFlagLL); an LL
  // receiver reads it only to learn the same of a Simple sender, so it needs no
  // release either. Half a period after the
  // slots were last rewritten, each slice also writes the rest of its slot
  // ("Stale lines" above).
  __device__ void post(int q, uint64_t n) {
    PhaseSpan span = this->posting();
    // Read by every thread before the barrier after which thread 0 advances them.
    const uint64_t seq = posted_[q];
    const uint64_t since = seq - clean_[q];
    dev::sync();  // the staged slice is complete (another thread may have written each word)
    const uint32_t period = a_.layout.llFlagPeriod;
    const uint64_t words = (n * sizeof(T) + 3) / 4;
    const uint64_t lines = since >= llStaleAfter(period) ? a_.layout.llSlotBytes / kLLLine : words;
    const uint64_t flag = static_cast<uint64_t>(llFlag(seq, period, tag_)) << 32;
    uint8_t* slot = a_.windows[q] + a_.layout.llSlotOffset(channel_, a_.rank, seq);
    for (uint64_t w = dev::tid(); w < lines; w += dev::nthreads())
      dev::storeVolatile64(slot + kLLLine * w, w < words ? flag | out_[w] : flag);
    if (dev::tid() == 0) {
      posted_[q] = seq + 1;
      // Whole slots began exactly at the half-period mark (clean_ never lets a slice be posted further past it
      // unnoticed), and this is the last of nslots of them in a row: every slot now holds newer lines only.
      if (since == llStaleAfter(period) + a_.layout.nslots - 1) clean_[q] += llStaleAfter(period);
      dev::storeVolatile64(a_.windows[q] + a_.layout.readyOffset(channel_, a_.rank), (seq + 1) | kFlagLL);
    }
    dev::sync();  // every thread has read its words before the next slice is staged
  }
  /// A batch's k slices, to k distinct peers (executor/step_runner.h, sendBatchTogether), in one pass of the
  /// block: the threads share out every line of all of them and write each straight from the source, with its
  /// slice's flag. Posting them one by one stages each in shared memory first and takes three barriers each, and
  /// the few threads a small slice needs load its source only after the last slice's barriers: for one-shot at
  /// 8 ranks, 21 barriers and 7 source loads in a row where this takes 3 barriers and one round of loads. False,
  /// nothing posted, where they must go one by one: a peer twice or beyond 64, one with no room yet, or one whose
  /// slots are due to be rewritten whole ("Stale lines"), which post() does; and with COLLIE_DEV_LL_SEPARATE_POSTS=1.
  __device__ bool sendTogether(const Outgoing<T>* out, int k) {
    PhaseSpan span = this->posting();
    if (pending_ != 0 || a_.separatePosts) return false;
    const uint32_t period = a_.layout.llFlagPeriod;
    bool alone = false;
    if (dev::tid() == 0) {
      uint64_t seen = 0;
      for (int j = 0; j < k && !alone; ++j) {
        const int q = out[j].peer;
        alone = q >= 64 || ((seen >> q) & 1) != 0 || posted_[q] - clean_[q] >= llStaleAfter(period) || !pollRoom(q);
        if (q < 64) seen |= uint64_t{1} << q;
      }
    }
    if (dev::syncOr(alone)) return false;
    // Line g of the batch: line w of slice j, the slices' lines one after another. Every thread reads the
    // connections' counters here, before the barrier after which thread 0 advances them.
    uint64_t total = 0;
    for (int j = 0; j < k; ++j) total += (out[j].n * sizeof(T) + 3) / 4;
    for (uint64_t g = dev::tid(); g < total; g += dev::nthreads()) {
      int j = 0;
      uint64_t w = g;
      for (uint64_t words = (out[j].n * sizeof(T) + 3) / 4; w >= words; words = (out[j].n * sizeof(T) + 3) / 4) {
        w -= words;
        ++j;
      }
      const int q = out[j].peer;
      const uint64_t seq = posted_[q];
      const uint64_t flag = static_cast<uint64_t>(llFlag(seq, period, tag_)) << 32;
      uint8_t* slot = a_.windows[q] + a_.layout.llSlotOffset(channel_, a_.rank, seq);
      dev::storeVolatile64(slot + kLLLine * w, flag | wordOf(out[j].src, out[j].n * sizeof(T), w));
    }
    dev::sync();
    if (dev::tid() == 0) {
      // As post() does for each, with no slot rewritten: clean_ stays.
      for (int j = 0; j < k; ++j) {
        const int q = out[j].peer;
        posted_[q] += 1;
        dev::storeVolatile64(a_.windows[q] + a_.layout.readyOffset(channel_, a_.rank), posted_[q] | kFlagLL);
      }
    }
    dev::sync();  // the counters are advanced before any thread reads them again
    return true;
  }
  // As DevicePrims::drain: no load for a peer whose credits thread 0 has seen cover what it posted.
  __device__ int drain(int* peer) {
    int rc = 0;
    if (dev::tid() == 0) {
      for (int q = 0; q < static_cast<int>(a_.layout.nranks) && rc == 0; ++q) {
        if (credited_[q] >= posted_[q]) continue;
        const uint64_t deadline = dev::globalTimerNs() + a_.timeoutNs;
        for (uint32_t i = 0; acquireFlag(a_, q, mine_ + a_.layout.creditOffset(channel_, q)) < posted_[q]; ++i) {
          if ((i & 1023) != 1023) continue;
          if (gaveUp(deadline, &rc, q)) {
            *peer = q;
            break;
          }
        }
      }
    }
    return fromThread0(rc, shared_);
  }

  /// Thread 0's time waiting for a slice's first line or for room, with COLLIE_KERNEL_TIMING; else 0.
  __device__ uint64_t waitedNs() const { return waitedNs_; }
  // LL slices are never read in place, so giving up leaves no peer reading this rank's buffers (DevicePrims).
  __device__ void giveUp() {}
  __device__ bool gaveUp(int) const { return false; }
  /// Thread 0, after a wait on `peer` failed with collieInvalidUsage: 0 where `peer` had refused its call first
  /// (peerRefused), else kAnotherCall: a line of its came with another call's tag (llOtherCall), of which the
  /// tag is all that is known, or its call posted the slice as Simple (simpleFrom).
  __device__ uint64_t theirs(int peer) const { return peerRefused(a_, peer) ? 0 : kAnotherCall; }
  __device__ void localDone() { dev::sync(); }
  __device__ void stepDone(int si) { clock_.stepDone(si, waitedNs_); }

 private:
  // Word w (4 bytes, little-endian) of the `bytes` at src, as a staged slice holds it; the bytes past the end of
  // the last word, which no receiver reads, 0. One load where the word is whole and aligned (read as a word, as
  // BlockMoves reads its vectors), else byte by byte (1- and 2-byte types at odd offsets, a slice's tail): never
  // a load past the source.
  __device__ static uint32_t wordOf(const T* src, uint64_t bytes, uint64_t w) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(src) + 4 * w;
    if ((reinterpret_cast<uintptr_t>(b) & 3) == 0 && 4 * w + 4 <= bytes) return *reinterpret_cast<const uint32_t*>(b);
    uint32_t v = 0;
    for (uint64_t i = 0; i < 4 && 4 * w + i < bytes; ++i) v |= static_cast<uint32_t>(b[i]) << (8 * i);
    return v;
  }
  __device__ const uint8_t* slotIn(int p) const { return mine_ + a_.layout.llSlotOffset(channel_, p, consumed_[p]); }
  __device__ uint32_t expectedFlag(int p) const { return llFlag(consumed_[p], a_.layout.llFlagPeriod, tag_); }
  __device__ uint32_t firstFlag(int p) const { return static_cast<uint32_t>(dev::loadVolatile64(slotIn(p)) >> 32); }
  __device__ bool firstLineIn(int p) const { return firstFlag(p) == expectedFlag(p); }
  // Thread 0 only; as DevicePrims::pollRoom, a load only when the credits seen so far show no room.
  __device__ bool pollRoom(int q) {
    if (slotFree(posted_[q], credited_[q], a_.layout.nslots)) return true;
    credited_[q] = acquireFlag(a_, q, mine_ + a_.layout.creditOffset(channel_, q));
    return slotFree(posted_[q], credited_[q], a_.layout.nslots);
  }
  // Checked every 1024 polls of a wait for slice `seq` from p: whether p posted it as Simple, a call of another
  // size (protocol.h, postedWithOtherProtocol). A plain load: only the counter's own value is used.
  __device__ bool simpleFrom(int p, uint64_t seq) const {
    return postedWithOtherProtocol(seq, dev::loadVolatile64(mine_ + a_.layout.readyOffset(channel_, p)), true);
  }
  // Thread 0, or each thread waiting on its lines: stopWaiting (device_prims.cuh). Which peer refused need not
  // be kept: theirs() looks again.
  __device__ bool gaveUp(uint64_t deadline, int* rc, int peer, int other = -1) const {
    int refuser = -1;
    *rc = stopWaiting(a_, deadline, peer, other, &refuser);
    return *rc != 0;
  }
  // Every thread waits for its lines of the slice of n elements from p and
  // stages their data; the receiver knows n from its own program (sender and
  // receiver split a step alike), so no line carries a count. Lines are written
  // by many sender threads in no set order, so each is checked by its own flag.
  // A sender that dies half-way (its process killed) never writes the rest:
  // each wait is bounded like the others, and the block fails if any thread
  // gave up. Once every line is staged, thread 0 hands the slot back at once.
  // Returns 0 or the error.
  __device__ int unpack(int p, uint64_t n) {
    const uint64_t seq = consumed_[p];  // read by every thread before the barrier after which thread 0 advances it
    const uint8_t* slot = mine_ + a_.layout.llSlotOffset(channel_, p, seq);
    const uint32_t flag = llFlag(seq, a_.layout.llFlagPeriod, tag_);
    const uint64_t words = (n * sizeof(T) + 3) / 4;
    int rc = 0;
    uint64_t deadline = 0;  // taken at the first slow line only: the clock is not free
    const bool timed = a_.phaseNs != nullptr && dev::tid() == 0;
    const uint64_t start = timed ? dev::globalTimerNs() : 0;
    for (uint64_t w = dev::tid(); w < words && rc == 0; w += dev::nthreads()) {
      uint64_t line = dev::loadVolatile64(slot + kLLLine * w);
      for (uint32_t i = 0; static_cast<uint32_t>(line >> 32) != flag; ++i) {
        if ((i & 1023) == 1023) {
          if (deadline == 0) deadline = dev::globalTimerNs() + a_.timeoutNs;
          if (gaveUp(deadline, &rc, p)) break;
          // A line of another call (protocol.h, llOtherCall). That call's slice may be shorter than ours: a
          // thread whose line it never writes learns it from the slice's first line. Or no line at all: the
          // peer's call posted this slice as Simple.
          if (llOtherCall(static_cast<uint32_t>(line >> 32), flag) ||
              llOtherCall(static_cast<uint32_t>(dev::loadVolatile64(slot) >> 32), flag) || simpleFrom(p, seq)) {
            rc = collieInvalidUsage;
            break;
          }
        }
        line = dev::loadVolatile64(slot + kLLLine * w);
      }
      in_[w] = static_cast<uint32_t>(line);
    }
    if (timed) waitedNs_ += dev::globalTimerNs() - start;  // thread 0's lines, the first of them the slice's first
    if (dev::syncOr(rc != 0)) {
      // Rare: some thread gave up; the block agrees on one of the errors.
      if (dev::tid() == 0) *shared_ = 0;
      dev::sync();
      if (rc != 0) dev::keepFirst(shared_, rc);
      dev::sync();
      rc = *shared_;
      dev::sync();
      return rc;
    }
    // Every line has been read (the barrier above), so the sender may refill the slot. A plain store, as NCCL's
    // LL receivers return theirs: the loads it must follow have already delivered their values.
    if (dev::tid() == 0) {
      consumed_[p] = seq + 1;
      dev::storeVolatile64(a_.windows[p] + a_.layout.creditOffset(channel_, a_.rank), seq + 1);
    }
    return 0;
  }
  // Thread 0 spins until a direction can progress or it gives up.
  __device__ int wait(bool sending, int q, bool receiving, int p) {
    if (pending_ != 0) return pending_;
    int rc = 0;
    if (dev::tid() == 0) {
      const uint64_t start = dev::globalTimerNs(), deadline = start + a_.timeoutNs;
      for (uint32_t i = 0;; ++i) {
        if ((sending && pollRoom(q)) || (receiving && firstLineIn(p))) break;
        if ((i & 1023) != 1023) continue;
        if (gaveUp(deadline, &rc, sending ? q : -1, receiving ? p : -1)) break;
        if (receiving && (llOtherCall(firstFlag(p), expectedFlag(p)) || simpleFrom(p, consumed_[p]))) {
          rc = collieInvalidUsage;
          break;
        }
      }
      if (a_.phaseNs != nullptr) waitedNs_ += dev::globalTimerNs() - start;
    }
    return fromThread0(rc, shared_);
  }

  const KernelArgs& a_;
  int channel_;
  uint8_t* mine_;
  uint64_t* posted_;
  uint64_t* consumed_;
  uint64_t* credited_;  // thread 0's
  uint64_t* clean_;     // "Stale lines" above
  int* shared_;
  uint32_t* out_;
  uint32_t* in_;
  uint32_t tag_;           // llTag of the launch's call, in every flag it writes and expects
  int pending_ = 0;        // the error of a slice unpack() gave up on, the same in every thread
  uint64_t waitedNs_ = 0;  // thread 0's
  StepClock clock_;
};

}  // namespace collie
