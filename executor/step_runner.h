// The step sequencing of one rank's Program on one channel, shared by the host
// executor (g++, one thread) and the CUDA kernels (nvcc, all threads of a
// block in lockstep). What a step means, when a slice may be sent or taken,
// how an exchange interleaves its two directions and where a failed wait is
// reported live here once; a backend supplies only the primitives `P`:
//
//   int  waitArrived(p, n) / waitRoom(q)   block until the next slice from p
//                                       (n elements) has arrived / our next slot at
//                                       q is free; 0, or collieTimeout / collieRemoteError
//   int  waitEither(sending, q, receiving, p)   until either is possible
//   bool arrived(p, n) / room(q)        one poll, no wait (an LL receiver, which
//                                       waits on each line, takes the slice then)
//   const T* inSlot(p) / T* outSlot(q)  the slot of the next slice
//   void release(p) / post(q, n)        hand the slot back / publish the slice of n
//                                       elements (a remote peer's transport sends just those)
//   void copy(dst, src, n, divisor)     dst = src (/ divisor); dst may equal src
//   void reduce(dst, a, b, n, divisor)  dst = a (op) b (/ divisor); dst may equal b
//   void copy2(dst1, dst2, src, n, divisor)   dst1 = src, dst2 = src (/ divisor); dst2 may equal src
//   void reduce2(dst1, dst2, a, b, n, divisor)   dst1 = dst2 = a (op) b (/ divisor); dst2 may equal b
//   void localDone()                    after a local step: its writes are seen by every thread
//                                       of the block before the next step reads them
//   kReadsInPlace                       whether slices may be read in place: expose() exists, and
//                                       inSlot(p) returns where the sender's slice lies, in its
//                                       slot or in the sender's memory (Simple: yes; LL: no)
//   void expose(q, data)                the next post to q hands over `data` in our own memory, which q
//                                       reads in place, instead of a filled slot (executor/direct_sends.h)
//   void stepDone(si)                   step si is over (the kernels time each step with
//                                       COLLIE_KERNEL_TIMING; the host does nothing)
//   kJoinsReceives                      whether a group of joined steps (program.h) runs as one;
//                                       else its steps run one after another, with the same values
//   void reduceMany(dst, base, ins, m, n, divisor)   dst = (((base (op) ins[0]) (op) ins[1]) ...)
//                                       (/ divisor), one pass; base may equal dst (only where kJoinsReceives)
//   kSendsTogether (optional)           whether sendTogether exists:
//   bool sendTogether(out, k)           posts k slices (Outgoing: peer, src, n) to k distinct peers at once, or
//                                       nothing and false where one has no room or they must go one by one
//
// Every thread of a device block calls each primitive with the same arguments
// (control flow here is uniform), so the device primitives can put barriers
// and the single flag-polling thread inside them. Because this file is the
// one the host executor runs, ThreadSanitizer and the CPU suite test the
// GPU's sequencing every run.
#pragma once

#include <cstdint>
#include <type_traits>

#include "algorithms/program.h"
#include "executor/protocol.h"

