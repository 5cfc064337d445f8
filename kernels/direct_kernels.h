// Host-only interface to the direct kernels (kernels/direct_kernels.cu; bodies in
// kernels/direct_allreduce_block.cuh): hand-written collectives for ranks that map each other's buffers (threads
// of one process, registered or pooled memory across processes). Each rank's kernel loads and stores its peers'
// memory itself: no slots, credits or drain.
//
//   one-shot allreduce   packets of 16 bytes into every peer's scratch, each carrying 8 bytes of data and the
//                        call's number as flags; every rank reduces all n contributions itself (small calls)
//   two-shot allreduce   an entry barrier; rank r reduces its chunk from all n inputs and stores it into all n
//                        outputs; an exit barrier (large calls): every input read once, every output written once
//   reduce-scatter       the same, rank r's chunk into its own output only
//   allgather            the same barriers; rank r stores its input into block r of all n outputs
//   all-to-all           the same barriers; rank r stores block q of its input into block r of rank q's output
//   all-to-all-v         the same, with per-peer counts and displacements: rank q announces where rank r's block
//                        lands in its output, and both announce their counts, which must agree pair by pair
//   broadcast            the same barriers; rank r copies its chunk of the root's input into all n outputs
//
// Every rank reduces in rank order, acc = x0, then acc = x_j (op) acc for j = 1..n-1, each step rounded in the
// element type, as the host executor's one-shot program does (algorithms/direct_exchange.h, appendDirectReduce),
// so the one-shot and two-shot kernels and the host give the same bits; avg divides the sum once at the end.
//
// What the host provides (zeroed when the communicator is set up):
//  * scratch, one-shot only: per rank, directScratchBytes(nranks, slotLines) bytes of device memory its peers can
//    write, laid out [parity 2][sender n][slotLines lines of 16 bytes];
//  * barrier flags, the others: per rank, kDirectBarrierBytes of device memory its peers can write, laid out
//    [block kDirectMaxBlocks][sender kDirectMaxRanks] records of kDirectBarrierRecord bytes: the sender's epoch, and
//    from its entry announcement the addresses of its input and output for the call, the windows they lie in,
//    the call's signature (DirectArgs::signature: a receiver whose call differs refuses it before any move) and,
//    for all-to-all-v, what the sender exchanges with the receiver (where the receiver's block lands in the
//    sender's output, and the two counts);
//  * peers in other processes only: the table through which this rank reaches their windows (DirectPeerMap),
//    written when a window is registered, and the windows of its own input and output;
//  * the rank's own input and output for the call. Its peers' arrive with their entry announcements (the barrier
//    kernels), so a launch needs no peer's buffers from the host: each rank learns them on the device, as the call
//    starts (the one-shot kernel reaches peers only through their scratch);
//  * a DirectError per rank, which the host reads after the call (nonzero code: the call failed; the record stays
//    raised, and every later call of this rank fails at its first wait check, until the host clears it);
//  * a DirectCounter per rank, in device memory only its own launches touch.
// Zero never equals a flag or epoch a call waits for, since calls are numbered from 1.
//
// The call number. A rank's DirectCounter counts the communicator's direct calls, of every kernel, and each launch
// takes the next number on the device: every block reads seq + 1 as it starts, and the launch's last block to end
// stores it back (no block ends before every block has read it). So a launch captured into a CUDA graph numbers its
// replays as launches from the host would be numbered, and calls made either way mix. Every call synchronises
// every pair of ranks, which is what lets the one-shot's two parities of scratch suffice (direct_allreduce_block.cuh,
// "Parities"). Epochs are 64-bit, but the one-shot's line flags hold 32 bits of the number: a line left by a large
// call 2^32 calls before could pass for new, so the one-shot fails a call numbered past kDirectMaxOneShotCalls
// (collieInvalidUsage, peer -1) instead of running it.
//
// Grids. Every rank of a call launches the same number of blocks, all of which must be resident at once, on each
// GPU together with those of the other ranks sharing it: a block spins until its peers' blocks run. The launcher
// caps nothing; directResidentBlocks says how many fit.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "collie.h"
#include "executor/reduce_ops.h"

