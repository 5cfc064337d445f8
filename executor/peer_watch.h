// Noticing that a peer process of this machine is gone, for executors whose waits the host does not run: the
// CUDA kernels wait on a peer's window in device memory and cannot ask whether its process still exists. A
// thread asks, every few milliseconds; once a peer is gone it calls `onGone` (the CUDA executor stops its
// kernels, as an abort does) and stops looking. The host executor asks within its own waits (host_executor.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace collie {

/// Whether process `pid` of this machine no longer exists (0: not a process we can ask about). A rank killed by
/// SIGKILL, or gone without destroying its communicator, leaves its windows mapped but silent.
bool processGone(int pid);

class PeerWatch {
 public:
  /// pids[r] > 0: rank r is another process of this machine. Looks every `periodMs`; starts no thread when no
  /// pid is given.
  PeerWatch(std::vector<int> pids, std::function<void()> onGone, int periodMs = 20);
  ~PeerWatch();  // stops and joins the thread: `onGone` is never called after this returns
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  /// The first rank found gone, or -1.
  int goneRank() const { return gone_.load(std::memory_order_acquire); }
  /// "rank R (pid P) exited", or "" while none is gone.
  std::string reason() const;

 private:
  void run(int periodMs);

  const std::vector<int> pids_;
  const std::function<void()> onGone_;
  std::atomic<int> gone_{-1};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace collie
