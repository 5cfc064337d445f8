#include "algorithms/memory_traffic.h"

namespace collie {

namespace {

// A local copy whose source and destination are one address (in place): both executors skip it
// (kernels' BlockMoves::copy, the host's copyElements), so it costs no traffic.
bool copiesOntoItself(const Step& s, bool inPlace, int64_t outputShift) {
  if (s.src.buffer == s.dst.buffer) return s.src.offset == s.dst.offset;
  if (!inPlace) return false;
  // Input offset i is output offset i - outputShift.
  const int64_t src = static_cast<int64_t>(s.src.offset), dst = static_cast<int64_t>(s.dst.offset);
  if (s.src.buffer == Buffer::kInput && s.dst.buffer == Buffer::kOutput) return src - outputShift == dst;
  if (s.src.buffer == Buffer::kOutput && s.dst.buffer == Buffer::kInput) return dst - outputShift == src;
  return false;
}

// A step whose send the receiver reads in place (the step runner's `inPlace`): the send writes no slot and
// reads nothing; what the step writes for itself, and its receive, cost as before.
uint64_t directStepElems(const Step& s, bool inPlace, int64_t outputShift) {
  const uint64_t c = s.count, rc = s.recvCount;
  switch (s.op) {
    case StepOp::kRecvCopySend:
      return 2 * c;  // the slot read, dst written; the next peer reads dst
    case StepOp::kRecvReduceCopySend:
      return 3 * c;  // the slot and src read, dst written
    case StepOp::kCopySend:
      return copiesOntoItself(s, inPlace, outputShift) ? 0 : 2 * c;
    case StepOp::kSendRecv:
      return 2 * rc;
    case StepOp::kSendRecvReduce:
      return 3 * rc;
    default:
      return 0;  // kSend; markDirectSends marks no other kind
  }
}

}  // namespace

uint64_t memoryTrafficElems(const Program& p, bool inPlace, int64_t outputShift, const std::vector<uint8_t>* direct) {
  uint64_t elems = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    const uint64_t c = s.count, rc = s.recvCount;
    const bool marked = direct != nullptr && i < direct->size() && (*direct)[i] != 0;
    if (s.joined) {  // its receive read once; the group's head reads and writes dst for all
      elems += (marked ? 0 : 2 * c) + rc;
      continue;
    }
    if (s.op == StepOp::kCopy && i + 1 < p.steps.size() && p.steps[i + 1].joined) {
      elems += 2 * c;  // the group's one read of the copy's source and one write of dst, even onto itself
      continue;
    }
    if (marked) {
      elems += directStepElems(s, inPlace, outputShift);
      continue;
    }
    switch (s.op) {
      case StepOp::kSend:
      case StepOp::kRecv:
        elems += 2 * c;
        break;
      case StepOp::kRecvReduceSend:
      case StepOp::kRecvReduceCopy:
      case StepOp::kRecvCopySend:
      case StepOp::kReduce:
        elems += 3 * c;
        break;
      case StepOp::kRecvReduceCopySend:
        elems += 4 * c;  // the slot and src read, dst and the peer's slot written
        break;
      case StepOp::kCopy:
        if (!copiesOntoItself(s, inPlace, outputShift)) elems += 2 * c;
        break;
      case StepOp::kCopySend:  // src read, the peer's slot written, and dst unless it is src
        elems += copiesOntoItself(s, inPlace, outputShift) ? 2 * c : 3 * c;
        break;
      case StepOp::kSendRecv:
        elems += 2 * c + 2 * rc;
        break;
      case StepOp::kSendRecvReduce:
        elems += 2 * c + 3 * rc;
        break;
      case StepOp::kPutPeer:  // src read, the peer's dst written
        elems += 2 * c;
        break;
      case StepOp::kReducePeers:  // each rank's src read, dst written once
        elems += (static_cast<uint64_t>(s.peerCount > 0 ? s.peerCount : 0) + 1) * c;
        break;
      case StepOp::kBarrier:
        break;
    }
  }
  return elems;
}

}  // namespace collie