namespace collie {

constexpr int kDirectMaxRanks = 8;
constexpr int kDirectMaxBlocks = 128;
constexpr int kDirectMaxThreads = 512;
/// One packet line: two 8-byte halves of {4 bytes of data, 4 bytes of flag}.
constexpr uint64_t kDirectLineBytes = 16;
/// Data bytes one line carries.
constexpr uint64_t kDirectLinePayload = 8;
/// One [block][sender] record of a rank's barrier flags: the epoch (8 bytes), the sender's input and output
/// addresses (8 bytes each, written before the entry epoch), the windows they lie in (4 bytes each), the call's
/// signature (8 bytes), and all-to-all-v's exchange with the receiver (4 bytes each: the sender's recvDispl and
/// recvCount for the receiver, its sendCount to it, and 4 unused).
constexpr uint64_t kDirectBarrierRecord = 56;
/// Each rank's barrier flags: [block][sender] records.
constexpr uint64_t kDirectBarrierBytes = uint64_t{kDirectMaxBlocks} * kDirectMaxRanks * kDirectBarrierRecord;
/// Lines of a communicator's one-shot slots (executor/protocol.h, WindowLayout::directSlotLines): one-shot calls of
/// up to 64 KiB per rank; each rank's scratch is then 256 KiB per rank of the communicator.
constexpr uint32_t kDirectSlotLines = 8192;
/// The most bytes per rank one launch moves (a count of elements: times the element size): indices within a
/// launch are 32-bit, and a grid-stride step past the end must not wrap. Larger calls go in several launches.
constexpr uint64_t kDirectMaxBytes = (uint64_t{1} << 31) - 1;

/// COLLIE_KERNEL_TIMING=1: thread 0 of block 0 of each launch adds to DirectArgs::timing, by the GPU's global timer:
/// [0] the launches, [1] ns from its start to its end, [2] ns from its start until every peer had come (the barrier
/// kernels: the end of the entry barrier; the one-shot: its first line from every peer): the launch skew as this
/// rank sees it, plus one hop. The executor logs the means as the communicator goes.
constexpr int kDirectTimingWords = 3;
/// The last call number a one-shot launch runs (its line flags hold 32 bits of it).
constexpr uint64_t kDirectMaxOneShotCalls = 0xffffffffull;

/// Windows a communicator maps for the direct kernels (collieCommWindowRegister): number 0 is the communicator's
/// staging buffer, the copy-in path of buffers outside every window.
constexpr int kDirectMaxWindows = 32;

/// How this rank reaches a peer process's window: an address `a` the peer announces inside it is, here,
/// a - remoteBase + localBase. localBase 0: this rank has not mapped it.
struct DirectPeerMap {
  uint64_t remoteBase = 0;
  uint64_t localBase = 0;
};

/// A rank's direct calls so far, and the blocks of its running launch that have ended (see "The call number").
struct DirectCounter {
  uint64_t seq = 0;
  uint32_t done = 0;
  uint32_t unused = 0;
};

enum class DirectKind : int {
  kOneShotAllReduce = 0,
  kTwoShotAllReduce = 1,
  kReduceScatter = 2,
  kAllGather = 3,
  kAllToAll = 4,
  kBroadcast = 5,
  kAllToAllv = 6,
};
constexpr int kDirectKinds = 7;

/// The kinds that move words and take no operator: a kernel per element size, for every type.
inline bool directMovesWords(DirectKind kind) {
  return kind == DirectKind::kAllGather || kind == DirectKind::kAllToAll || kind == DirectKind::kBroadcast ||
         kind == DirectKind::kAllToAllv;
}
/// The kind whose compiled kernel `kind` launches: the reduce-scatter runs the two-shot's kernel, all-to-all(-v) and
/// broadcast the allgather's (direct_kernels.cu), so their occupancy and loading are the same.
inline DirectKind directKernelKind(DirectKind kind) {
  if (kind == DirectKind::kReduceScatter) return DirectKind::kTwoShotAllReduce;
  return directMovesWords(kind) ? DirectKind::kAllGather : kind;
}
/// Whether a rank's buffer of `kind` holds nranks blocks of the count (reduce-scatter's input, allgather's output,
/// both of all-to-all's): what bounds its indices and sizes its grid. (All-to-all-v's count is its extent.)
inline bool directHoldsBlocks(DirectKind kind) {
  return kind == DirectKind::kReduceScatter || kind == DirectKind::kAllGather || kind == DirectKind::kAllToAll;
}

/// Where a rank's call failed. Written once, by the first of its threads that gives up, and read by the host once
/// the call has finished. `code` is written last (after a system fence): nonzero, the other fields are complete.
struct DirectError {
  uint32_t claimed = 0;  // 1 once a thread took the record (dev::raiseFirst)
  // collieTimeout (a peer never came), collieRemoteError (the abort flag) or collieInvalidUsage (`reason`); 0
  // while healthy
  uint32_t code = 0;
  int32_t rank = -1;   // the rank that gave up
  int32_t peer = -1;   // the rank it was waiting for or refused; -1: none (a one-shot past kDirectMaxOneShotCalls)
  uint64_t call = 0;   // the call's number
  int32_t block = -1;  // the block that gave up
  int32_t reason = 0;  // with collieInvalidUsage: a DirectRefusal
};

/// Why a direct call was refused on the device (DirectError::reason, with collieInvalidUsage).
enum DirectRefusal : int32_t {
  kDirectPastOneShotCalls = 1,  // a one-shot numbered past kDirectMaxOneShotCalls
  kDirectUnmappedWindow = 2,    // `peer` announced a buffer in a window this rank has not mapped
  kDirectCallsDiffer = 3,       // `peer`'s call differs from this rank's (DirectArgs::signature)
  kDirectCountsDiffer = 4,      // all-to-all-v: what `peer` sends this rank, or receives from it, differs in count
};

/// One launch's arguments; the same struct for every kernel and rank count. Pointers are as this rank addresses
/// them (peers' scratch and flags mapped; peers' buffers, learnt at the entry barrier, are addressed as the peer
/// gave them where it is a thread of this process, else through peerMaps), the
/// input and output each already at the call's first element: buffers at any offset are fine, and where every
/// buffer of a call sits at the same address modulo 16 (the common case) the moves go by 16-byte vectors,
/// otherwise element by element. Entries past nranks are ignored.
struct DirectArgs {
  int rank = 0;
  int nranks = 2;
  DirectCounter* counter = nullptr;  // this rank's (see "The call number")
  uint32_t slotLines = 0;            // one-shot: lines of one [parity][sender] slot of scratch
  // allreduce and broadcast: the count; reduce-scatter: each rank's output count (inputs hold nranks x count);
  // allgather: each rank's input count (outputs hold nranks x count); all-to-all: each block's (both hold nranks x);
  // all-to-all-v: the larger of its input's and its output's extents (the bound of every index below)
  uint64_t count = 0;
  int root = 0;                             // broadcast: the rank whose input every output receives
  const void* input = nullptr;              // this rank's
  void* output = nullptr;                   // this rank's
  uint8_t* scratch[kDirectMaxRanks] = {};   // one-shot: every rank's packet scratch
  uint8_t* barriers[kDirectMaxRanks] = {};  // the others: every rank's barrier flags
  const uint32_t* abortFlag = nullptr;      // raised by the host: every wait gives up; null: none
  DirectError* error = nullptr;             // this rank's record (device or mapped host memory)
  uint64_t timeoutNs = 10000000000ull;      // how long one wait may last
  int divisor = 0;                          // avg: nranks (a sum, then one division); else 0
  int gpuScope = 0;  // 1: every rank runs on this GPU, so the barriers' flags are released at GPU scope
  // Peers in other processes (bit p: rank p), whose announced buffers are addressed through peerMaps
  // [window][rank] (device memory, kDirectMaxWindows x kDirectMaxRanks); inWindow and outWindow: the windows this
  // rank's input and output lie in, announced with them (0: the staging buffer). 0 and null where every rank is a
  // thread of this process.
  uint32_t remotePeers = 0;
  uint32_t inWindow = 0;
  uint32_t outWindow = 0;
  const DirectPeerMap* peerMaps = nullptr;
  // One-shot, pre-multiplied sum (Op kSum): each rank multiplies its own input by its own scalar before the sum,
  // read from scalarDevice when not null (when the kernel runs), else from scalarBits' low bytes. The two-shot
  // kernels do not take it: rank r reduces its peers' inputs and has no peer's scalar, so the host scales a copy
  // first, as for the interpreted kernels (core/redop.h).
  int premul = 0;
  uint64_t scalarBits = 0;
  const void* scalarDevice = nullptr;
  uint64_t* timing = nullptr;  // kDirectTimingWords sums (device memory, this rank's launches only); null: untimed
  // The call's collective, type, operator, count, root and algorithm, hashed (executor/protocol.h,
  // launchSignature), announced at the entry barrier: a barrier kernel whose peer's differs refuses the call
  // before any move, since its moves, sized by its own count, would overrun buffers sized by the peer's. 0: not
  // compared (on either side).
  uint64_t signature = 0;
  // All-to-all-v, in elements, by peer: where this rank's block for it starts in its input and its length, and
  // where its block from it lands in its output and its length (32-bit: a launch's indices are, kDirectMaxBytes).
  // The receiver announces its recvDispl and both counts to each sender at the entry barrier; a pair whose counts
  // differ moves nothing between them (kDirectCountsDiffer on both ranks, after the exit barrier).
  uint32_t sendDispl[kDirectMaxRanks] = {};
  uint32_t sendCount[kDirectMaxRanks] = {};
  uint32_t recvDispl[kDirectMaxRanks] = {};
  uint32_t recvCount[kDirectMaxRanks] = {};
};

// Kernel parameters are limited to 4 KiB on every architecture we build for.
static_assert(sizeof(DirectArgs) <= 4096, "DirectArgs must fit the kernel parameter space");
static_assert(std::is_trivially_copyable<DirectArgs>::value, "DirectArgs is a kernel parameter");

/// One launch serving every rank of a one-shot allreduce, where every rank is a thread of this process on this GPU
/// (COLLIE_DIRECT_ONE_LAUNCH; executor/cuda_one_launch.cc): blocks r x blocks .. (r + 1) x blocks - 1 of the grid
/// run rank r's body with args[r], as rank r's own launch of `blocks` blocks would, so the bodies, their waits and
/// their failure reports are the same. Only the one-shot has this form: it serves the small calls, where a launch
/// is most of a call's time; a large call's launch is a small share of it, and a second form of every kernel would
/// double the file's compile time.
struct DirectGroupArgs {
  int nranks = 0;  // args[0 .. nranks - 1], every rank of the call, args[r].rank == r
  int blocks = 0;  // each rank's share of the grid
  DirectArgs args[kDirectMaxRanks];
};
static_assert(sizeof(DirectGroupArgs) <= 4096, "DirectGroupArgs must fit the kernel parameter space");
static_assert(std::is_trivially_copyable<DirectGroupArgs>::value, "DirectGroupArgs is a kernel parameter");

/// Lines a one-shot call of `bytes` bytes per rank sends to each peer: count 0 still sends one, so that every call
/// synchronises every pair of ranks.
COLLIE_HD constexpr uint64_t directLines(uint64_t bytes) {
  return bytes == 0 ? 1 : (bytes + kDirectLinePayload - 1) / kDirectLinePayload;
}
/// Bytes of one rank's one-shot scratch for `nranks` ranks and slots of `slotLines` lines.
COLLIE_HD constexpr uint64_t directScratchBytes(int nranks, uint64_t slotLines) {
  return 2 * static_cast<uint64_t>(nranks) * slotLines * kDirectLineBytes;
}

/// Whether (T, Op) has a kernel per rank count (the types large calls are made of: float, half, bfloat16), or one
/// for up to 8 ranks that loops over the run-time count. See direct_kernels.cu for the compile times behind it.
template <typename T>
struct DirectExactRanks
    : std::integral_constant<bool, std::is_same<T, float>::value || std::is_same<T, __half>::value ||
                                       std::is_same<T, __nv_bfloat16>::value> {};

/// Calls f(std::integral_constant<int, N>{}) for N == n in 2..kDirectMaxRanks; false for any other n.
template <typename F>
bool visitDirectRanks(int n, F&& f) {
  auto pick = [&](auto... ns) { return ((n == decltype(ns)::value ? (f(ns), true) : false) || ...); };
  return pick(std::integral_constant<int, 2>{}, std::integral_constant<int, 3>{}, std::integral_constant<int, 4>{},
              std::integral_constant<int, 5>{}, std::integral_constant<int, 6>{}, std::integral_constant<int, 7>{},
              std::integral_constant<int, 8>{});
}

/// The one list of the direct kernels' instantiations, for the GPU's launchers and the CPU emulation alike:
/// calls f(TypeTag<T>, integral_constant<ReduceOp>, integral_constant<int, N>, integral_constant<bool, Exact>) with
/// N the rank count (Exact), or kDirectMaxRanks and the run-time count (not Exact). False for a type, operator or
/// rank count without one. kExactRanks false takes the run-time count for every type: the CPU emulation does, as
/// an instantiation per rank count would cost every build minutes of g++ for loops that differ only in a bound.
template <bool kExactRanks = true, typename F>
bool visitDirect(collieDataType_t type, ReduceOp op, int nranks, F&& f) {
  if (nranks < 2 || nranks > kDirectMaxRanks) return false;
  bool found = false;
  visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(op, [&](auto opc) {
      if constexpr (kExactRanks && DirectExactRanks<T>::value) {
        found = visitDirectRanks(nranks, [&](auto nc) { f(tag, opc, nc, std::true_type{}); });
      } else {
        f(tag, opc, std::integral_constant<int, kDirectMaxRanks>{}, std::false_type{});
        found = true;
      }
    });
  });
  return found;
}

