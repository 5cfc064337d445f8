// The CUDA executor's kernels run on the CPU (COLLIE_TEST_EMULATE_KERNELS=N, a test
// mode of host communicators): each call builds the launch arguments exactly
// as the CUDA executor does (executor/launch_plan.h) and runs the program
// kernel's own body with N host threads per block (kernels/emulator.h) over
// the communicator's host windows, or through the proxy thread for peers on
// other hosts. So the device primitives, both protocols, the launch arguments
// and the proxy's kernel side are checked by the host suite and the
// sanitizers on machines without a GPU. Synchronous: a call returns when its
// launch has finished, with the failure the kernel recorded, if any.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "executor/executor.h"
#include "executor/launch_plan.h"
#include "executor/protocol.h"
#include "kernels/emulator.h"

namespace collie {

class RemoteProxy;

class EmulatedExecutor : public Executor, private LaunchStorage {
 public:
  /// windows[r] is rank r's window as we address it (null: a peer on another
  /// host, reached through attachProxy()).
  EmulatedExecutor(int rank, const WindowLayout& layout, std::vector<uint8_t*> windows, double timeoutSec,
                   int threadsPerBlock, KernelSwitches switches = {});
  /// With switches.timing (COLLIE_KERNEL_TIMING=1): logs the kernels' time per part (reportKernelPhases).
  ~EmulatedExecutor() override;
  /// The kPhaseWords sums the launches have added so far (kernels/launch.h); null when not timed.
  const uint64_t* kernelPhases() const { return phaseNs_.empty() ? nullptr : phaseNs_.data(); }

  /// As CudaExecutor::attachProxy: `proxy` (host memory) must outlive this executor.
  void attachProxy(const RemoteProxy& proxy);
  /// inProcess[r]: rank r is a thread of this process whose window we map, so the kernels read its large sends
  /// in place, and it ours, from sends of `minBytes` up (negative: never), as on one GPU (executor/direct_sends.h).
  void setInProcessPeers(const std::vector<bool>& inProcess, int64_t minBytes);

  Status run(const std::vector<ChannelWork>& work, const ExecArgs& args) override;
  /// Every round of the call in one launch (Executor::runRounds says why).
  Status runRounds(const RoundPlan& plan, ExecArgs args) override;
  int channels() const override { return static_cast<int>(tables_.layout.nchannels); }
  uint64_t roundElems(size_t typeSize) const override {
    return tables_.layout.nchannels * (tables_.layout.slotBytes / typeSize);
  }
  uint64_t roundElemsLL(size_t typeSize) const override {
    return tables_.lost != nullptr ? 0
                                   : tables_.layout.nchannels * (llPayloadBytes(tables_.layout.llSlotBytes) / typeSize);
  }
  void setTimeout(double seconds) override { tables_.timeoutSec = seconds; }
  Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t stream) override;
  void abort() override;
  Status asyncStatus() const override;
  bool directSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                   std::vector<uint8_t>* marks) const override {
    return directSendsOf(tables_, p, bufs, elemSize, divisor, marks);
  }

 private:
  Status program(const Program& program, const Step** out) override;
  /// What every launch's drain promises (kernels/device_prims.cuh): each slice it posted has been credited back.
  Status checkDrained() const;
  Status scratch(size_t bytes, void** out) override;

  emu::Launcher launcher_;          // its threads play the blocks of every launch
  std::vector<uint8_t*> windows_;   // windows, then inboxes (KernelArgs::windows / inboxes)
  std::vector<uint64_t> counters_;  // posted[C][n], consumed[C][n], clean[C][n]: the device memory between launches
  std::vector<uint64_t> phaseNs_;   // COLLIE_KERNEL_TIMING's sums (kernels/launch.h); empty: not timed
  uint32_t failed_ = 0;
  DeviceStatus status_{};
  LaunchTables tables_;                 // what every launch points at: the members above, the proxy's tables
  const RemoteProxy* proxy_ = nullptr;  // with a proxy: for the reason it lost a peer
  RecentLaunches launches_;             // names for the error line
  std::vector<uint64_t> scratch_;       // 8-byte aligned, grown, never shrunk
  std::mutex mu_;
};

}  // namespace collie
