#include "executor/direct_sends.h"

#include "core/env.h"

namespace collie {

namespace {

struct Bytes {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  bool empty() const { return begin == end; }
  bool overlaps(const Bytes& o) const { return !empty() && !o.empty() && begin < o.end && o.begin < end; }
  bool operator==(const Bytes& o) const { return begin == o.begin && end == o.end; }
};

Bytes bytesOf(void* const* bufs, const Range& r, uint64_t count, size_t elemSize) {
  const uint8_t* base = static_cast<const uint8_t*>(bufs[static_cast<int>(r.buffer)]);
  if (base == nullptr || count == 0) return Bytes{};
  return Bytes{base + r.offset * elemSize, base + (r.offset + count) * elemSize};
}

// What step `s` writes in the rank's own memory (a copy onto itself writes nothing).
Bytes written(const Step& s, void* const* bufs, size_t elemSize) {
  switch (s.op) {
    case StepOp::kCopy:
    case StepOp::kCopySend: {
      const Bytes d = bytesOf(bufs, s.dst, s.count, elemSize);
      return d == bytesOf(bufs, s.src, s.count, elemSize) ? Bytes{} : d;
    }
    case StepOp::kSendRecv:
    case StepOp::kSendRecvReduce:
      return bytesOf(bufs, s.dst, s.recvCount, elemSize);
    case StepOp::kRecv:
    case StepOp::kRecvReduceCopy:
    case StepOp::kRecvCopySend:
    case StepOp::kRecvReduceCopySend:
    case StepOp::kReduce:
      return bytesOf(bufs, s.dst, s.count, elemSize);
    case StepOp::kSend:
    case StepOp::kRecvReduceSend:
      return Bytes{};
  }
  return Bytes{};
}

// What a receiver would read in place for step `s`, or nothing when it cannot.
Bytes sent(const Step& s, void* const* bufs, size_t elemSize, int divisor) {
  switch (s.op) {
    case StepOp::kSend:
    case StepOp::kCopySend:
    case StepOp::kSendRecv:
    case StepOp::kSendRecvReduce:
      return s.src.buffer == Buffer::kScratch ? Bytes{} : bytesOf(bufs, s.src, s.count, elemSize);
    case StepOp::kRecvCopySend:
      // It forwards what it received; with avg's division what it wrote differs.
      if (s.finalize && divisor > 0) return Bytes{};
      return s.dst.buffer == Buffer::kScratch ? Bytes{} : bytesOf(bufs, s.dst, s.count, elemSize);
    case StepOp::kRecvReduceCopySend:
      return s.dst.buffer == Buffer::kScratch ? Bytes{} : bytesOf(bufs, s.dst, s.count, elemSize);
    default:
      return Bytes{};  // kRecvReduceSend keeps its sum in registers only: it must go through a slot
  }
}

}  // namespace

bool markDirectSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                     const std::vector<bool>& inProcess, uint64_t minBytes, std::vector<uint8_t>* marks) {
  const size_t n = p.steps.size();
  marks->assign(n, 0);
  // Every call of a communicator with peers in the process comes here: small ones leave before any other work.
  bool large = false;
  for (size_t i = 0; i < n && !large; ++i) large = p.steps[i].count * elemSize >= minBytes;
  if (!large) return false;
  bool any = false;
  std::vector<Bytes> writes(n);
  for (size_t i = 0; i < n; ++i) writes[i] = written(p.steps[i], bufs, elemSize);
  for (size_t i = 0; i < n; ++i) {
    const Step& s = p.steps[i];
    if (!stepSends(s.op) || s.sendPeer < 0 || static_cast<size_t>(s.sendPeer) >= inProcess.size() ||
        !inProcess[static_cast<size_t>(s.sendPeer)] || s.count * elemSize < minBytes)
      continue;
    const Bytes out = sent(s, bufs, elemSize, divisor);
    if (out.empty()) continue;
    // The step's own write is the data it sends for the forwarding kinds; an exchange or a copy elsewhere must
    // not land on it.
    const bool forwards = s.op == StepOp::kRecvCopySend || s.op == StepOp::kRecvReduceCopySend;
    bool stable = forwards || !out.overlaps(writes[i]);
    for (size_t j = i + 1; stable && j < n; ++j) stable = !out.overlaps(writes[j]);
    (*marks)[i] = stable ? 1 : 0;
    any = any || stable;
  }
  return any;
}

Status readDirectReadBytes(int64_t* out) {
  bool bad = false;
  *out = env::getInt("COLLIE_DIRECT_READ_BYTES", 131072, &bad);
  if (bad)
    return Status::error(collieInvalidArgument,
                         "COLLIE_DIRECT_READ_BYTES must be a whole number of bytes (0: every send; negative: none)");
  return Status();
}

}  // namespace collie
