#include "executor/peer_watch.h"

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <utility>

namespace collie {

bool processGone(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

PeerWatch::PeerWatch(std::vector<int> pids, std::function<void(int)> onGone, int periodMs)
    : pids_(std::move(pids)), onGone_(std::move(onGone)), gone_(new std::atomic<bool>[pids_.size()]) {
  for (size_t r = 0; r < pids_.size(); ++r) gone_[r].store(false, std::memory_order_relaxed);
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

bool PeerWatch::gone(int r) const {
  return r >= 0 && static_cast<size_t>(r) < pids_.size() &&
         gone_[static_cast<size_t>(r)].load(std::memory_order_acquire);
}

std::string PeerWatch::reason(int r) const {
  if (!gone(r)) return std::string();
  return "rank " + std::to_string(r) + " (pid " + std::to_string(pids_[static_cast<size_t>(r)]) + ") exited";
}

void PeerWatch::run(int periodMs) {
  size_t left = 0;
  for (int pid : pids_) left += pid > 0 ? 1 : 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (left > 0 && !cv_.wait_for(lock, std::chrono::milliseconds(periodMs), [&] { return stop_; })) {
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (gone_[r].load(std::memory_order_relaxed) || !processGone(pids_[r])) continue;
      gone_[r].store(true, std::memory_order_release);
      --left;
      onGone_(static_cast<int>(r));
    }
  }
}

}  // namespace collie
