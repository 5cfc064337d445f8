// What core asks of an executor: run one rank's Program on the caller's
// buffers. The host executor runs it to completion on the calling thread; the
// CUDA executor enqueues kernels on the caller's stream and returns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/program.h"
#include "base/status.h"
#include "collie.h"
#include "executor/reduce_ops.h"
#include "transport/cuda_ipc/buffer_windows.h"

namespace collie {

/// What one execution reduces and with which element type.
struct ExecArgs {
  const void* input = nullptr;
  void* output = nullptr;
  collieDataType_t type = collieFloat32;
  ReduceOp op = ReduceOp::kSum;
  int divisor = 0;   // > 0: finalized writes divide by it (avg)
  uint64_t seq = 0;  // collective sequence number, for the hang report
  // Collectives only (every rank makes them in the same order, unlike sends and receives): their own count, by
  // which the CUDA executor compares the streams of ranks sharing a GPU (executor/colocated_streams.h).
  static constexpr uint64_t kNotACollective = ~uint64_t{0};
  uint64_t collectiveSeq = kNotACollective;
  // Collectives only: callSignature (executor/protocol.h) of what every rank must agree on; 0: not checked.
  uint64_t callSignature = 0;
  collieStream_t stream = nullptr;  // CUDA executor: the caller's stream
  // One program for all channels, each moving its part of every step. Valid
  // only for programs whose steps never read what an earlier step of the rank
  // wrote (all-to-all(v), send/recv); see ChannelWork for the others.
  bool splitSteps = false;
  // The LL protocol (CUDA executor): chosen by core for small calls that fit
  // one LL slice per chunk; all ranks choose alike since they see the same count.
  bool lowLatency = false;
  // A pre-multiplied sum on an executor that scales the input itself (Executor::scalesInput): `count` elements
  // of `input` are multiplied by the scalar into a buffer of the executor's own, which the program then reads
  // as its input.
  struct Scale {
    bool active = false;
    const void* deviceScalar = nullptr;  // device-readable, read when the work runs; null: hostScalar's bytes
    uint8_t hostScalar[8] = {};
    uint64_t count = 0;
  } scale;
};

/// The sentence for a call a rank refused: a slice of `peer`'s carried another call's signature (`theirs`,
/// executor/protocol.h, signature[][][]), or, with `theirs` 0, `peer` had refused first. `mine` and
/// `collectiveSeq` are this call's (ExecArgs; `mine` 0 for a send/receive), `name` what ran here ("ring
/// allreduce"). Shared by the host executor and the kernels' failure report, which find the same differences.
std::string callMismatch(int rank, int peer, uint64_t theirs, uint64_t mine, uint64_t collectiveSeq,
                         const std::string& name);

/// What one channel runs: a program on the buffers advanced by `offset`
/// elements. core cuts a round into one part per channel, each a complete
/// collective on its part of every block (like a round), so channels never
/// depend on each other's data: a step-level split would not be safe for
/// algorithms whose later steps read what earlier ones wrote (rhd, trees).
struct ChannelWork {
  const Program* program = nullptr;
  uint64_t offset = 0;
};

/// A call cut into rounds (core/collectives.cc): round r runs on the buffers
/// advanced by r * stride elements; every round but the last runs `full`, the
/// last runs `last` (one entry per channel, as for Executor::run).
struct RoundPlan {
  std::vector<ChannelWork> full;  // empty when there is one round
  std::vector<ChannelWork> last;
  uint64_t rounds = 1;
  uint64_t stride = 0;
};

/// Refuses work whose programs hold direct steps (algorithms/program.h, "Direct steps"): they load and store
/// peers' buffers, which an executor that moves data through slots cannot do. Names the algorithm and
/// `backend`, the backend this executor serves ("host", "cuda"); OK when no program holds one.
Status refuseDirectSteps(const std::vector<ChannelWork>& work, const char* backend);

/// All-to-all-v's extents, in elements: how far its input's and its output's blocks reach (displacement plus count,
/// the most over the peers), what a direct call of it touches. Zero for the other collectives, whose count says it.
struct VExtents {
  uint64_t input = 0;
  uint64_t output = 0;
};
/// The same for every round of `plan`.
Status refuseDirectSteps(const RoundPlan& plan, const char* backend);

class Executor {
 public:
  virtual ~Executor() = default;
  /// Runs (host) or enqueues (CUDA) work[c] on channel c (at most channels()
  /// entries). After a failure the communicator's counters are out of step
  /// with its peers': it is broken.
  virtual Status run(const std::vector<ChannelWork>& work, const ExecArgs& args) = 0;
  /// Runs every round of a call, in order; `args` holds round 0's buffers. This
  /// one calls run() per round. The CUDA executor and its emulation override it
  /// with one launch for the whole call: with one launch per round, a rank's second launch can hold back a
  /// peer's first in a shared hardware queue (docs/cuda-executor.md, "One launch per call").
  virtual Status runRounds(const RoundPlan& plan, ExecArgs args);
  /// Channels (independent pipelines) this executor runs per launch.
  virtual int channels() const = 0;
  /// Runs a program whose steps can be split across channels (ExecArgs::splitSteps).
  Status runSplit(const Program& program, ExecArgs args) {
    args.splitSteps = true;
    return run({ChannelWork{&program, 0}}, args);
  }
  /// How many elements of `typeSize` bytes a round may give one chunk of an
  /// algorithm (see RoundRule): what one slot holds on every channel.
  virtual uint64_t roundElems(size_t typeSize) const = 0;
  /// The same for the LL protocol; 0 when the executor has none (the host).
  virtual uint64_t roundElemsLL(size_t /*typeSize*/) const { return 0; }
  virtual void setTimeout(double seconds) = 0;
  /// Whether run() reads and writes the caller's buffers where they are, so that one program may address
  /// several of them as offsets from a common base (a grouped send/recv, core/p2p.cc). An executor that copies
  /// the range a program spans to staging and back must not be given such a program: the range would cover
  /// whatever lies between the buffers.
  virtual bool addressesBuffersInPlace() const { return true; }
  /// dst = src, `bytes` of this rank's own memory, in the order of its other work.
  virtual Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t stream) = 0;
  /// Before a group of sends and receives on `stream`: returns once nothing of it can hold back a peer's part of
  /// the work queued before (the CUDA executor waits until the ranks sharing its GPU in this process have queued
  /// their parts of it; executor/colocated_streams.h).
  virtual Status queueAfterPeers(collieStream_t /*stream*/) { return Status(); }
  /// After such a group, on every way out: it held `sends` sends to and `recvs` receives from rank `peer`.
  virtual void p2pQueued(int /*peer*/, uint64_t /*sends*/, uint64_t /*recvs*/) {}
  /// Makes every running and future wait give up (collieCommAbort).
  virtual void abort() {}
  /// An error found after the call that caused it returned (the CUDA
  /// executor's kernels report theirs here); OK otherwise.
  virtual Status asyncStatus() const { return Status(); }
  /// Waits until everything enqueued so far has finished.
  virtual Status synchronize() { return Status(); }
  /// A cudaMemPool_t of the executor's own for the device memory a call takes in stream order (core/redop.cc's
  /// staging), or null: the device's default pool.
  virtual void* devicePool() const { return nullptr; }
  /// OK where this executor runs a call of direct algorithm `algorithm` (AlgorithmInfo::mapsPeers) of `count`
  /// elements of `type` and `op` as a kernel written for it, else the sentence saying why not. This one refuses
  /// them all: only the CUDA executor has such kernels (cuda_executor.h, "Direct algorithms").
  virtual Status runsDirect(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                            ReduceOp op) const;
  /// Window `number` of this rank's, [base, base + bytes), registered with its peers (collieCommWindowRegister,
  /// and the communicator's staging buffer as number 0), and how this rank reaches each peer's
  /// (transport/cuda_ipc/buffer_windows.h): the CUDA executor's direct kernels address peers' buffers inside
  /// windows through it. Others ignore it.
  virtual Status mapWindow(int /*number*/, const void* /*base*/, uint64_t /*bytes*/,
                           const std::vector<PeerRange>& /*ranges*/) {
    return Status();
  }
  /// Forgets window `number`, once every call enqueued so far that could use it has finished.
  virtual Status unmapWindow(int /*number*/) { return Status(); }
  /// Before a call of direct algorithm `algorithm` is numbered: OK where runRounds would run it on these buffers,
  /// else the sentence saying why not; a refusal here leaves the communicator as it was. `scaled`: a
  /// pre-multiplied sum, whose input runRounds replaces with a scaled copy of its own (ExecArgs::scale); `stream`
  /// the call's (CUDA backend: direct_ce refuses one being captured); `v` all-to-all-v's extents, whose `count` is
  /// then the larger of the two. This one
  /// lets every call through: executors without direct kernels refuse them all in runRounds (refuseDirectSteps,
  /// naming their backend); the CUDA executor checks here what runsDirect checks and where its peers can reach
  /// the buffers.
  virtual Status checkDirect(Collective /*c*/, const std::string& /*algorithm*/, uint64_t /*count*/,
                             collieDataType_t /*type*/, ReduceOp /*op*/, const void* /*input*/, const void* /*output*/,
                             bool /*scaled*/, collieStream_t /*stream*/, VExtents /*v*/) {
    return Status();
  }
  /// Whether every rank of the communicator runs a call of direct algorithm `algorithm` with these arguments as
  /// runsDirect and checkDirect allow, wherever its buffers lie, judged from what every rank shares: the arguments
  /// and the communicator's setup. The tuner's choice of a direct algorithm stands only where it is
  /// (collieComm::algorithmForCall). This one: never.
  virtual bool directFits(Collective /*c*/, const std::string& /*algorithm*/, uint64_t /*count*/,
                          collieDataType_t /*type*/, ReduceOp /*op*/) const {
    return false;
  }
  /// Whether runRounds honours ExecArgs::scale, scaling the input as part of the launch. Otherwise core scales
  /// into staging of its own before the call and frees it after (core/collectives.cc, executeScaled).
  virtual bool scalesInput() const { return false; }
  /// The steps of `p` whose sends the peers would read in place (markDirectSends' marks, executor/
  /// direct_sends.h) were it run by this executor, as one channel, on `bufs` (input, output, scratch: Buffer
  /// order; only their addresses are used) with elements of `elemSize` and the Simple protocol. False when none
  /// would be: no peer reads ours, a small call, or an executor that never reads in place. For counting memory
  /// traffic (collie-bench --limit).
  virtual bool directSends(const Program& /*p*/, void* const* /*bufs*/, size_t /*elemSize*/, int /*divisor*/,
                           std::vector<uint8_t>* /*marks*/) const {
    return false;
  }
};

}  // namespace collie
