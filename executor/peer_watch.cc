#include "executor/peer_watch.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <utility>

namespace collie {

bool processGone(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

PeerWatch::PeerWatch(std::vector<int> pids, std::function<void()> onGone, int periodMs)
    : pids_(std::move(pids)), onGone_(std::move(onGone)) {
  bool any = false;
  for (int pid : pids_) any = any || pid > 0;
  if (any) thread_ = std::thread([this, periodMs] { run(periodMs); });
}

PeerWatch::~PeerWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string PeerWatch::reason() const {
  const int r = goneRank();
  if (r < 0) return std::string();
  return "rank " + std::to_string(r) + " (pid " + std::to_string(pids_[static_cast<size_t>(r)]) + ") exited";
}

void PeerWatch::run(int periodMs) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(periodMs), [&] { return stop_; })) {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (!processGone(pids_[r])) continue;
      gone_.store(static_cast<int>(r), std::memory_order_release);
      onGone_();
      return;
    }
  }
}

}  // namespace collie
