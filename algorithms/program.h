// Program: an algorithm as data. For one rank of one collective call it is a
// short list of steps, each naming the peer(s) it talks to and the element
// ranges it reads and writes. No CUDA, no sockets, no clocks: executors run
// programs, tests and (later) the verifier and simulator read them.
//
// A rank's steps run in order; a step that receives waits for the matching send
// of its peer, which is the only dependency between ranks. The program's size
// is O(steps), independent of the byte count: executors move each step's range
// in slices of their slot size, and slices of consecutive steps overlap through
// the slot FIFO, so pipelining is a loop inside the executor, not more steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define COLLIE_PROGRAM_HD __host__ __device__ inline
#else
#define COLLIE_PROGRAM_HD inline
#endif

namespace collie {

enum class Collective : uint8_t {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kAllToAllv,
  kGather,
  kScatter,
  kSendRecv,
  kBarrier,
};

const char* collectiveName(Collective c);

/// Which buffer a range lives in: the user's two, or the executor's per-rank
/// scratch (Program::scratchCount elements; for partial results a rank has no
/// user buffer for, e.g. the inner nodes of a binomial reduce).
enum class Buffer : uint8_t { kInput, kOutput, kScratch };

/// What a step does. "recv" always means: wait for the next slices from recvPeer.
enum class StepOp : uint8_t {
  kSend,                // src -> sendPeer
  kRecv,                // recvPeer -> dst
  kRecvReduceSend,      // (recvPeer (op) src) -> sendPeer
  kRecvReduceCopy,      // (recvPeer (op) src) -> dst
  kRecvCopySend,        // recvPeer -> dst and -> sendPeer
  kCopy,                // src -> dst, local
  kSendRecv,            // src -> sendPeer (count) while recvPeer -> dst (recvCount), both directions at once
  kSendRecvReduce,      // src -> sendPeer (count) while (recvPeer (op) dst) -> dst (recvCount)
  kReduce,              // (dst (op) src) -> dst, local
  kRecvReduceCopySend,  // (recvPeer (op) src) -> dst and -> sendPeer: what was just completed goes on at once
  kCopySend,            // src -> dst, local, and -> sendPeer: a block put in place and sent from one read
  // Direct steps, for ranks that map each other's buffers (see "Direct steps" below): no slots, no messages.
  kPutPeer,      // src -> rank sendPeer's dst: a store into the peer's own buffer
  kReducePeers,  // dst = src of ranks recvPeer .. recvPeer + peerCount - 1, reduced in ascending rank order
  kBarrier,      // waits until every rank of the communicator has reached its barrier of the same number
};

/// Which parts of a step talk to peers. The two kSendRecv ops progress their
/// send and their receive independently (an exchange: neither side waits for the
/// other's data), so a pairwise exchange of any size cannot deadlock; the
/// kRecv*Send ops forward what they receive, slice by slice.
// The step kinds' shapes; inline and callable from device code because the
// CUDA kernels run the same step sequencing as the host (executor/step_runner.h).
COLLIE_PROGRAM_HD bool stepSends(StepOp op) {
  return op == StepOp::kSend || op == StepOp::kRecvReduceSend || op == StepOp::kRecvCopySend ||
         op == StepOp::kRecvReduceCopySend || op == StepOp::kCopySend || op == StepOp::kSendRecv ||
         op == StepOp::kSendRecvReduce;
}
/// Direct steps (see "Direct steps" below) neither send nor receive through slots.
COLLIE_PROGRAM_HD bool stepIsDirect(StepOp op) {
  return op == StepOp::kPutPeer || op == StepOp::kReducePeers || op == StepOp::kBarrier;
}
COLLIE_PROGRAM_HD bool stepReceives(StepOp op) {
  return op != StepOp::kSend && op != StepOp::kCopy && op != StepOp::kReduce && op != StepOp::kCopySend &&
         !stepIsDirect(op);
}
COLLIE_PROGRAM_HD bool stepIsExchange(StepOp op) { return op == StepOp::kSendRecv || op == StepOp::kSendRecvReduce; }

const char* stepOpName(StepOp op);

/// A contiguous range of elements of one buffer.
struct Range {
  Buffer buffer = Buffer::kInput;
  uint64_t offset = 0;  // elements
};

struct Step {
  StepOp op = StepOp::kCopy;
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  // kReducePeers only: how many ranks it reads, recvPeer and up. It fills what would be padding before src, so a
  // Step stays 72 bytes (the kernel's launch carries kInlineSteps of them in 4 KiB), and a rank range, unlike a
  // 64-bit mask, holds any number of ranks (the simulator goes to 512).
  int32_t peerCount = 0;
  Range src;  // read by kSend, kRecvReduce*, kCopy, kCopySend, kPutPeer, and on every rank it reads by kReducePeers
  Range dst;  // written by kRecv, kRecvReduceCopy, kRecvCopySend, kRecvReduceCopySend, kCopy, kCopySend, kReduce,
              // kReducePeers; kPutPeer writes it in rank sendPeer's memory
  uint64_t count = 0;      // elements moved by this step (sent, for the kSendRecv ops)
  uint64_t recvCount = 0;  // kSendRecv ops only: elements received
  bool finalize = false;   // the write to dst completes the reduction: apply avg's division there
  bool joined = false;     // runs together with the step before it: see "Joined steps" below
  // kPutPeer only: dst.offset counts from where rank sendPeer receives this rank's block, its recvDispls[rank]
  // (all-to-all-v), which only that rank knows: executors learn it from the peer as the call runs.
  bool peerDispl = false;