/// The most elements of `size` bytes per rank one launch of `kind` takes on `nranks` ranks: indices within a launch
/// are 32-bit (kDirectMaxBytes), and reduce-scatter's input and allgather's output hold nranks x count. (A one-shot
/// call must also fit its slots: directLines.)
inline uint64_t directMaxCount(DirectKind kind, size_t size, int nranks) {
  if (size == 0 || nranks < 1) return 0;  // an unknown type: no call
  return kDirectMaxBytes / size / (directHoldsBlocks(kind) ? static_cast<uint64_t>(nranks) : 1);
}

/// Whether `kind` has a kernel for (type, op) on `nranks` ranks: visitDirect's list, or for the kinds that move
/// words and take no operator, any type on 2..kDirectMaxRanks ranks.
inline bool hasDirectKernel(DirectKind kind, collieDataType_t type, ReduceOp op, int nranks) {
  if (directMovesWords(kind)) return nranks >= 2 && nranks <= kDirectMaxRanks && typeSize(type) != 0;
  return visitDirect(type, op, nranks, [](auto, auto, auto, auto) {});
}

/// Why a launch is refused before it starts (collieInvalidArgument, with *why set), or 0: rank and nranks,
/// pointers the kind needs, sizes (kDirectMaxBytes; a one-shot call must fit its slots), blocks and threads.
int checkDirectLaunch(const DirectArgs& a, DirectKind kind, collieDataType_t type, ReduceOp op, int blocks, int threads,
                      const char** why);

