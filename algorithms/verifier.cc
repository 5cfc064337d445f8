#include "algorithms/verifier.h"

#include <deque>
#include <map>
#include <utility>

namespace collie {

namespace {

struct Value {
  uint64_t ranks = 0;      // contributions held
  uint64_t index = 0;      // which element of the contributors' inputs
  bool finalized = false;  // avg's division applied
  bool defined = false;    // written at all (outputs start undefined)
};

using Message = std::vector<Value>;

struct RankState {
  std::vector<Value> input, output;
  size_t pc = 0;  // next step
};

Status violation(const Program& p, size_t step, const char* what, uint64_t element) {
  return Status::error(collieInternalError, "%s %s, nranks %d, count %llu: rank %d step %zu (%s): %s at element %llu",
                       p.algorithm.c_str(), collectiveName(p.collective), p.nranks,
                       static_cast<unsigned long long>(p.count), p.rank, step,
                       step < p.steps.size() ? stepOpName(p.steps[step].op) : "end", what,
                       static_cast<unsigned long long>(element));
}

}  // namespace

Status verifyPrograms(const std::vector<Program>& programs) {
  const int n = static_cast<int>(programs.size());
  if (n < 1 || n > 64) return Status::error(collieInvalidArgument, "verifier: %d ranks (1..64 supported)", n);
  const Program& first = programs[0];
  const uint64_t count = first.count, stride = first.stride ? first.stride : first.count;
  uint64_t inCount = 0, outCount = 0;
  bufferCounts(first.collective, n, count, stride, &inCount, &outCount);
  const uint64_t all = n == 64 ? ~uint64_t{0} : ((uint64_t{1} << n) - 1);
  std::vector<RankState> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankState& s = ranks[static_cast<size_t>(r)];
    s.input.resize(inCount);
    for (uint64_t i = 0; i < inCount; ++i) s.input[i] = Value{uint64_t{1} << r, i, false, true};
    s.output.assign(outCount, Value{});
  }
  std::map<std::pair<int, int>, std::deque<Message>> channels;  // (from, to) -> messages in flight

  bool moved = true;
  while (moved) {
    moved = false;
    for (int r = 0; r < n; ++r) {
      RankState& s = ranks[static_cast<size_t>(r)];
      const Program& p = programs[static_cast<size_t>(r)];
      while (s.pc < p.steps.size()) {
        const Step& st = p.steps[s.pc];
        auto buf = [&](const Range& range) -> std::vector<Value>& {
          return range.buffer == Buffer::kInput ? s.input : s.output;
        };
        if (st.count == 0) {
          ++s.pc;
          continue;
        }
        const bool reads = st.op != StepOp::kRecv && st.op != StepOp::kRecvCopySend;
        if (reads && st.src.offset + st.count > buf(st.src).size())
          return violation(p, s.pc, "source range past the end of the buffer", st.src.offset + st.count);
        Message incoming;
        const bool recv = st.op != StepOp::kSend && st.op != StepOp::kCopy;
        if (recv) {
          std::deque<Message>& ch = channels[{st.recvPeer, r}];
          if (ch.empty()) break;  // blocked: try other ranks
          incoming = std::move(ch.front());
          ch.pop_front();
          if (incoming.size() != st.count) return violation(p, s.pc, "message length differs from the send", 0);
        }
        Message result(st.count);
        for (uint64_t i = 0; i < st.count; ++i) {
          Value v;
          switch (st.op) {
            case StepOp::kSend:
            case StepOp::kCopy:
              v = buf(st.src)[st.src.offset + i];
              break;
            case StepOp::kRecv:
            case StepOp::kRecvCopySend:
              v = incoming[i];
              break;
            case StepOp::kRecvReduceSend:
            case StepOp::kRecvReduceCopy: {
              const Value& a = incoming[i];
              const Value& b = buf(st.src)[st.src.offset + i];
              if (!a.defined || !b.defined) return violation(p, s.pc, "reduces an undefined value", i);
              if (a.ranks & b.ranks) return violation(p, s.pc, "double-counts a contribution", i);
              if (a.index != b.index) return violation(p, s.pc, "reduces two different elements", i);
              if (a.finalized || b.finalized) return violation(p, s.pc, "reduces an already finalized value", i);
              v = Value{a.ranks | b.ranks, a.index, false, true};
              break;
            }
          }
          if (!v.defined) return violation(p, s.pc, "moves an undefined value", i);
          if (st.finalize) {
            if (v.finalized) return violation(p, s.pc, "finalizes twice", i);
            v.finalized = true;
          }
          result[i] = v;
        }
        const bool writes = st.op == StepOp::kRecv || st.op == StepOp::kRecvReduceCopy ||
                            st.op == StepOp::kRecvCopySend || st.op == StepOp::kCopy;
        if (writes) {
          std::vector<Value>& dst = buf(st.dst);
          if (st.dst.offset + st.count > dst.size()) return violation(p, s.pc, "writes past the end", st.dst.offset);
          for (uint64_t i = 0; i < st.count; ++i) dst[st.dst.offset + i] = result[i];
        }
        const bool sends = st.op == StepOp::kSend || st.op == StepOp::kRecvReduceSend || st.op == StepOp::kRecvCopySend;
        if (sends) channels[{r, st.sendPeer}].push_back(std::move(result));
        ++s.pc;
        moved = true;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    const RankState& s = ranks[static_cast<size_t>(r)];
    const Program& p = programs[static_cast<size_t>(r)];
    if (s.pc < p.steps.size()) return violation(p, s.pc, "deadlock: waits for a message that never comes", 0);
  }
  for (const auto& ch : channels)
    if (!ch.second.empty())
      return Status::error(collieInternalError, "%s: %zu message(s) from rank %d to rank %d never received",
                           programs[0].algorithm.c_str(), ch.second.size(), ch.first.first, ch.first.second);
  // Postconditions: what each output element must hold, per collective.
  for (int r = 0; r < n; ++r) {
    const RankState& s = ranks[static_cast<size_t>(r)];
    const Program& p = programs[static_cast<size_t>(r)];
    const size_t end = p.steps.size();
    auto expect = [&](uint64_t at, uint64_t ranksWanted, uint64_t index, bool reduced) -> Status {
      const Value& v = s.output[at];
      if (!v.defined) return violation(p, end, "output never written", at);
      if (v.ranks != ranksWanted) return violation(p, end, "output holds the wrong set of contributions", at);
      if (v.index != index) return violation(p, end, "output holds the wrong element", at);
      if (reduced && !v.finalized) return violation(p, end, "output was never finalized", at);
      return Status();
    };
    for (uint64_t i = 0; i < count; ++i) {
      Status st;
      switch (p.collective) {
        case Collective::kAllReduce:
          st = expect(i, all, i, true);
          break;
        case Collective::kReduceScatter:
          st = expect(i, all, static_cast<uint64_t>(r) * stride + i, true);
          break;
        case Collective::kAllGather:
          for (int c = 0; c < n && st.ok(); ++c)
            st = expect(static_cast<uint64_t>(c) * stride + i, uint64_t{1} << c, i, false);
          break;
        case Collective::kBroadcast:
          st = expect(i, uint64_t{1} << p.root, i, false);
          break;
        case Collective::kReduce:
          if (r == p.root) st = expect(i, all, i, true);
          break;
        default:
          return Status::error(collieInvalidUsage, "verifier: no postcondition for %s yet",
                               collectiveName(p.collective));
      }
      COLLIE_RETURN_IF_ERROR(st);
    }
  }
  return Status();
}

}  // namespace collie
