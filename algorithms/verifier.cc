#include "algorithms/verifier.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "algorithms/verifier_machine.h"

namespace collie {

namespace verifier_internal {

Status violation(const Program& p, size_t step, const char* what, uint64_t element) {
  return Status::error(collieInternalError, "%s %s, nranks %d, count %llu: rank %d step %zu (%s): %s at element %llu",
                       p.algorithm.c_str(), collectiveName(p.collective), p.nranks,
                       static_cast<unsigned long long>(p.count), p.rank, step,
                       step < p.steps.size() ? stepOpName(p.steps[step].op) : "end", what,
                       static_cast<unsigned long long>(element));
}

namespace {

bool readsSrc(StepOp op) {
  return op == StepOp::kSend || op == StepOp::kRecvReduceSend || op == StepOp::kRecvReduceCopy ||
         op == StepOp::kRecvReduceCopySend || op == StepOp::kCopy || op == StepOp::kCopySend || op == StepOp::kReduce ||
         op == StepOp::kSendRecv || op == StepOp::kSendRecvReduce;
}
bool writesDst(StepOp op) { return op != StepOp::kSend && op != StepOp::kRecvReduceSend; }

}  // namespace

Status Machine::setUp() {
  ranks_.resize(static_cast<size_t>(n_));
  for (int r = 0; r < n_; ++r) {
    const Program& p = programs_[static_cast<size_t>(r)];
    if (p.rank != r || p.nranks != n_ || p.collective != programs_[0].collective)
      return violation(p, 0, "program built for another rank, size or collective", 0);
    RankState& s = ranks_[static_cast<size_t>(r)];
    bufferCounts(p, &s.inCount, &s.outCount);
    bool aliased = false;
    if (options_.inPlace && s.inCount != 0 && s.outCount != 0) {
      aliased = inPlaceBases(p, &s.inBase, &s.outBase);
      if (!aliased) return violation(p, 0, "the collective has no in-place form", 0);
    }
    if (!aliased) s.outBase = s.inCount;
    s.mem.assign(std::max(s.inBase + s.inCount, s.outBase + s.outCount), Value{});
    for (uint64_t i = 0; i < s.inCount; ++i) s.mem[s.inBase + i] = Value{uint64_t{1} << r, i, false, true};
    s.scratch.assign(p.scratchCount, Value{});
    direct_ = direct_ || hasDirectSteps(p);
  }
  return direct_ ? setUpDirect() : Status();
}

Status Machine::reduce(const Program& p, const Value& a, const Value& b, uint64_t i, Value* out) const {
  const size_t pc = ranks_[static_cast<size_t>(p.rank)].pc;
  if (!a.defined || !b.defined) return violation(p, pc, "reduces an undefined value", i);
  if (a.ranks & b.ranks) return violation(p, pc, "double-counts a contribution", i);
  if (a.index != b.index) return violation(p, pc, "reduces two different elements", i);
  if (a.finalized || b.finalized) return violation(p, pc, "reduces an already finalized value", i);
  *out = Value{a.ranks | b.ranks, a.index, false, true};
  return Status();
}

// Stores v at dst, applying avg's division when the step finalizes.
Status Machine::write(const Program& p, const Step& st, Value v, uint64_t i, Value* dst) const {
  const size_t pc = ranks_[static_cast<size_t>(p.rank)].pc;
  if (!v.defined) return violation(p, pc, "moves an undefined value", i);
  if (st.finalize) {
    if (v.finalized) return violation(p, pc, "finalizes twice", i);
    v.finalized = true;
  }
  *dst = v;
  return Status();
}

Status Machine::checkStep(int r) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  const Step& st = p.steps[s.pc];
  const uint64_t recvN = st.received(), sendN = st.sent();
  if (sendN && (st.sendPeer < 0 || st.sendPeer >= n_)) return violation(p, s.pc, "sends to no rank", 0);
  if (recvN && (st.recvPeer < 0 || st.recvPeer >= n_)) return violation(p, s.pc, "receives from no rank", 0);
  const uint64_t srcN = st.count;
  const uint64_t dstN = stepIsExchange(st.op) ? st.recvCount : st.count;
  if (readsSrc(st.op) && !fits(s, st.src, srcN))
    return violation(p, s.pc, "source range outside its buffer", st.src.offset + srcN);
  if (writesDst(st.op) && !fits(s, st.dst, dstN))
    return violation(p, s.pc, "destination range outside its buffer", st.dst.offset + dstN);
  if (st.finalize && !writesDst(st.op)) return violation(p, s.pc, "finalizes a value it does not write", 0);
  if (st.joined && (st.op != StepOp::kSendRecvReduce || s.pc == 0))
    return violation(p, s.pc, "joined, but only a kSendRecvReduce after another step may be", 0);
  // An exchange's two directions interleave in an order no one fixes: what it
  // sends must not be what it receives into.
  if (stepIsExchange(st.op) && srcN && dstN) {
    auto place = [&](const Range& r) {
      return r.buffer == Buffer::kScratch ? r.offset : (r.buffer == Buffer::kInput ? s.inBase : s.outBase) + r.offset;
    };
    const bool sameSpace = (st.src.buffer == Buffer::kScratch) == (st.dst.buffer == Buffer::kScratch);
    const uint64_t a = place(st.src), b = place(st.dst);
    if (sameSpace && a < b + dstN && b < a + srcN)
      return violation(p, s.pc, "sends from the range it receives into", std::max(a, b));
  }
  return Status();
}

// The shape of the group of joined steps steps[pc..end) (program.h, "Joined steps"), with each step's own checks.
Status Machine::checkGroup(int r, int end) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  const size_t head = s.pc;
  const Step& h = p.steps[head];
  for (size_t i = head; i < static_cast<size_t>(end); ++i) {
    s.pc = i;
    Status checked = checkStep(r);
    s.pc = head;
    COLLIE_RETURN_IF_ERROR(checked);
  }
  if (h.op != StepOp::kCopy && h.op != StepOp::kSendRecvReduce)
    return violation(p, head, "heads a group of joined steps, which only a kCopy or a kSendRecvReduce may", 0);
  if (end - static_cast<int>(head) > kMaxJoinedSteps)
    return violation(p, head, "heads more joined steps than kMaxJoinedSteps", 0);
  const uint64_t total = joinedGroupCount(h);
  if (h.op == StepOp::kCopy && h.src.buffer == h.dst.buffer && h.src.offset != h.dst.offset &&
      h.src.offset < h.dst.offset + total && h.dst.offset < h.src.offset + total)
    return violation(p, head, "heads joined steps with a copy onto part of its own source", h.src.offset);
  for (size_t i = head; i < static_cast<size_t>(end); ++i) {
    const Step& st = p.steps[i];
    if (st.dst.buffer != h.dst.buffer || st.dst.offset != h.dst.offset || (i > head && st.recvCount != total))
      return violation(p, i, "joined to a step that writes another range", 0);
    if (st.finalize && i + 1 != static_cast<size_t>(end))
      return violation(p, i, "finalizes before the last step of its group", 0);
    for (size_t j = head; j < i; ++j)
      if (p.steps[j].op == StepOp::kSendRecvReduce && p.steps[j].recvPeer == st.recvPeer)
        return violation(p, i, "receives from a peer an earlier step of its group receives from", 0);
  }
  return Status();
}

