#include "algorithms/program.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace collie {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "allreduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllGather:
      return "allgather";
    case Collective::kReduceScatter:
      return "reducescatter";
    case Collective::kAllToAll:
      return "alltoall";
    case Collective::kAllToAllv:
      return "alltoallv";
    case Collective::kGather:
      return "gather";
    case Collective::kScatter:
      return "scatter";
    case Collective::kSendRecv:
      return "sendrecv";
    case Collective::kBarrier:
      return "barrier";
  }
  return "?";
}

const char* stepOpName(StepOp op) {
  switch (op) {
    case StepOp::kSend:
      return "send";
    case StepOp::kRecv:
      return "recv";
    case StepOp::kRecvReduceSend:
      return "recvReduceSend";
    case StepOp::kRecvReduceCopy:
      return "recvReduceCopy";
    case StepOp::kRecvCopySend:
      return "recvCopySend";
    case StepOp::kRecvReduceCopySend:
      return "recvReduceCopySend";
    case StepOp::kCopySend:
      return "copySend";
    case StepOp::kCopy:
      return "copy";
    case StepOp::kSendRecv:
      return "sendRecv";
    case StepOp::kSendRecvReduce:
      return "sendRecvReduce";
    case StepOp::kReduce:
      return "reduce";
    case StepOp::kPutPeer:
      return "putPeer";
    case StepOp::kReducePeers:
      return "reducePeers";
    case StepOp::kBarrier:
      return "barrier";
  }
  return "?";
}

static const char* bufferName(Buffer b) { return b == Buffer::kInput ? "in" : (b == Buffer::kOutput ? "out" : "tmp"); }

// A direct step's line: which rank's memory each range lies in, since a put writes a peer's buffer and a reduce
// reads several ranks'; a barrier names the epoch it ends.
static void describeDirect(const Step& s, size_t i, int* epoch, char* line, size_t size) {
  const unsigned long long src = s.src.offset, dst = s.dst.offset, n = s.count;
  const char* fin = s.finalize ? " final" : "";
  switch (s.op) {
    case StepOp::kPutPeer:
      if (s.peerDispl)
        snprintf(line, size, "  %2zu %-15s %s[%llu] -> rank %d %s[its displ for this rank + %llu] n=%llu%s\n", i,
                 stepOpName(s.op), bufferName(s.src.buffer), src, s.sendPeer, bufferName(s.dst.buffer), dst, n, fin);
      else
        snprintf(line, size, "  %2zu %-15s %s[%llu] -> rank %d %s[%llu] n=%llu%s\n", i, stepOpName(s.op),
                 bufferName(s.src.buffer), src, s.sendPeer, bufferName(s.dst.buffer), dst, n, fin);
      break;
    case StepOp::kReducePeers:
      snprintf(line, size, "  %2zu %-15s ranks %d..%d %s[%llu] -> %s[%llu] n=%llu%s\n", i, stepOpName(s.op), s.recvPeer,
               s.recvPeer + s.peerCount - 1, bufferName(s.src.buffer), src, bufferName(s.dst.buffer), dst, n, fin);
      break;
    default:
      snprintf(line, size, "  %2zu %-15s ---- end of epoch %d ----\n", i, stepOpName(s.op), (*epoch)++);
      break;
  }
}

std::string Program::describe() const {
  std::string out;
  char line[256];
  snprintf(line, sizeof(line), "%s %s nranks=%d rank=%d count=%llu steps=%zu\n", algorithm.c_str(),
           collectiveName(collective), nranks, rank, static_cast<unsigned long long>(count), steps.size());
  out += line;
  int epoch = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    if (stepIsDirect(s.op)) {
      describeDirect(s, i, &epoch, line, sizeof(line));
      out += line;
      continue;
    }
    snprintf(line, sizeof(line), "  %2zu %-15s send->%-3d recv<-%-3d src=%s[%llu] dst=%s[%llu] n=%llu%s%s\n", i,
             stepOpName(s.op), s.sendPeer, s.recvPeer, bufferName(s.src.buffer),
             static_cast<unsigned long long>(s.src.offset), bufferName(s.dst.buffer),
             static_cast<unsigned long long>(s.dst.offset), static_cast<unsigned long long>(s.count),
             s.finalize ? " final" : "", s.joined ? " joined" : "");
    if (stepIsExchange(s.op)) {
      line[strlen(line) - 1] = '\0';  // the receive count goes on the same line
      snprintf(line + strlen(line), sizeof(line) - strlen(line), " recvN=%llu\n",
               static_cast<unsigned long long>(s.recvCount));
    }
    out += line;
  }
  return out;
}

bool sameSteps(const std::vector<Step>& a, const std::vector<Step>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Step &x = a[i], &y = b[i];
    if (x.op != y.op || x.sendPeer != y.sendPeer || x.recvPeer != y.recvPeer || x.src.buffer != y.src.buffer ||
        x.src.offset != y.src.offset || x.dst.buffer != y.dst.buffer || x.dst.offset != y.dst.offset ||
        x.count != y.count || x.recvCount != y.recvCount || x.finalize != y.finalize || x.joined != y.joined ||
        x.peerCount != y.peerCount || x.peerDispl != y.peerDispl)
      return false;
  }
  return true;
}

