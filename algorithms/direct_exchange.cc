#include "algorithms/direct_exchange.h"

namespace collie {

uint64_t appendDirectReduce(int n, int r, Buffer input, const std::vector<Chunk>& parts, Range result,
                            std::vector<Step>* steps) {
  const Chunk& own = parts[static_cast<size_t>(r)];
  const Range ownInput{input, own.offset};
  // Scratch block of source rank j's contribution. Rank 0 keeps its own in the
  // input (it is reduced first, before the result is written), so its blocks start at rank 1.
  const int first = r == 0 ? 1 : 0;
  auto block = [&](int j) { return Range{Buffer::kScratch, static_cast<uint64_t>(j - first) * own.count}; };
  auto source = [&](int j) { return j == r && r == 0 ? ownInput : block(j); };
  if (r > 0) steps->push_back(makeStep(StepOp::kCopy, -1, -1, ownInput, block(r), own.count, false));
  for (int k = 1; k < n; ++k) {
    const int to = wrapRank(r + k, n), from = wrapRank(r - k, n);
    const Chunk& theirs = parts[static_cast<size_t>(to)];
    steps->push_back(
        exchangeStep(StepOp::kSendRecv, to, from, Range{input, theirs.offset}, theirs.count, block(from), own.count));
  }
  steps->push_back(makeStep(StepOp::kCopy, -1, -1, source(0), result, own.count, n == 1));
  for (int j = 1; j < n; ++j)
    steps->push_back(makeStep(StepOp::kReduce, -1, -1, source(j), result, own.count, j == n - 1));
  return static_cast<uint64_t>(n - first) * own.count;
}

void appendJoinedReduce(int n, int r, Buffer input, const std::vector<Chunk>& parts, Range result,
                        std::vector<Step>* steps) {
  const Chunk& own = parts[static_cast<size_t>(r)];
  steps->push_back(makeStep(StepOp::kCopy, -1, -1, Range{input, own.offset}, result, own.count, n == 1));
  for (int k = 1; k < n; ++k) {
    const int to = wrapRank(r + k, n), from = wrapRank(r - k, n);
    const Chunk& theirs = parts[static_cast<size_t>(to)];
    Step s =
        exchangeStep(StepOp::kSendRecvReduce, to, from, Range{input, theirs.offset}, theirs.count, result, own.count);
    // A new group every kMaxJoinedSteps steps, headed by an exchange that joins nothing.
    s.joined = k % kMaxJoinedSteps != 0;
    s.finalize = k == n - 1;
    steps->push_back(s);
  }
}

void appendDirectAllGather(int n, int r, const std::vector<Chunk>& chunks, Buffer buffer, std::vector<Step>* steps) {
  const Chunk& mine = chunks[static_cast<size_t>(r)];
  for (int k = 1; k < n; ++k) {
    const int to = wrapRank(r + k, n), from = wrapRank(r - k, n);
    const Chunk& theirs = chunks[static_cast<size_t>(from)];
    steps->push_back(exchangeStep(StepOp::kSendRecv, to, from, Range{buffer, mine.offset}, mine.count,
                                  Range{buffer, theirs.offset}, theirs.count));
  }
}

}  // namespace collie