/// Why a group launch is refused before it starts (collieInvalidArgument, with *why set), or 0: checkDirectLaunch's
/// refusals of each rank's one-shot with g.blocks blocks, a rank count outside 2..kDirectMaxRanks, and an entry
/// whose rank or rank count is not its place's.
int checkDirectGroupLaunch(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, int threads, const char** why);

/// Loads every direct kernel for `nranks` ranks on the current device (a first launch that loads one lazily could
/// wait for a peer's kernel that waits for it: launch.h, preloadProgramKernels). Returns a cudaError_t as an int.
int preloadDirectKernels(int nranks);

/// Blocks of `threads` threads of `kind`'s kernel (for `type`) that fit on the current device at once when
/// `ranksOnDevice` ranks share it: the most a launch may use (capped at kDirectMaxBlocks); for the one-shot, the
/// fewer of its own kernel's and its group form's, so that either launch fits. 0 where the device cannot say.
/// Returns a cudaError_t as an int.
int directResidentBlocks(DirectKind kind, collieDataType_t type, int nranks, int threads, int ranksOnDevice,
                         int* blocks);

/// Launches `kind` on `stream` (a cudaStream_t) with `blocks` blocks of `threads` threads (at most
/// kDirectMaxThreads, and on the GPU a multiple of 32). checkDirectLaunch's refusals are cudaErrorInvalidValue.
/// Returns a cudaError_t as an int.
int launchDirect(const DirectArgs& args, DirectKind kind, collieDataType_t type, ReduceOp op, int blocks, int threads,
                 void* stream);

/// Launches the one-shot allreduce of every rank of g on `stream` (a cudaStream_t): g.nranks x g.blocks blocks of
/// `threads` threads. checkDirectGroupLaunch's refusals are cudaErrorInvalidValue. Returns a cudaError_t as an int.
int launchDirectGroup(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, int threads, void* stream);

namespace emu {
class Launcher;
/// The CPU emulation of one rank's launch (kernels/emulator.h): the body of `kind` runs on `launcher`'s threads,
/// one group per block, and this returns when all have finished. Ranks of a call run their launches at once,
/// each from its own host thread. Returns collieInvalidArgument where checkDirectLaunch refuses (with the
/// launcher's blocks and threads), else 0; the call's own failure is in args.error.
int launchDirect(const DirectArgs& args, DirectKind kind, collieDataType_t type, ReduceOp op, Launcher* launcher);
/// The same for a group launch: `launcher` plays g.nranks x g.blocks blocks.
int launchDirectGroup(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, Launcher* launcher);
}  // namespace emu

}  // namespace collie
