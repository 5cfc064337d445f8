// The host executor: runs a rank's Program over host memory, talking to peers
// through their mapped windows (shm between processes; the same mapping works
// for ranks that are threads of one process). Each call runs to completion
// before it returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "algorithms/program.h"
#include "collie.h"
#include "core/status.h"
#include "executor/protocol.h"
#include "executor/reduce_ops.h"

namespace collie {

/// What one execution reduces and with which element type.
struct ExecArgs {
  const void* input = nullptr;
  void* output = nullptr;
  collieDataType_t type = collieFloat32;
  ReduceOp op = ReduceOp::kSum;
  int divisor = 0;   // > 0: finalized writes divide by it (avg)
  uint64_t seq = 0;  // collective sequence number, for the hang report
};

class HostExecutor {
 public:
  /// windows[r] is rank r's window (ours at windows[rank]), laid out by `layout`.
  HostExecutor(int rank, const WindowLayout& layout, std::vector<uint8_t*> windows, const std::atomic<bool>* abort,
               double timeoutSec);

  /// Writes our window header; peers check it before their first use.
  void initWindow();
  /// Checks every peer's window header against our layout.
  Status checkPeers() const;

  /// Runs `program`. On failure the communicator's counters are no longer in
  /// step with its peers', so the caller must treat the communicator as broken.
  Status run(const Program& program, const ExecArgs& args);

  void setTimeout(double seconds) { timeoutSec_ = seconds; }
  const WindowLayout& layout() const { return layout_; }

 private:
  template <typename T, ReduceOp Op>
  Status runTyped(const Program& program, const ExecArgs& args);

  int rank_;
  WindowLayout layout_;
  std::vector<uint8_t*> windows_;
  const std::atomic<bool>* abort_;
  double timeoutSec_;
  std::vector<uint64_t> posted_;    // slices we have posted to each peer
  std::vector<uint64_t> consumed_;  // slices we have consumed from each peer
  std::vector<uint8_t> scratch_;    // Buffer::kScratch, grown to the largest program run so far
};

}  // namespace collie