// One pass over the sends of steps[first..first+m) of a group or a batch run as one: each sends its next slice
// where its peer has room (s.groupSent[j]: what step first+j has sent so far).
Status Machine::sendPass(int r, size_t first, size_t m, bool* progressed) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  for (size_t j = 0; j < m; ++j) {
    const Step& st = p.steps[first + j];
    uint64_t& sent = s.groupSent[j];
    if (sent >= st.count || full(r, st.sendPeer)) continue;
    const uint64_t k = std::min(sliceOf(st.count), st.count - sent);
    Slice out;
    out.last = sent + k == st.count;
    for (uint64_t i = 0; i < k; ++i) {
      const Value& v = *at(s, st.src, sent + i);
      if (!v.defined) return violation(p, first + j, "sends an undefined value", sent + i);
      out.values.push_back(v);
    }
    channel(r, st.sendPeer).push_back(std::move(out));
    sent += k;
    *progressed = true;
  }
  return Status();
}

// Runs the group steps[pc..end) as one step (VerifyOptions::joinReceives); *done once it is over.
Status Machine::advanceGroup(int r, int end, bool* moved, bool* done) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  const size_t head = s.pc;
  const Step& h = p.steps[head];
  const size_t first = h.op == StepOp::kCopy ? head + 1 : head;
  const size_t m = static_cast<size_t>(end) - first;
  const uint64_t total = joinedGroupCount(h);
  if (s.groupSent.empty() && s.received == 0) {
    COLLIE_RETURN_IF_ERROR(checkGroup(r, end));
    s.groupSent.assign(m, 0);
  }
  *done = false;
  for (;;) {
    bool progressed = false;
    COLLIE_RETURN_IF_ERROR(sendPass(r, first, m, &progressed));
    bool all = s.received < total;
    for (size_t j = 0; j < m && all; ++j) all = !channel(p.steps[first + j].recvPeer, r).empty();
    if (all) {
      // Slice by slice, as the executors reduce it: the head's source (a copy's) or dst, then every receive.
      std::vector<Slice> in(m);
      for (size_t j = 0; j < m; ++j)
        COLLIE_RETURN_IF_ERROR(take(r, p.steps[first + j].recvPeer, s.received, total, &in[j]));
      const Range& base = h.op == StepOp::kCopy ? h.src : h.dst;
      for (uint64_t i = 0; i < in[0].values.size(); ++i) {
        const uint64_t e = s.received + i;
        Value v = *at(s, base, e);
        for (size_t j = 0; j < m; ++j) {
          if (in[j].values.size() != in[0].values.size())
            return violation(p, first + j, "message length differs from the matching send", e);
          COLLIE_RETURN_IF_ERROR(reduce(p, in[j].values[i], v, e, &v));
        }
        COLLIE_RETURN_IF_ERROR(write(p, p.steps[static_cast<size_t>(end) - 1], v, e, at(s, h.dst, e)));
      }
      s.received += in[0].values.size();
      progressed = true;
    }
    bool over = s.received == total;
    for (size_t j = 0; j < m && over; ++j) over = s.groupSent[j] == p.steps[first + j].count;
    if (over) {
      s.pc = static_cast<size_t>(end);
      s.sent = s.received = 0;
      s.groupSent.clear();
      *moved = true;
      *done = true;
      return Status();
    }
    if (!progressed) return Status();
    *moved = true;
  }
}

