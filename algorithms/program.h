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

/// Which user buffer a range lives in.
enum class Buffer : uint8_t { kInput, kOutput };

/// What a step does. "recv" always means: wait for the next slices from recvPeer.
enum class StepOp : uint8_t {
  kSend,            // src -> sendPeer
  kRecv,            // recvPeer -> dst
  kRecvReduceSend,  // (recvPeer (op) src) -> sendPeer
  kRecvReduceCopy,  // (recvPeer (op) src) -> dst
  kRecvCopySend,    // recvPeer -> dst and -> sendPeer
  kCopy,            // src -> dst, local
};

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
  Range src;              // read by kSend, kRecvReduce*, kCopy
  Range dst;              // written by kRecv, kRecvReduceCopy, kRecvCopySend, kCopy
  uint64_t count = 0;     // elements moved by this step; 0 makes the step a no-op on both sides
  bool finalize = false;  // the write to dst completes the reduction: apply avg's division there
};

struct Program {
  Collective collective = Collective::kAllReduce;
  std::string algorithm;  // registry name, e.g. "ring"
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;   // the collective's count argument (elements; per-rank block for reduce-scatter/allgather)
  uint64_t stride = 0;  // distance between rank blocks (see ProgramArgs); equals count when not run in rounds
  int root = 0;         // broadcast and reduce
  std::vector<Step> steps;

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

/// Elements of the input and output buffers a rank of `c` uses, for `nranks`
/// ranks and the collective's `count` (with rank blocks `stride` apart).
void bufferCounts(Collective c, int nranks, uint64_t count, uint64_t stride, uint64_t* input, uint64_t* output);

}  // namespace collie