  /// Elements this step receives from recvPeer.
  uint64_t received() const { return stepIsExchange(op) ? recvCount : (stepReceives(op) ? count : 0); }
  /// Elements this step sends to sendPeer.
  uint64_t sent() const { return stepSends(op) ? count : 0; }
};
static_assert(sizeof(Step) <= 72, "peerCount must fill padding: the kernel's launch carries kInlineSteps Steps");

/// Direct steps. Where ranks map each other's buffers (threads of one process, registered or pooled memory
/// across processes), a rank loads and stores its peers' input, output and scratch itself: kPutPeer stores its
/// src range into rank sendPeer's dst range; kReducePeers reduces the same src range of the ranks recvPeer ..
/// recvPeer + peerCount - 1 into its own dst, always in ascending rank order, (((x_lo op x_lo+1) op ...), so every
/// rank that reduces a range gets the same bits; with one rank it is a copy from that rank's buffer. kBarrier
/// waits until every rank has reached the barrier of the same number. A direct program is a sequence of epochs
/// separated by barriers, made of direct steps and local kCopy and kReduce steps only; within an epoch the ranks
/// run at once, in no order. What makes one correct (algorithms/verifier.h proves it): no two ranks write an
/// element in one epoch, no rank reads an element another writes in that epoch, every access lies inside its
/// buffer, every rank has as many barriers as the others, and no rank reaches a peer's buffer before the first
/// barrier (the peer may not have entered the call) or after the last (it may have returned).
/// Only executors whose ranks map each other's buffers run direct steps; the others refuse such programs
/// (AlgorithmInfo::mapsPeers). The slot step runner never sees one.

/// Joined steps. A kSendRecvReduce step marked `joined` runs together with the
/// step before it, and that one with its own predecessor while it is joined too:
/// a group of one head (a kCopy or a kSendRecvReduce) and up to
/// kMaxJoinedSteps - 1 joined kSendRecvReduce steps, all writing the same dst
/// range (the head's count, the others' recvCount), receiving from distinct
/// peers, only the last one finalizing. Its values are those of the steps run
/// one after another, dst = (((head) (op) in1) (op) in2) ...; an executor whose
/// primitives can (Simple on the GPU, the host) runs it as one step instead:
/// every send progresses on its own, and each slice of dst is reduced from the
/// head's source and all the receives in one pass, read once and written once,
/// not once per step. The receives' slices are handed back only when the last
/// of them has arrived, which the verifier checks cannot deadlock. It is what
/// lets a two-shot allreduce reduce n inputs in (n+1) passes over its chunk
/// instead of 3(n-1) (algorithms/allreduce_twoshot.cc).
constexpr int kMaxJoinedSteps = 8;

/// The elements of the range a group of joined steps headed by `head` writes: a copy's count, an exchange's
/// receive count.
COLLIE_PROGRAM_HD uint64_t joinedGroupCount(const Step& head) {
  return head.op == StepOp::kCopy ? head.count : head.recvCount;
}

/// One past the last step of the group that starts at `head` (head + 1 when none joins it).
COLLIE_PROGRAM_HD int joinedGroupEnd(const Step* steps, int nsteps, int head) {
  int end = head + 1;
  while (end < nsteps && steps[end].joined) ++end;
  return end;
}

/// Exchange groups. Consecutive kSendRecv steps, at most kMaxBatchedExchanges, no two sending to or receiving
/// from the same peer, form a group; a program is cut into groups greedily from its first step (a step that
/// starts none is a group of one). An executor may run any consecutive steps of one group as a batch, every send
/// of the batch going out before any receive is waited for (executor/step_runner.h, exchangeBatchEnd, which
/// also asks that each moves at most a slice and that none receives into what another sends or receives). So
/// a group's steps may all start when the group does, and whatever reasons about the ranks' causal order
/// (executor/direct_sends.h, readOrderFrom) must take them so. Nothing in the program marks a group: the rule
/// is the steps' own shape.
constexpr int kMaxBatchedExchanges = 8;

/// One past the last step of the exchange group that starts at `head` (head + 1 when it is not a kSendRecv).
COLLIE_PROGRAM_HD int exchangeGroupEnd(const Step* steps, int nsteps, int head) {
  if (steps[head].op != StepOp::kSendRecv) return head + 1;
  int end = head + 1;
  for (; end < nsteps && end - head < kMaxBatchedExchanges && steps[end].op == StepOp::kSendRecv; ++end) {
    bool apart = true;
    for (int j = head; j < end && apart; ++j)
      apart = steps[end].sendPeer != steps[j].sendPeer && steps[end].recvPeer != steps[j].recvPeer;
    if (!apart) break;
  }
  return end;
}

/// An address range [lo, hi) in bytes; empty when lo == hi. ByteSpan{} is empty. No default member values, so
/// that cutExchangeBatch's arrays are not zeroed (it says why).
struct ByteSpan {
  uintptr_t lo, hi;
};

COLLIE_PROGRAM_HD bool spansOverlap(const ByteSpan& a, const ByteSpan& b) {
  return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/// The one rule of which steps of an exchange group run as a batch, for the step runner (executor/step_runner.h,
/// exchangeBatchEnd) and the verifier, which must cut batches alike for its proofs to hold of what runs. One
/// past the last step of the batch that starts at `head`, within the group that ends at `groupEnd`. A batch is
/// the longest run of steps from `head` of which `spansOf(i, &src, &dst)` gives each step's ranges (false when
/// a step moves more than a slice either way: it keeps its own turn) and none receives into what another sends
/// or receives. Why a step larger than a slice does not join is in exchangeBatchEnd.
template <typename SpansOf>
COLLIE_PROGRAM_HD int cutExchangeBatch(int head, int groupEnd, SpansOf spansOf) {
  if (groupEnd - head < 2) return head + 1;
  // Entry k is written by spansOf before any loop reads it. In a kernel every thread runs this at each exchange
  // step, with the arrays in its local memory: zeroed, they would cost each of a block's threads 16 stores of 16
  // bytes a step, a lone exchange included.
  ByteSpan src[kMaxBatchedExchanges], dst[kMaxBatchedExchanges];
  if (!spansOf(head, &src[0], &dst[0])) return head + 1;
  int end = head + 1;
  for (; end < groupEnd; ++end) {
    const int k = end - head;  // < kMaxBatchedExchanges: a group is never longer
    if (!spansOf(end, &src[k], &dst[k])) break;
    bool apart = true;
    for (int j = 0; j < k && apart; ++j)
      apart = !spansOverlap(dst[k], src[j]) && !spansOverlap(dst[k], dst[j]) && !spansOverlap(src[k], dst[j]);
    if (!apart) break;
  }
  return end;
}

struct Program {
  Collective collective = Collective::kAllReduce;
  std::string algorithm;  // registry name, e.g. "ring"
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;         // the collective's count argument (elements; per-rank block for reduce-scatter/allgather)
  uint64_t stride = 0;        // distance between rank blocks (see ProgramArgs); equals count when not run in rounds
  int root = 0;               // rooted collectives
  uint64_t scratchCount = 0;  // elements of Buffer::kScratch this rank's steps use
  std::vector<Step> steps;

  /// All-to-all-v only: this rank's counts and displacements per peer (elements),
  /// as the caller gave them. The verifier reads every rank's to check delivery.
  std::vector<uint64_t> sendCounts, sendDispls, recvCounts, recvDispls;

  /// One line per step, for logs, tests and collie-sim.
  std::string describe() const;
};

/// Element range of chunk `index` when `count` elements are cut into `parts`
/// nearly equal chunks (the first count % parts chunks get one more element).
struct Chunk {
  uint64_t offset;
  uint64_t count;
};
Chunk balancedChunk(uint64_t count, int parts, int index);

/// r modulo n in 0..n-1 for any r: ranks around a ring, or renumbered from a root.
inline int wrapRank(int r, int n) { return ((r % n) + n) % n; }

/// Whether two step lists are the same program, field by field: a Step has padding bytes, which two equal
/// programs need not share.
bool sameSteps(const std::vector<Step>& a, const std::vector<Step>& b);

/// A step of any op but the exchanges; peers a step does not use are -1.
Step makeStep(StepOp op, int sendPeer, int recvPeer, Range src, Range dst, uint64_t count, bool finalize = false);

/// kPutPeer: `count` elements of this rank's `src` into rank `peer`'s `dst`.
Step putPeerStep(int peer, Range src, Range dst, uint64_t count, bool finalize = false);
/// kPutPeer of all-to-all-v: `count` elements of this rank's `src` into rank `peer`'s output where that rank
/// receives this rank's block (Step::peerDispl).
Step putPeerBlockStep(int peer, Range src, uint64_t count);
/// kReducePeers: this rank's `dst` = the `src` ranges of ranks first .. first + ranks - 1, reduced in that order.
Step reducePeersStep(int first, int ranks, Range src, Range dst, uint64_t count, bool finalize);
/// kBarrier.
Step barrierStep();

/// Whether `p` holds a direct step (see "Direct steps"): only ranks that map each other's buffers can run it.
bool hasDirectSteps(const Program& p);

/// Steps from index `from` on were built for a group of ranks numbered 0..m-1
/// among themselves (a node, or one rank per node): renumbers their peers to
/// the communicator's ranks, group rank g being `first + g * step`. A kReducePeers
/// step's ranks stay a range only when `step` is 1 (the ranks of one node).
void renumberPeers(std::vector<Step>* steps, size_t from, int first, int step);

/// Appends `s`; a send of exactly what the previous step just wrote into the
/// same place becomes part of that step, which then sends from the read that
/// wrote it, slice by slice: a receive becomes kRecvCopySend, a receive-reduce
/// into scratch kRecvReduceSend (that form writes no output), one into a user
/// buffer kRecvReduceCopySend (which writes it and sends the same values, avg's
/// division included, without reading them back), and a local copy kCopySend.
void appendForwarding(const Step& s, std::vector<Step>* steps);

/// An exchange (kSendRecv or kSendRecvReduce): `count` elements of `src` to
/// rank `to` while `recvCount` elements from rank `from` land in (or reduce into) `dst`.
Step exchangeStep(StepOp op, int to, int from, Range src, uint64_t count, Range dst, uint64_t recvCount);

/// Elements of the input and output buffers the rank running `p` uses (rank
/// blocks `stride` apart). 0 for a buffer the rank does not have
/// (broadcast's input off the root, reduce's and gather's output off it,
/// scatter's input off it): a program must not touch it.
void bufferCounts(const Program& p, uint64_t* input, uint64_t* output);

}  // namespace collie