// One past the batch of exchanges that starts at rank r's current step, cut by the step runner's own rule
// (program.h, cutExchangeBatch): within the step's exchange group, each step at most one slice each way, none
// receiving into what another sends or receives (in place, input and output share `mem`, so the addresses tell).
size_t Machine::batchEnd(int r) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  auto span = [&](const Range& range, uint64_t count) {
    if (count == 0) return ByteSpan{};
    const Value* lo = at(s, range, 0);
    return ByteSpan{reinterpret_cast<uintptr_t>(lo), reinterpret_cast<uintptr_t>(lo + count)};
  };
  auto spansOf = [&](int i, ByteSpan* src, ByteSpan* dst) {
    const Step& st = p.steps[static_cast<size_t>(i)];
    if (!fits(s, st.src, st.count) || !fits(s, st.dst, st.recvCount) || st.count > sliceOf(st.count) ||
        st.recvCount > sliceOf(st.recvCount))
      return false;
    *src = span(st.src, st.count);
    *dst = span(st.dst, st.recvCount);
    return true;
  };
  return static_cast<size_t>(cutExchangeBatch(static_cast<int>(s.pc), static_cast<int>(s.exchangeGroupEnd), spansOf));
}

// Runs the batch steps[pc..batchEnd) as one: every send whenever its peer has room, every receive whenever its
// slice is there; *done once all are over.
Status Machine::advanceBatch(int r, bool* moved, bool* done) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  const size_t head = s.pc, m = s.batchEnd - head;
  *done = false;
  for (;;) {
    bool progressed = false;
    COLLIE_RETURN_IF_ERROR(sendPass(r, head, m, &progressed));
    for (size_t j = 0; j < m; ++j) {
      const Step& st = p.steps[head + j];
      uint64_t& got = s.batchGot[j];
      if (got >= st.recvCount || channel(st.recvPeer, r).empty()) continue;
      Slice in;
      COLLIE_RETURN_IF_ERROR(take(r, st.recvPeer, got, st.recvCount, &in));
      for (uint64_t i = 0; i < in.values.size(); ++i)
        COLLIE_RETURN_IF_ERROR(write(p, st, in.values[i], got + i, at(s, st.dst, got + i)));
      got += in.values.size();
      progressed = true;
    }
    bool over = true;
    for (size_t j = 0; j < m && over; ++j)
      over = s.groupSent[j] == p.steps[head + j].count && s.batchGot[j] == p.steps[head + j].recvCount;
    if (over) {
      s.pc = s.batchEnd;
      s.batchEnd = 0;
      s.groupSent.clear();
      s.batchGot.clear();
      *moved = true;
      *done = true;
      return Status();
    }
    if (!progressed) return Status();
    *moved = true;
  }
}

