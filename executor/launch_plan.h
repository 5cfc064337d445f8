// What one launch of the program kernel carries (kernels/launch.h's
// KernelArgs), built from the channel work core hands an executor. Shared by
// the CUDA executor and the CPU emulation of its kernels
// (executor/emulated_executor.h), so the arguments the GPU receives are the
// ones the host suite checks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "kernels/launch.h"

namespace collie {

class RemoteProxy;

/// Where a launch's longer-lived inputs live: device memory for the CUDA
/// executor, host memory for the emulation.
class LaunchStorage {
 public:
  virtual ~LaunchStorage() = default;
  /// A copy of `program`'s steps the kernel can read for as long as the launch may run.
  virtual Status program(const Program& program, const Step** out) = 0;
  /// Scratch of at least `bytes` (may be 0: then *out may be null).
  virtual Status scratch(size_t bytes, void** out) = 0;
};

/// A communicator's tables every launch points at (addresses the kernel can use).
struct LaunchTables {
  int rank = 0;
  WindowLayout layout;
  uint8_t* const* windows = nullptr;  // every rank's window as we address it
  uint8_t* const* inboxes = nullptr;  // where each peer's slices for us land
  uint64_t* sliceBytes = nullptr;     // with a proxy: its slice size table
  const uint32_t* lost = nullptr;     // with a proxy: its lost flags
  uint64_t* counters = nullptr;       // posted[C][n], consumed[C][n], then clean[C][n] (the LL slots' age)
  uint32_t* failed = nullptr;
  DeviceStatus* status = nullptr;
  double timeoutSec = 300;
  uint64_t* phaseNs = nullptr;  // COLLIE_KERNEL_TIMING: kPhaseWords sums the blocks add to (kernels/launch.h)
  bool systemFence = false;     // COLLIE_DEV_SYSTEM_FENCE (KernelArgs::systemFence)
  bool separatePosts = false;   // COLLIE_DEV_LL_SEPARATE_POSTS (KernelArgs::separatePosts)
  // Reading in place, set by setInPlacePeers: inPlacePeers[peer] and bit peer of inPlaceMask (KernelArgs::
  // readsInPlace) alike; sends of at least directMinBytes to those peers are read in place; negative: none.
  std::vector<bool> inPlacePeers;
  uint64_t inPlaceMask = 0;
  int64_t directMinBytes = -1;
  bool systemScope = false;  // COLLIE_DEV_SYSTEM_SCOPE: every flag at system scope (KernelArgs::gpuScopePeers 0)
};

/// peers[r]: rank r is a thread of this process on this GPU (emulated: on this host), whose kernels load from
/// our buffers. Only ranks below 64 are kept: a launch names the peers that take source words in one word, and
/// a send marked to a peer outside it would go unannounced. With none left, no send is read in place. The same
/// peers, and this rank, exchange flags at GPU scope (KernelArgs::gpuScopePeers), whatever `minBytes`.
void setInPlacePeers(LaunchTables* tables, const std::vector<bool>& peers, int64_t minBytes);

/// Executor::directSends of a kernel executor: markDirectSends with the tables' peers and smallest send.
bool directSendsOf(const LaunchTables& tables, const Program& p, void* const* bufs, size_t elemSize, int divisor,
                   std::vector<uint8_t>* marks);

/// Fills `*a` for one launch that runs every round of `plan` with `args`
/// (round 0's buffers). Sets `*empty` when there is nothing to launch (no
/// steps on any channel).
Status planLaunch(const RoundPlan& plan, const ExecArgs& args, const LaunchTables& tables, LaunchStorage* storage,
                  KernelArgs* a, bool* empty);
/// The same for one round: `work` has one entry per channel.
Status planLaunch(const std::vector<ChannelWork>& work, const ExecArgs& args, const LaunchTables& tables,
                  LaunchStorage* storage, KernelArgs* a, bool* empty);

/// What the last launches ran ("ring allreduce"), by sequence number: a
/// failure is read after its launch, when the call that made it is gone.
class RecentLaunches {
 public:
  void record(uint64_t seq, const Program& program, const ExecArgs& args);
  /// "ring allreduce", or "collective" when `seq` is no longer kept.
  std::string name(uint64_t seq) const;
  /// The sentence for launch `seq`, refused by `rank` over `peer`'s slice signed `theirs` (DeviceStatus::theirs):
  /// callMismatch's (executor.h) where `theirs` is 0 or a send/receive's, else "rank P sent rank R data of another
  /// call while rank R ran its collective #N (ring allreduce): ...".
  std::string mismatch(uint64_t seq, int rank, int peer, uint64_t theirs) const;

 private:
  static constexpr size_t kKept = 64;
  struct Entry {
    uint64_t seq = UINT64_MAX;
    std::string name;
    uint64_t callSignature = 0, collectiveSeq = 0;  // ExecArgs'
  };
  mutable std::mutex mu_;  // run() records while another thread may ask for the async error
  std::array<Entry, kKept> entries_;
};

/// The failure a launch recorded in `status`, as the error the user sees:
/// "rank R waiting on rank P at step S (channel c) of ring allreduce #seq timed
/// out `where`" ("failed `where`: <the proxy's reason>" for a peer the proxy
/// lost, or a peer that gave up first; "failed `where`: `exited`" once a peer process is known gone (PeerWatch);
/// "was aborted `where`" otherwise); OK when there is none. `proxy` may be null, `exited` empty.
Status launchFailure(const DeviceStatus& status, int rank, const char* where, const RecentLaunches& launches,
                     const RemoteProxy* proxy, const std::string& exited = std::string());

/// The kernels' switches from the environment, read once per communicator by whichever executor runs them.
struct KernelSwitches {
  bool timing = false;       // COLLIE_KERNEL_TIMING: the kernels time their parts (LaunchTables::phaseNs)
  bool systemFence = false;  // COLLIE_DEV_SYSTEM_FENCE: a full fence before each Simple post
  bool systemScope = false;  // COLLIE_DEV_SYSTEM_SCOPE: every flag at system scope, even between ranks of one GPU
  // COLLIE_DEV_LL_SEPARATE_POSTS: an LL batch's slices posted one by one instead of in one pass, to measure
  // what the pass saves (kernels/device_prims_ll.cuh, sendTogether)
  bool separatePosts = false;
};
/// Each switch: "1" on; "0" or unset off; any other value is an error naming the variable.
Status readKernelSwitches(KernelSwitches* out);
/// Logs the mean time per block of each part of the kernel (`sums`: kPhaseWords words a communicator's
/// launches added up, kernels/launch.h), once, as the communicator goes.
void reportKernelPhases(int rank, const uint64_t* sums);

}  // namespace collie
