#include "algorithms/program.h"

#include <cstdio>

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
    case StepOp::kCopy:
      return "copy";
  }
  return "?";
}

static const char* bufferName(Buffer b) { return b == Buffer::kInput ? "in" : "out"; }

std::string Program::describe() const {
  std::string out;
  char line[256];
  snprintf(line, sizeof(line), "%s %s nranks=%d rank=%d count=%llu steps=%zu\n", algorithm.c_str(),
           collectiveName(collective), nranks, rank, static_cast<unsigned long long>(count), steps.size());
  out += line;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    snprintf(line, sizeof(line), "  %2zu %-15s send->%-3d recv<-%-3d src=%s[%llu] dst=%s[%llu] n=%llu%s\n", i,
             stepOpName(s.op), s.sendPeer, s.recvPeer, bufferName(s.src.buffer),
             static_cast<unsigned long long>(s.src.offset), bufferName(s.dst.buffer),
             static_cast<unsigned long long>(s.dst.offset), static_cast<unsigned long long>(s.count),
             s.finalize ? " final" : "");
    out += line;
  }
  return out;
}

Chunk balancedChunk(uint64_t count, int parts, int index) {
  const uint64_t base = count / static_cast<uint64_t>(parts);
  const uint64_t extra = count % static_cast<uint64_t>(parts);
  const uint64_t i = static_cast<uint64_t>(index);
  return Chunk{base * i + (i < extra ? i : extra), base + (i < extra ? 1 : 0)};
}

void bufferCounts(Collective c, int nranks, uint64_t count, uint64_t stride, uint64_t* input, uint64_t* output) {
  const uint64_t blocks = (static_cast<uint64_t>(nranks) - 1) * stride + count;  // last block may be short
  *input = count;
  *output = count;
  if (c == Collective::kReduceScatter) *input = blocks;
  if (c == Collective::kAllGather) *output = blocks;
}

}  // namespace collie