// Takes the next slice from `from` for a receive that has `done` of `total` elements.
Status Machine::take(int r, int from, uint64_t done, uint64_t total, Slice* out) {
  std::deque<Slice>& ch = channel(from, r);
  const uint64_t want = std::min(sliceOf(total), total - done);
  *out = std::move(ch.front());
  ch.pop_front();
  const Program& p = programs_[static_cast<size_t>(r)];
  if (out->values.size() != want || out->last != (done + want == total))
    return violation(p, ranks_[static_cast<size_t>(r)].pc, "message length differs from the matching send", done);
  return Status();
}

// Runs rank r as far as it can go; *moved says whether it did anything.
Status Machine::advance(int r, bool* moved) {
  if (direct_) return advanceDirect(r, moved);
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  while (s.pc < p.steps.size()) {
    if (s.pc >= s.exchangeGroupEnd)
      s.exchangeGroupEnd = static_cast<size_t>(
          collie::exchangeGroupEnd(p.steps.data(), static_cast<int>(p.steps.size()), static_cast<int>(s.pc)));
    if (options_.batchExchanges && s.batchEnd == 0 && s.sent == 0 && s.received == 0) {
      const size_t end = batchEnd(r);
      if (end > s.pc + 1) {
        const size_t head = s.pc;
        for (; s.pc < end; ++s.pc) COLLIE_RETURN_IF_ERROR(checkStep(r));  // each step's own rules
        s.pc = head;
        s.batchEnd = end;
        s.groupSent.assign(end - s.pc, 0);
        s.batchGot.assign(end - s.pc, 0);
      }
    }
    if (s.batchEnd != 0) {
      bool done = false;
      COLLIE_RETURN_IF_ERROR(advanceBatch(r, moved, &done));
      if (!done) break;
      continue;
    }
    const int group = joinedGroupEnd(p.steps.data(), static_cast<int>(p.steps.size()), static_cast<int>(s.pc));
    if (group > static_cast<int>(s.pc) + 1 && !p.steps[s.pc].joined) {
      if (options_.joinReceives) {
        bool done = false;
        COLLIE_RETURN_IF_ERROR(advanceGroup(r, group, moved, &done));
        if (!done) break;
        continue;
      }
      if (s.sent == 0 && s.received == 0) COLLIE_RETURN_IF_ERROR(checkGroup(r, group));  // then step by step
    }
    const Step& st = p.steps[s.pc];
    if (s.sent == 0 && s.received == 0) COLLIE_RETURN_IF_ERROR(checkStep(r));
    const uint64_t sendN = st.sent(), recvN = st.received();
    bool progressed = false;
    if (st.op == StepOp::kCopy || st.op == StepOp::kReduce) {
      for (uint64_t i = 0; i < st.count; ++i) {
        Value v = *at(s, st.src, i);
        if (st.op == StepOp::kReduce) COLLIE_RETURN_IF_ERROR(reduce(p, *at(s, st.dst, i), v, i, &v));
        COLLIE_RETURN_IF_ERROR(write(p, st, v, i, at(s, st.dst, i)));
      }
      progressed = true;
    } else if (stepIsExchange(st.op)) {
      // The two directions progress independently, as the executors interleave them.
      if (s.sent < sendN && !full(r, st.sendPeer)) {
        const uint64_t k = std::min(sliceOf(sendN), sendN - s.sent);
        Slice out;
        out.last = s.sent + k == sendN;
        for (uint64_t i = 0; i < k; ++i) {
          const Value& v = *at(s, st.src, s.sent + i);
          if (!v.defined) return violation(p, s.pc, "sends an undefined value", s.sent + i);
          out.values.push_back(v);
        }
        channel(r, st.sendPeer).push_back(std::move(out));
        s.sent += k;
        progressed = true;
      }
      if (s.received < recvN && !channel(st.recvPeer, r).empty()) {
        Slice in;
        COLLIE_RETURN_IF_ERROR(take(r, st.recvPeer, s.received, recvN, &in));
        for (uint64_t i = 0; i < in.values.size(); ++i) {
          Value* dst = at(s, st.dst, s.received + i);
          Value v = in.values[i];
          if (st.op == StepOp::kSendRecvReduce) COLLIE_RETURN_IF_ERROR(reduce(p, v, *dst, s.received + i, &v));
          COLLIE_RETURN_IF_ERROR(write(p, st, v, s.received + i, dst));
        }
        s.received += in.values.size();
        progressed = true;
      }
      if (s.sent < sendN || s.received < recvN) {
        if (!progressed) break;
        *moved = true;
        continue;
      }
    } else if (st.count != 0) {
      // Send, receive or forward: one slice at a time, needing both the
      // incoming slice and room at the receiver, as the executors wait for both.
      const bool in = stepReceives(st.op), out = stepSends(st.op);
      if (in && channel(st.recvPeer, r).empty()) break;
      if (out && full(r, st.sendPeer)) break;
      const uint64_t done = std::max(s.sent, s.received);
      const uint64_t k = std::min(sliceOf(st.count), st.count - done);
      Slice incoming;
      if (in) COLLIE_RETURN_IF_ERROR(take(r, st.recvPeer, done, st.count, &incoming));
      Slice outgoing;
      outgoing.last = done + k == st.count;
      for (uint64_t i = 0; i < k; ++i) {
        const uint64_t e = done + i;
        Value v;
        switch (st.op) {
          case StepOp::kSend:
          case StepOp::kCopySend:
            v = *at(s, st.src, e);
            break;
          case StepOp::kRecv:
          case StepOp::kRecvCopySend:
            v = incoming.values[i];
            break;
          default:  // kRecvReduceSend, kRecvReduceCopy, kRecvReduceCopySend
            COLLIE_RETURN_IF_ERROR(reduce(p, incoming.values[i], *at(s, st.src, e), e, &v));
            break;
        }
        if (!v.defined) return violation(p, s.pc, "moves an undefined value", e);
        Value* const d = writesDst(st.op) ? at(s, st.dst, e) : nullptr;
        if (d != nullptr) COLLIE_RETURN_IF_ERROR(write(p, st, v, e, d));
        // A forwarded copy is never divided (copy2); a reduction sent on as it completes carries what it
        // wrote, avg's division included (reduce2), as a later send of dst would.
        outgoing.values.push_back(st.op == StepOp::kRecvReduceCopySend ? *d : v);
      }
      if (out) channel(r, st.sendPeer).push_back(std::move(outgoing));
      if (in) s.received = done + k;
      if (out) s.sent = done + k;
      *moved = true;
      if (done + k < st.count) continue;
    }
    ++s.pc;
    s.sent = s.received = 0;
    *moved = true;
  }
  return Status();
}