Step makeStep(StepOp op, int sendPeer, int recvPeer, Range src, Range dst, uint64_t count, bool finalize) {
  Step s;
  s.op = op;
  s.sendPeer = sendPeer;
  s.recvPeer = recvPeer;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.finalize = finalize;
  return s;
}

Step putPeerStep(int peer, Range src, Range dst, uint64_t count, bool finalize) {
  return makeStep(StepOp::kPutPeer, peer, -1, src, dst, count, finalize);
}

Step putPeerBlockStep(int peer, Range src, uint64_t count) {
  Step s = makeStep(StepOp::kPutPeer, peer, -1, src, Range{Buffer::kOutput, 0}, count);
  s.peerDispl = true;
  return s;
}

Step reducePeersStep(int first, int ranks, Range src, Range dst, uint64_t count, bool finalize) {
  Step s = makeStep(StepOp::kReducePeers, -1, first, src, dst, count, finalize);
  s.peerCount = ranks;
  return s;
}

Step barrierStep() { return makeStep(StepOp::kBarrier, -1, -1, Range{}, Range{}, 0); }

bool hasDirectSteps(const Program& p) {
  for (const Step& s : p.steps)
    if (stepIsDirect(s.op)) return true;
  return false;
}

Step exchangeStep(StepOp op, int to, int from, Range src, uint64_t count, Range dst, uint64_t recvCount) {
  Step s = makeStep(op, to, from, src, dst, count);
  s.recvCount = recvCount;
  return s;
}

void renumberPeers(std::vector<Step>* steps, size_t from, int first, int step) {
  for (size_t i = from; i < steps->size(); ++i) {
    Step& s = (*steps)[i];
    if (s.sendPeer >= 0) s.sendPeer = first + s.sendPeer * step;
    if (s.recvPeer >= 0) s.recvPeer = first + s.recvPeer * step;
  }
}

void appendForwarding(const Step& s, std::vector<Step>* steps) {
  if (s.op == StepOp::kSend && !steps->empty()) {
    Step& last = steps->back();
    const bool same = last.dst.buffer == s.src.buffer && last.dst.offset == s.src.offset && last.count == s.count;
    if (same && last.op == StepOp::kRecv) {
      last.op = StepOp::kRecvCopySend;
      last.sendPeer = s.sendPeer;
      return;
    }
    if (same && last.op == StepOp::kRecvReduceCopy && last.dst.buffer == Buffer::kScratch) {
      last.op = StepOp::kRecvReduceSend;
      last.sendPeer = s.sendPeer;
      last.dst = Range{};
      return;
    }
    if (same && last.op == StepOp::kRecvReduceCopy) {
      last.op = StepOp::kRecvReduceCopySend;
      last.sendPeer = s.sendPeer;
      return;
    }
    if (same && last.op == StepOp::kCopy) {
      last.op = StepOp::kCopySend;
      last.sendPeer = s.sendPeer;
      return;
    }
  }
  steps->push_back(s);
}

Chunk balancedChunk(uint64_t count, int parts, int index) {
  const uint64_t base = count / static_cast<uint64_t>(parts);
  const uint64_t extra = count % static_cast<uint64_t>(parts);
  const uint64_t i = static_cast<uint64_t>(index);
  return Chunk{base * i + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

void bufferCounts(const Program& p, uint64_t* input, uint64_t* output) {
  const uint64_t count = p.count, stride = p.stride ? p.stride : p.count;
  const uint64_t blocks = (static_cast<uint64_t>(p.nranks) - 1) * stride + count;  // last block may be short
  const bool root = p.rank == p.root;
  *input = count;
  *output = count;
  switch (p.collective) {
    case Collective::kReduceScatter:
      *input = blocks;
      break;
    case Collective::kAllGather:
      *output = blocks;
      break;
    case Collective::kAllToAll:
      *input = *output = blocks;
      break;
    case Collective::kBroadcast:
      if (!root) *input = 0;
      break;
    case Collective::kReduce:
      if (!root) *output = 0;
      break;
    case Collective::kGather:
      *output = root ? blocks : 0;
      break;
    case Collective::kScatter:
      *input = root ? blocks : 0;
      break;
    case Collective::kAllToAllv:
      *input = *output = 0;
      // A peer with nothing to exchange may carry any displacement.
      for (size_t j = 0; j < p.sendCounts.size(); ++j)
        if (p.sendCounts[j]) *input = std::max(*input, p.sendDispls[j] + p.sendCounts[j]);
      for (size_t j = 0; j < p.recvCounts.size(); ++j)
        if (p.recvCounts[j]) *output = std::max(*output, p.recvDispls[j] + p.recvCounts[j]);
      break;
    default:
      break;
  }
}

}  // namespace collie
