// The proxy: how an executor that can only load and store reaches peers on
// other hosts. The CUDA kernels cannot call UCX, and Debian's UCX cannot
// touch device memory, so a thread of the rank's process stands between them
// (docs/design.md, "The proxy path"):
//
//   consumer (kernel, or the host executor in the test mode COLLIE_TEST_PROXY_HOST)
//     writes a slice for remote peer q into outbox(q) exactly as it would into
//     a mapped peer's window: slot at slotOffset(c, me, s), its byte count in
//     sliceBytes(), then ready(c, me) = s + 1; a release writes credit(c, me)
//   proxy thread: sees ready / credit move in outbox(q) and sends each new
//     slice or credit with the transport (transport/remote_window.h), which
//     lands it in q's inbox at the same offsets
//   consumer reads slices, ready and credits of remote peers from inbox(),
//     laid out like its own window; a peer the transport lost gets lost[q] = 1
//
// The outboxes, the inbox, sliceBytes and lost live in memory the caller
// allocates: plain host memory for the test mode, pinned host memory mapped
// into the GPU (cudaHostAlloc) for the kernels, which then address it by its
// device pointer. The proxy itself is CPU code, tested on the CPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "executor/protocol.h"
#include "transport/remote_window.h"

namespace collie {

class RemoteProxy {
 public:
  /// Memory shared by the consumer, the proxy and the transport: zero-filled,
  /// seen at `host` by this process and at `user` by the consumer (the same
  /// address on the host; the mapped device address for the kernels).
  struct Region {
    uint8_t* host = nullptr;
    uint8_t* user = nullptr;
  };
  struct Memory {
    std::function<Status(size_t bytes, Region* out)> allocate;
    std::function<void(const Region&)> release;
  };
  /// Plain zero-filled host memory (the CPU test mode).
  static Memory hostMemory();
  /// Pinned host memory mapped into `device`'s address space, for the kernels
  /// (executor/remote_proxy_cuda.cc; needs a GPU).
  static Memory pinnedMemory(int device);

  /// remote[r]: rank r is on another host. Allocates the inbox, one outbox per
  /// remote peer, the slice byte counts and the lost flags.
  static Status create(int rank, const WindowLayout& layout, const std::vector<bool>& remote, Memory memory,
                       std::unique_ptr<RemoteProxy>* out);
  ~RemoteProxy();
  RemoteProxy(const RemoteProxy&) = delete;
  RemoteProxy& operator=(const RemoteProxy&) = delete;

  /// Where the transport writes what remote peers send us (its window).
  uint8_t* inboxHost() const { return inbox_.host; }

  // What the consumer addresses (user addresses).
  bool remote(int peer) const { return index_[static_cast<size_t>(peer)] >= 0; }
  /// For a remote peer: the window the consumer writes its slices, ready and credits for that peer into.
  uint8_t* outbox(int peer) const { return outboxes_.user + slotOf(peer) * layout_.totalBytes(); }
  /// Where remote peers' slices, ready and credits for us land, laid out like our window.
  uint8_t* inbox() const { return inbox_.user; }
  /// [connection(c, peer) * nslots + seq % nslots]: bytes of the slice posted to `peer`.
  uint64_t* sliceBytes() const { return reinterpret_cast<uint64_t*>(tables_.user); }
  /// [peer]: 1 once the transport has lost that peer (0 for peers of our host).
  const uint32_t* lost() const { return reinterpret_cast<const uint32_t*>(tables_.user + sliceBytesSize()); }
  /// Why `peer` was lost ("" while it was not).
  std::string failure(int peer) const;
  /// Bytes of shared memory this proxy holds.
  size_t footprint() const { return footprint_; }

  /// Starts the thread that moves slices and credits. `transport` (whose
  /// window is inboxHost()) must outlive stop(). An idle proxy polls `spins`
  /// times, then yields, then sleeps in growing steps up to 50 us.
  void start(RemoteWindows* transport, int spins);
  /// Sends what the consumer has written so far, waits (at most `seconds`) for
  /// the transport to be quiet, and stops the thread. Call once the consumer
  /// has stopped (the last kernel ended), before the transport shuts down.
  void stop(double seconds);

 private:
  RemoteProxy(int rank, const WindowLayout& layout, const std::vector<bool>& remote, Memory memory);
  size_t slotOf(int peer) const { return static_cast<size_t>(index_[static_cast<size_t>(peer)]); }
  size_t sliceBytesSize() const {
    return static_cast<size_t>(layout_.nchannels) * layout_.nranks * layout_.nslots * sizeof(uint64_t);
  }
  // The lost flags at the proxy's own (host) address.
  uint32_t* lostHost() const { return reinterpret_cast<uint32_t*>(tables_.host + sliceBytesSize()); }
  void loop(int spins);
  // One pass over every remote peer and channel; true when anything moved.
  bool pump();
  // Everything the consumer wrote has been handed to the transport.
  bool drained() const;
  void markLost(int peer);

  // What has been handed to the transport of one connection (channel, remote peer).
  struct Conn {
    uint64_t sent = 0;      // slices
    uint64_t credited = 0;  // credits
  };

  int rank_;
  WindowLayout layout_;
  std::vector<int> index_;  // [peer]: its place among the remote peers, -1 for a peer of our host
  std::vector<int> peers_;  // the remote peers, by place
  Memory memory_;
  Region inbox_, outboxes_, tables_;
  size_t footprint_ = 0;
  std::vector<Conn> conns_;  // [channel][remote place]
  RemoteWindows* transport_ = nullptr;
  RemoteWindows::Op* sendOps_ = nullptr;    // [channel][remote place][slot], in the transport's memory
  RemoteWindows::Op* creditOps_ = nullptr;  // the same for credits
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  double stopSeconds_ = 0;
  mutable std::mutex failureMu_;
  std::vector<std::string> failures_;  // [peer]
};

}  // namespace collie