Status Machine::run() {
  bool moved = true;
  while (moved) {
    moved = false;
    for (int r = 0; r < n_; ++r) COLLIE_RETURN_IF_ERROR(advance(r, &moved));
  }
  if (direct_) return directStuck();
  for (int r = 0; r < n_; ++r) {
    const RankState& s = ranks_[static_cast<size_t>(r)];
    const Program& p = programs_[static_cast<size_t>(r)];
    if (s.pc < p.steps.size()) {
      if (s.batchEnd != 0)
        return violation(p, s.pc, "deadlock: a batch of exchanges waits for a message or a free slot that never comes",
                         0);
      if (!s.groupSent.empty())
        return violation(p, s.pc, "deadlock: joined steps wait for a message or a free slot that never comes", 0);
      const Step& st = p.steps[s.pc];
      const bool sending =
          s.sent < st.sent() && (st.received() == 0 || s.received == st.received() || !channel(st.recvPeer, r).empty());
      return violation(p, s.pc,
                       sending ? "deadlock: waits for a free slot at a peer that never frees one"
                               : "deadlock: waits for a message that never comes",
                       0);
    }
  }
  for (int from = 0; from < n_; ++from)
    for (int to = 0; to < n_; ++to)
      if (!channel(from, to).empty())
        return Status::error(collieInternalError,
                             "%s %s, nranks %d: %zu slice(s) from rank %d to rank %d never received",
                             programs_[0].algorithm.c_str(), collectiveName(programs_[0].collective), n_,
                             channel(from, to).size(), from, to);
  return Status();
}

