#include "algorithms/ring.h"

namespace collie {

std::vector<Chunk> balancedChunks(uint64_t count, int n) {
  std::vector<Chunk> chunks(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) chunks[static_cast<size_t>(c)] = balancedChunk(count, n, c);
  return chunks;
}

std::vector<Chunk> rankBlocks(uint64_t count, uint64_t stride, int n) {
  std::vector<Chunk> blocks(static_cast<size_t>(n));
  for (int c = 0; c < n; ++c) blocks[static_cast<size_t>(c)] = Chunk{static_cast<uint64_t>(c) * stride, count};
  return blocks;
}

void appendRingReduceScatter(int n, int r, const std::vector<Chunk>& chunks, Buffer input, Range result,
                             std::vector<Step>* steps) {
  const Chunk& mine = chunks[static_cast<size_t>(r)];
  if (n == 1) {
    Step copy;
    copy.op = StepOp::kCopy;
    copy.src = Range{input, mine.offset};
    copy.dst = result;
    copy.count = mine.count;
    copy.finalize = true;
    steps->push_back(copy);
    return;
  }
  const int next = wrapRank(r + 1, n), prev = wrapRank(r - 1, n);
  for (int s = 0; s < n; ++s) {
    // At step s this rank sends (or completes) chunk r-s-1; at the last step that is chunk r.
    const Chunk& c = chunks[static_cast<size_t>(wrapRank(r - s - 1, n))];
    Step step;
    step.count = c.count;
    step.src = Range{input, c.offset};
    if (s == 0) {
      step.op = StepOp::kSend;
      step.sendPeer = next;
    } else if (s < n - 1) {
      step.op = StepOp::kRecvReduceSend;
      step.sendPeer = next;
      step.recvPeer = prev;
    } else {
      step.op = StepOp::kRecvReduceCopy;
      step.recvPeer = prev;
      step.dst = result;
      step.finalize = true;
    }
    steps->push_back(step);
  }
}

void appendRingAllGather(int n, int r, const std::vector<Chunk>& chunks, Buffer buffer, std::vector<Step>* steps) {
  if (n == 1) return;
  const int next = wrapRank(r + 1, n), prev = wrapRank(r - 1, n);
  Step first;
  first.op = StepOp::kSend;
  first.sendPeer = next;
  first.src = Range{buffer, chunks[static_cast<size_t>(r)].offset};
  first.count = chunks[static_cast<size_t>(r)].count;
  steps->push_back(first);
  for (int s = 1; s < n; ++s) {
    const Chunk& c = chunks[static_cast<size_t>(wrapRank(r - s, n))];
    Step step;
    step.op = s < n - 1 ? StepOp::kRecvCopySend : StepOp::kRecv;
    step.recvPeer = prev;
    step.sendPeer = s < n - 1 ? next : -1;
    step.dst = Range{buffer, c.offset};
    step.count = c.count;
    steps->push_back(step);
  }
}

}  // namespace collie