namespace collie {

/// Where a program stopped when a wait failed.
struct StepFailure {
  int code = 0;  // collieSuccess, collieTimeout or collieRemoteError
  int step = -1;
  int peer = -1;
};

/// The steps whose sends the receiver reads in place (markDirectSends): `marks[i] != 0` on the host, which
/// marks any number of steps; on the GPU, whose launch carries them in its parameters, bit i of `bits` (steps
/// past the 64th are never marked there).
struct DirectSteps {
  const uint8_t* marks = nullptr;
  uint64_t bits = 0;
  COLLIE_HD bool operator[](int i) const { return marks != nullptr ? marks[i] != 0 : i < 64 && ((bits >> i) & 1) != 0; }
};

// Hands the slice at `data` to q in place (the primitives' expose); only called where P::kReadsInPlace.
template <typename T, typename P>
COLLIE_HD void exposeSlice(P& p, int q, const T* data) {
  if constexpr (P::kReadsInPlace) p.expose(q, data);
}

/// One slice of a batch's sends posted together (the primitives' sendTogether): n elements at src, to peer.
template <typename T>
struct Outgoing {
  int peer;
  const T* src;
  uint64_t n;
};

/// Whether the primitives post a batch's sends together (P::kSendsTogether, with sendTogether); false when P
/// does not say.
template <typename P, typename = void>
struct SendsTogether : std::false_type {};
template <typename P>
struct SendsTogether<P, std::void_t<decltype(P::kSendsTogether)>> : std::integral_constant<bool, P::kSendsTogether> {};

/// The first pass over a batch's sends, all at once where the primitives can (LL on the GPU: one pass of the
/// block over every slice's lines, where k posts one after another take k times the barriers and the waits for
/// the source's loads). Only when each step has its whole part, at most a slice, still to send, as every step of
/// a batch of two or more has on the first pass (exchangeBatchEnd). True when sendTogether posted them all and
/// sent[] says so; false, nothing posted, when they go one by one.
template <typename T, typename P>
COLLIE_HD bool sendBatchTogether(P& p, const Step* steps, int first, int m, uint64_t* sent, T* const* bufs,
                                 uint64_t perSlice, int channel, int nchannels, uint64_t align) {
  if (m < 2 || m > kMaxBatchedExchanges) return false;
  Outgoing<T> out[kMaxBatchedExchanges];
  uint64_t counts[kMaxBatchedExchanges];
  int k = 0;
  for (int j = 0; j < m; ++j) {
    const Step& s = steps[first + j];
    const ChannelPart part = channelPart(s.count, channel, nchannels, align);
    if (sent[j] != 0 || part.count > perSlice) return false;
    counts[j] = part.count;
    if (part.count > 0)
      out[k++] = Outgoing<T>{s.sendPeer, bufs[static_cast<int>(s.src.buffer)] + s.src.offset + part.offset, part.count};
  }
  if (k < 2 || !p.sendTogether(out, k)) return false;
  for (int j = 0; j < m; ++j) sent[j] = counts[j];
  return true;
}

/// What one pass over the sends of a group of steps did (sendPass).
struct SendPass {
  bool progressed = false;   // some step posted a slice
  bool sending = false;      // some step has more to send
  int to = -1, toStep = -1;  // the first step that waits for room, and its peer
};

/// One pass over the sends of steps[first..first+m) on this channel, each posting its next slice where its peer
/// has room; sent[j]: the elements step first+j has sent so far.
template <typename T, typename P>
COLLIE_HD SendPass sendPass(P& p, const Step* steps, int first, int m, uint64_t* sent, T* const* bufs,
                            uint64_t perSlice, int channel, int nchannels, uint64_t align, DirectSteps direct) {
  SendPass r;
  if constexpr (SendsTogether<P>::value) {
    if (sendBatchTogether<T>(p, steps, first, m, sent, bufs, perSlice, channel, nchannels, align)) {
      r.progressed = true;  // and nothing is left to send
      return r;
    }
  }
  for (int j = 0; j < m; ++j) {
    const Step& s = steps[first + j];
    const ChannelPart part = channelPart(s.count, channel, nchannels, align);
    if (sent[j] >= part.count) continue;
    if (!p.room(s.sendPeer)) {
      if (r.to < 0) r.to = s.sendPeer, r.toStep = first + j;
      r.sending = true;
      continue;
    }
    const uint64_t n = perSlice < part.count - sent[j] ? perSlice : part.count - sent[j];
    const T* src = bufs[static_cast<int>(s.src.buffer)] + s.src.offset + part.offset + sent[j];
    if (P::kReadsInPlace && direct[first + j]) {
      exposeSlice(p, s.sendPeer, src);
    } else {
      p.copy(p.outSlot(s.sendPeer), src, n, 0);
    }
    p.post(s.sendPeer, n);
    sent[j] += n;
    r.progressed = true;
    if (sent[j] < part.count) r.sending = true;  // more to send: poll again before waiting
  }
  return r;
}

/// What the end of a pass of runJoined or runExchanges found.
enum class PassEnd { kAgain, kDone, kFailed };

/// The end of a pass that moved nothing: done when nothing is left to send or receive; else the primitives wait
/// until the first send that found no room (`s`) or the first receive whose slice was missing (from `from`, of
/// step `fromStep`; -1: none) can go on. A failed wait fills `*fail` with the step and peer waited on.
template <typename P>
COLLIE_HD PassEnd awaitEither(P& p, const SendPass& s, int from, int fromStep, StepFailure* fail) {
  if (!s.sending && from < 0) return PassEnd::kDone;
  const int rc = p.waitEither(s.sending, s.to, from >= 0, from);
  if (rc == 0) return PassEnd::kAgain;
  fail->code = rc;
  fail->step = from >= 0 ? fromStep : s.toStep;
  fail->peer = from >= 0 ? from : s.to;
  return PassEnd::kFailed;
}

/// Runs the group of joined steps steps[head..end) (program.h, "Joined steps") as one step: every send
/// progresses whenever its peer has room, as an exchange's does, and slice k of dst is reduced from the
/// head's source (or dst) and slice k of every receive in one pass, once all of them have arrived; their
/// slots are handed back then. Only where P::kJoinsReceives.
template <typename T, typename P>
COLLIE_HD StepFailure runJoined(P& p, const Step* steps, int head, int end, T* const* bufs, uint64_t perSlice,
                                int divisor, int channel, int nchannels, uint64_t align, DirectSteps direct) {
  StepFailure fail;
  const Step& h = steps[head];
  const ChannelPart in = channelPart(joinedGroupCount(h), channel, nchannels, align);
  T* const dst = bufs[static_cast<int>(h.dst.buffer)] + h.dst.offset + in.offset;
  const T* const base = h.op == StepOp::kCopy ? bufs[static_cast<int>(h.src.buffer)] + h.src.offset + in.offset : dst;
  const int div = steps[end - 1].finalize ? divisor : 0;
  const int first = h.op == StepOp::kCopy ? head + 1 : head;  // the steps that send and receive
  const int m = end - first;
  // As in runExchanges: only the m counts used are zeroed (in a kernel, stores to each thread's local memory).
  // ins[j] is written before every use.
  uint64_t sent[kMaxJoinedSteps];
  for (int j = 0; j < m; ++j) sent[j] = 0;
  const T* ins[kMaxJoinedSteps];
  uint64_t got = 0;
  for (;;) {
    SendPass sends = sendPass<T>(p, steps, first, m, sent, bufs, perSlice, channel, nchannels, align, direct);
    sends.toStep = head;  // a failure names the group's head
    bool progressed = sends.progressed;
    int from = -1;
    if (got < in.count) {
      const uint64_t n = perSlice < in.count - got ? perSlice : in.count - got;
      for (int j = 0; j < m && from < 0; ++j)
        if (!p.arrived(steps[first + j].recvPeer, n)) from = steps[first + j].recvPeer;
      if (from < 0) {
        for (int j = 0; j < m; ++j) ins[j] = p.inSlot(steps[first + j].recvPeer);
        p.reduceMany(dst + got, base + got, ins, m, n, div);
        for (int j = 0; j < m; ++j) p.release(steps[first + j].recvPeer);
        got += n;
        progressed = true;
      }
    }
    if (progressed) continue;
    const PassEnd e = awaitEither(p, sends, from, head, &fail);
    if (e == PassEnd::kFailed) return fail;
    if (e == PassEnd::kDone) break;
  }
  return fail;
}

/// One past the last step of the batch of exchanges that starts at `head` (head + 1 when it is not an exchange
/// or nothing joins it), within its exchange group, which ends at `groupEnd` (program.h, exchangeGroupEnd).
/// Consecutive steps of a group run together (runExchanges) where running them one after another could only be
/// slower: each sends and receives at most one slice on this channel, and none receives into what another
/// sends or receives (pointers compared, so an input that is the output counts). A one-shot allreduce's or a
/// pairwise all-to-all's exchanges of a small call then all wait at once, one round trip in all instead of one
/// each; a step that moves more than a slice keeps its own turn, so large calls run step by step. Every thread of
/// a block computes the same answer. The rule is program.h's cutExchangeBatch, shared with the verifier; here
/// are the ranges a step moves on this channel.
template <typename T>
COLLIE_HD int exchangeBatchEnd(const Step* steps, int groupEnd, int head, T* const* bufs, uint64_t perSlice,
                               int channel, int nchannels, uint64_t align) {
  return cutExchangeBatch(head, groupEnd, [&](int i, ByteSpan* src, ByteSpan* dst) {
    const Step& s = steps[i];
    const ChannelPart out = channelPart(s.count, channel, nchannels, align);
    const ChannelPart in = channelPart(s.recvCount, channel, nchannels, align);
    if (out.count > perSlice || in.count > perSlice) return false;
    const T* from = bufs[static_cast<int>(s.src.buffer)] + s.src.offset + out.offset;
    const T* into = bufs[static_cast<int>(s.dst.buffer)] + s.dst.offset + in.offset;
    *src = ByteSpan{reinterpret_cast<uintptr_t>(from), reinterpret_cast<uintptr_t>(from + out.count)};
    *dst = ByteSpan{reinterpret_cast<uintptr_t>(into), reinterpret_cast<uintptr_t>(into + in.count)};
    return true;
  });
}

/// Runs the exchanges steps[head..end) (one, or a batch: exchangeBatchEnd) as one: each sends a slice whenever
/// its peer has room and takes one whenever it has arrived, so neither direction of any of them waits on
/// another. Once nothing is left to send, each receive waits for its slice directly: one wait, where polling
/// first and waiting after would look at the slice's flag twice (and an LL receiver would read its first line
/// three times).
template <typename T, typename P>
COLLIE_HD StepFailure runExchanges(P& p, const Step* steps, int head, int end, T* const* bufs, uint64_t perSlice,
                                   int divisor, int channel, int nchannels, uint64_t align, DirectSteps direct) {
  StepFailure fail;
  const int m = end - head;
  // Only the m counts used are zeroed, and nothing reads past them. In a kernel these arrays (indexed at run
  // time) live in each thread's local memory, and zeroing them whole would cost every thread of the block 128
  // bytes of stores at every exchange step, a lone exchange's included.
  uint64_t sent[kMaxBatchedExchanges], got[kMaxBatchedExchanges];
  for (int j = 0; j < m; ++j) sent[j] = got[j] = 0;
  for (;;) {
    const SendPass sends = sendPass<T>(p, steps, head, m, sent, bufs, perSlice, channel, nchannels, align, direct);
    bool progressed = sends.progressed;
    const bool sending = sends.sending;
    int from = -1, fromStep = -1;  // the first receive whose slice has not arrived
    for (int j = 0; j < m; ++j) {
      const Step& s = steps[head + j];
      const ChannelPart in = channelPart(s.recvCount, channel, nchannels, align);
      if (got[j] >= in.count) continue;
      const uint64_t n = perSlice < in.count - got[j] ? perSlice : in.count - got[j];
      if (!sending) {
        const int rc = p.waitArrived(s.recvPeer, n);
        if (rc != 0) {
          fail.code = rc;
          fail.step = head + j;
          fail.peer = s.recvPeer;
          return fail;
        }
      } else if (!p.arrived(s.recvPeer, n)) {
        if (from < 0) from = s.recvPeer, fromStep = head + j;
        continue;
      }
      T* d = bufs[static_cast<int>(s.dst.buffer)] + s.dst.offset + in.offset + got[j];
      const int div = s.finalize ? divisor : 0;
      if (s.op == StepOp::kSendRecvReduce) {
        p.reduce(d, p.inSlot(s.recvPeer), d, n, div);
      } else {
        p.copy(d, p.inSlot(s.recvPeer), n, div);
      }
      p.release(s.recvPeer);
      got[j] += n;
      progressed = true;
    }
    if (progressed) continue;
    const PassEnd e = awaitEither(p, sends, from, fromStep, &fail);
    if (e == PassEnd::kFailed) return fail;
    if (e == PassEnd::kDone) break;
  }
  return fail;
}

/// Runs steps[0..nsteps) on channel `channel` of `nchannels`. `bufs` are the
/// input, output and scratch buffers (Buffer order); perSlice is the number of
/// elements one slot holds; align the channel split's granularity in elements.
/// `direct` marks the steps whose sends the receiver reads in place
/// (markDirectSends); only primitives with kReadsInPlace take it.
template <typename T, typename P>
COLLIE_HD StepFailure runSteps(P& p, const Step* steps, int nsteps, T* const* bufs, uint64_t perSlice, int divisor,
                               int channel, int nchannels, uint64_t align, DirectSteps direct = {}) {
  StepFailure fail;
  int groupEnd = 0;  // of the exchange group step si is in (program.h): batches never reach past it
  for (int si = 0; si < nsteps; ++si) {
    const Step& s = steps[si];
    const int div = s.finalize ? divisor : 0;
    // The receiver reads this step's sends where they lie: nothing is copied into its slot, and a step that
    // writes what it sends writes it once.
    const bool inPlace = P::kReadsInPlace && direct[si];
    const ChannelPart part = channelPart(s.count, channel, nchannels, align);
    T* const src = bufs[static_cast<int>(s.src.buffer)] + s.src.offset + part.offset;
    T* const dst = bufs[static_cast<int>(s.dst.buffer)] + s.dst.offset;
    const int from = s.recvPeer, to = s.sendPeer;
    if constexpr (P::kJoinsReceives) {
      // A group longer than kMaxJoinedSteps (no builder makes one; the verifier refuses it) runs step by step.
      const int end = joinedGroupEnd(steps, nsteps, si);
      if (end > si + 1 && end - si <= kMaxJoinedSteps) {
        fail = runJoined<T>(p, steps, si, end, bufs, perSlice, divisor, channel, nchannels, align, direct);
        if (fail.code != 0) return fail;
        for (; si < end; ++si) p.stepDone(si);  // the group's time is its head's
        --si;
        continue;
      }
    }
    // A local step has no flag wait or post after it, whose barriers would order its writes before the next
    // step's reads. Without one, a thread of the next step could read an element another thread has not
    // written yet: the two steps split elements among threads differently whenever their operands' alignment
    // differs (16-byte vectors or single elements). The CPU emulation of the kernels found this in oneshot.
    if (s.op == StepOp::kCopy) {
      p.copy(dst + part.offset, src, part.count, div);
      p.localDone();
      p.stepDone(si);
      continue;
    }
    if (s.op == StepOp::kReduce) {
      p.reduce(dst + part.offset, src, dst + part.offset, part.count, div);
      p.localDone();
      p.stepDone(si);
      continue;
    }
    if (si >= groupEnd) groupEnd = exchangeGroupEnd(steps, nsteps, si);
    if (stepIsExchange(s.op)) {
      const int end = exchangeBatchEnd<T>(steps, groupEnd, si, bufs, perSlice, channel, nchannels, align);
      fail = runExchanges<T>(p, steps, si, end, bufs, perSlice, divisor, channel, nchannels, align, direct);
      if (fail.code != 0) return fail;
      for (; si < end; ++si) p.stepDone(si);  // a batch's time is its head's
      --si;
      continue;
    }
    fail.step = si;
    const bool in = stepReceives(s.op), out = stepSends(s.op);
    for (uint64_t off = 0; off < part.count; off += perSlice) {
      const uint64_t n = perSlice < part.count - off ? perSlice : part.count - off;
      if (in) {
        const int rc = p.waitArrived(from, n);
        if (rc != 0) {
          fail.code = rc;
          fail.peer = from;
          return fail;
        }
      }
      if (out) {
        const int rc = p.waitRoom(to);
        if (rc != 0) {
          fail.code = rc;
          fail.peer = to;
          return fail;
        }
      }
      T* const d = dst + part.offset + off;
      switch (s.op) {
        case StepOp::kSend:
          if (inPlace) {
            exposeSlice(p, to, src + off);
          } else {
            p.copy(p.outSlot(to), src + off, n, 0);
          }
          break;
        case StepOp::kRecv:
          p.copy(d, p.inSlot(from), n, div);
          break;
        case StepOp::kRecvReduceSend:
          p.reduce(p.outSlot(to), p.inSlot(from), src + off, n, 0);
          break;
        case StepOp::kRecvReduceCopy:
          p.reduce(d, p.inSlot(from), src + off, n, div);
          break;
        case StepOp::kRecvCopySend:
          if (inPlace) {  // never with a division (markDirectSends): what it writes is what it received
            p.copy(d, p.inSlot(from), n, div);
            exposeSlice(p, to, d);
          } else {
            p.copy2(p.outSlot(to), d, p.inSlot(from), n, div);
          }
          break;
        case StepOp::kRecvReduceCopySend:
          if (inPlace) {
            p.reduce(d, p.inSlot(from), src + off, n, div);
            exposeSlice(p, to, d);
          } else {
            p.reduce2(p.outSlot(to), d, p.inSlot(from), src + off, n, div);
          }
          break;
        case StepOp::kCopySend:
          // In place the block is where it belongs already: copy and copy2 skip a copy onto itself, and only
          // the send reads it.
          if (inPlace) {
            p.copy(d, src + off, n, div);
            exposeSlice(p, to, src + off);
          } else {
            p.copy2(p.outSlot(to), d, src + off, n, div);
          }
          break;
        default:
          break;  // local and exchange steps are handled above; direct steps never get here (refuseDirectSteps)
      }
      if (in) p.release(from);
      if (out) p.post(to, n);
    }
    p.stepDone(si);
  }
  fail.step = -1;
  return fail;
}

}  // namespace collie