Status Machine::checkPostconditions() {
  const uint64_t all = n_ == 64 ? ~uint64_t{0} : ((uint64_t{1} << n_) - 1);
  for (int r = 0; r < n_; ++r) {
    RankState& s = ranks_[static_cast<size_t>(r)];
    const Program& p = programs_[static_cast<size_t>(r)];
    const uint64_t count = p.count, stride = p.stride ? p.stride : p.count;
    const size_t end = p.steps.size();
    auto expect = [&](uint64_t at, uint64_t ranksWanted, uint64_t index, bool reduced) -> Status {
      const Value& v = s.mem[s.outBase + at];
      if (!v.defined) return violation(p, end, "output never written", at);
      if (v.ranks != ranksWanted) return violation(p, end, "output holds the wrong set of contributions", at);
      if (v.index != index) return violation(p, end, "output holds the wrong element", at);
      if (reduced && !v.finalized) return violation(p, end, "output was never finalized", at);
      if (!reduced && v.finalized) return violation(p, end, "output was divided but is not a reduction", at);
      return Status();
    };
    const uint64_t me = static_cast<uint64_t>(r);
    if (p.collective == Collective::kAllToAllv) {
      for (int j = 0; j < n_; ++j) {
        const Program& q = programs_[static_cast<size_t>(j)];
        const size_t uj = static_cast<size_t>(j), ur = static_cast<size_t>(r);
        if (p.recvCounts.size() != static_cast<size_t>(n_) || q.sendCounts.size() != static_cast<size_t>(n_) ||
            q.sendCounts[ur] != p.recvCounts[uj])
          return violation(p, end, "receive count differs from the peer's send count", static_cast<uint64_t>(j));
        for (uint64_t i = 0; i < p.recvCounts[uj]; ++i)
          COLLIE_RETURN_IF_ERROR(expect(p.recvDispls[uj] + i, uint64_t{1} << j, q.sendDispls[ur] + i, false));
      }
      continue;
    }
    for (uint64_t i = 0; i < count; ++i) {
      Status st;
      switch (p.collective) {
        case Collective::kAllReduce:
          st = expect(i, all, i, true);
          break;
        case Collective::kReduceScatter:
          st = expect(i, all, me * stride + i, true);
          break;
        case Collective::kAllGather:
          for (int c = 0; c < n_ && st.ok(); ++c)
            st = expect(static_cast<uint64_t>(c) * stride + i, uint64_t{1} << c, i, false);
          break;
        case Collective::kBroadcast:
          st = expect(i, uint64_t{1} << p.root, i, false);
          break;
        case Collective::kReduce:
          if (r == p.root) st = expect(i, all, i, true);
          break;
        case Collective::kGather:
          for (int c = 0; c < n_ && st.ok() && r == p.root; ++c)
            st = expect(static_cast<uint64_t>(c) * stride + i, uint64_t{1} << c, i, false);
          break;
        case Collective::kScatter:
          st = expect(i, uint64_t{1} << p.root, me * stride + i, false);
          break;
        case Collective::kAllToAll:
          for (int c = 0; c < n_ && st.ok(); ++c)
            st = expect(static_cast<uint64_t>(c) * stride + i, uint64_t{1} << c, me * stride + i, false);
          break;
        default:
          return Status::error(collieInvalidUsage, "verifier: no postcondition for %s", collectiveName(p.collective));
      }
      COLLIE_RETURN_IF_ERROR(st);
    }
  }
  return Status();
}

}  // namespace verifier_internal

using verifier_internal::Machine;

bool inPlaceBases(const Program& p, uint64_t* inputBase, uint64_t* outputBase) {
  const uint64_t stride = p.stride ? p.stride : p.count;
  *inputBase = *outputBase = 0;
  switch (p.collective) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kReduce:
      return true;
    case Collective::kReduceScatter:
    case Collective::kScatter:
      *outputBase = static_cast<uint64_t>(p.collective == Collective::kScatter ? p.root : p.rank) * stride;
      return true;
    case Collective::kAllGather:
    case Collective::kGather:
      *inputBase = static_cast<uint64_t>(p.collective == Collective::kGather ? p.root : p.rank) * stride;
      return true;
    default:
      return false;
  }
}

Status verifyPrograms(const std::vector<Program>& programs, const VerifyOptions& options) {
  const int n = static_cast<int>(programs.size());
  if (n < 1 || n > 64) return Status::error(collieInvalidArgument, "verifier: %d ranks (1..64 supported)", n);
  Machine m(programs, options);
  COLLIE_RETURN_IF_ERROR(m.setUp());
  COLLIE_RETURN_IF_ERROR(m.run());
  return m.checkPostconditions();
}

}  // namespace collie
