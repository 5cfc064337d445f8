// The host executor: runs a rank's Program over host memory, talking to peers
// through their mapped windows (shm between processes; the same mapping works
// for ranks that are threads of one process) and, for peers on other hosts,
// through a transport that writes into their windows (transport/remote_window.h). Each call runs to
// completion before it returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "algorithms/program.h"
#include "base/status.h"
#include "collie.h"
#include "executor/direct_sends.h"
#include "executor/executor.h"
#include "executor/protocol.h"
#include "executor/reduce_ops.h"
#include "transport/remote_window.h"

namespace collie {

class RemoteProxy;

class HostExecutor : public Executor {
 public:
  /// windows[r] is rank r's window (ours at windows[rank]), laid out by `layout`.
  /// A wait polls `spinPolls` times before it starts yielding the core.
  HostExecutor(int rank, const WindowLayout& layout, std::vector<uint8_t*> windows, const std::atomic<bool>* abort,
               double timeoutSec, int spinPolls);

  /// Writes our window header; peers check it before their first use.
  void initWindow();
  /// Checks every peer's window header against our layout: the mapped ones
  /// in place, the others (windows[r] == nullptr) in `gathered`, every rank's
  /// header as the bootstrap gathered them (may be null when all are mapped).
  Status checkPeers(const WindowHeader* gathered = nullptr) const;
  /// Peers whose windows[r] is nullptr are on other hosts, reached through
  /// `remote`, which must outlive this executor. Returns the staging bytes.
  size_t setRemote(RemoteWindows* remote);
  /// The GPU's way across hosts, run by the host (COLLIE_TEST_PROXY_HOST, a test
  /// mode): peers on other hosts get `proxy`'s outboxes as their windows and
  /// their slices are read from its inbox; the proxy thread does the rest.
  /// After checkPeers; `proxy` must outlive this executor.
  void attachProxy(RemoteProxy* proxy);
  /// pids[r] > 0: rank r is another process of this machine. A wait on it
  /// then fails with collieRemoteError within about 10 ms of that process
  /// being gone (killed, or exited without destroying), not after COLLIE_TIMEOUT.
  void setPeerProcesses(std::vector<int> pids) { peerPids_ = std::move(pids); }
  /// inProcess[r]: rank r is a thread of this process whose window we map, so it may read the slices we send it
  /// in place, from our buffers, when they are at least `minBytes` (negative: never; executor/direct_sends.h).
  void setInProcessPeers(std::vector<bool> inProcess, int64_t minBytes) {
    inProcess_ = std::move(inProcess);
    bool any = false;
    for (bool b : inProcess_) any = any || b;
    directMinBytes_ = any ? minBytes : -1;  // with no such peer, no call looks for sends to read in place
    givingState_.assign(inProcess_.size(), 0);
    postedBefore_.assign(inProcess_.size(), 0);
  }

  /// Runs `program`. On failure the communicator's counters are no longer in
  /// step with its peers', so the caller must treat the communicator as broken.
  Status run(const std::vector<ChannelWork>& work, const ExecArgs& args) override;
  int channels() const override { return static_cast<int>(layout_.nchannels); }
  uint64_t roundElems(size_t typeSize) const override { return layout_.nchannels * (layout_.slotBytes / typeSize); }

  void setTimeout(double seconds) override { timeoutSec_ = seconds; }
  Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t) override {
    if (dst != src) memmove(dst, src, bytes);
    return Status();
  }
  const WindowLayout& layout() const { return layout_; }
  bool directSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                   std::vector<uint8_t>* marks) const override {
    return directMinBytes_ >= 0 &&
           markDirectSends(p, bufs, elemSize, divisor, inProcess_, static_cast<uint64_t>(directMinBytes_), marks, true);
  }

 private:
  template <typename T, ReduceOp Op>
  Status runTyped(const std::vector<ChannelWork>& work, const ExecArgs& args);

  int rank_;
  WindowLayout layout_;
  std::vector<uint8_t*> windows_;
  const std::atomic<bool>* abort_;
  double timeoutSec_;
  int spinPolls_;
  std::vector<uint64_t> posted_;      // [channel][peer]: slices we have posted to the peer
  std::vector<uint64_t> consumed_;    // [channel][peer]: slices we have consumed from the peer
  std::vector<uint8_t> scratch_;      // Buffer::kScratch, grown to the largest program run so far
  std::vector<int> peerPids_;         // [peer]: its pid when another process of this machine, else 0
  std::vector<bool> inProcess_;       // [peer]: may read our slices in place (setInProcessPeers)
  int64_t directMinBytes_ = -1;       // negative: no send is read in place
  std::vector<uint8_t> directMarks_;  // [step]: markDirectSends of the channel running now
  // [peer], for the channel running now: GivingUp's state and postedBefore (protocol.h, "Giving up").
  std::vector<uint8_t> givingState_;
  std::vector<uint64_t> postedBefore_;

 public:
  /// Giving up without leaving a peer of this process reading our buffers in place (executor/protocol.h, "Giving
  /// up"), for the channel running now: state[peer] (a HostPrims bit set: this call handed the peer a slice in
  /// place; we marked that we read the peer's; the peer gave up), and what we had posted to each peer before
  /// the call. state is null while no send is read in place: the protocol is then off.
  struct GivingUp {
    uint8_t* state = nullptr;
    const uint64_t* postedBefore = nullptr;
  };
  /// The call check (executor/protocol.h, signature[][][] and kRefusedOffset): what this call signs its slices
  /// with, what it found, and where each peer would say that it refused a call.
  struct CallCheck {
    std::vector<const uint8_t*> windows;  // [peer]: its window where mapped as such (not ours, not an outbox)
    uint64_t mine = 0;                    // this call's signature
    int peer = -1;                        // >= 0: a slice of that peer's belonged to another call, or it refused
    uint64_t theirs = 0;                  // that slice's signature; 0 when the peer refused
  };

 private:
  CallCheck callCheck_;

 public:
  /// Where a peer's slices and flags for us land, and the proxy (attachProxy) whose tables the primitives use.
  struct Inbound {
    std::vector<uint8_t*> inboxes;  // [peer]: our window, or the proxy's inbox for a peer across hosts
    const RemoteProxy* proxy = nullptr;
  };

 private:
  Inbound inbound_;

 public:
  /// What the primitives need of the peers on other hosts (all null without any).
  struct Remote {
    RemoteWindows* windows = nullptr;
    std::vector<int> index;                  // [peer]: its place among the remote peers, -1 for a mapped one
    int count = 0;                           // remote peers
    uint8_t* staging = nullptr;              // [channel][remote peer][slot]: slices on their way out
    RemoteWindows::Op* sendOps = nullptr;    // [channel][remote peer][slot]: the put of that slot
    RemoteWindows::Op* creditOps = nullptr;  // [channel][remote peer][slot]: credit returned for that slot
  };

 private:
  Remote remote_;
};

}  // namespace collie
