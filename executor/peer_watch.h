// Noticing that a peer process of this machine is gone, for executors whose waits the host does not run: the
// CUDA kernels wait on a peer's window in device memory and cannot ask whether its process still exists. A
// thread asks, every few milliseconds; for each peer found gone it calls `onGone(rank)` once (the CUDA executor
// makes its kernels' waits on that rank give up) and goes on looking at the others. Gone is not failed: a rank
// that destroyed its communicator and exited is gone too, and the calls still running elsewhere may owe it
// nothing. The host executor asks within its own waits, about the peers it waits on (host_executor.cc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
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
  PeerWatch(std::vector<int> pids, std::function<void(int rank)> onGone, int periodMs = 20);
  ~PeerWatch();  // stops and joins the thread: `onGone` is never called after this returns
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  /// Whether rank r was found gone.
  bool gone(int r) const;
  /// "rank R (pid P) exited", or "" while R is not known gone.
  std::string reason(int r) const;

 private:
  void run(int periodMs);

  const std::vector<int> pids_;
  const std::function<void(int)> onGone_;
  std::unique_ptr<std::atomic<bool>[]> gone_;  // [rank]
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace collie
