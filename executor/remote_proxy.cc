#include "executor/remote_proxy.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/log.h"
#include "executor/host_flags.h"

namespace collie {

RemoteProxy::Memory RemoteProxy::hostMemory() {
  Memory m;
  m.allocate = [](size_t bytes, Region* out) {
    // Page-aligned like the pinned allocations it stands in for; slots want 16 bytes at least.
    void* p = nullptr;
    if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0)
      return Status::error(collieSystemError, "cannot allocate %zu bytes for the proxy", bytes);
    memset(p, 0, bytes);
    out->host = out->user = static_cast<uint8_t*>(p);
    return Status();
  };
  m.release = [](const Region& r) { free(r.host); };
  return m;
}

RemoteProxy::RemoteProxy(int rank, const WindowLayout& layout, const std::vector<bool>& remote, Memory memory)
    : rank_(rank), layout_(layout), index_(remote.size(), -1), memory_(std::move(memory)), failures_(remote.size()) {
  for (size_t r = 0; r < remote.size(); ++r) {
    if (!remote[r] || static_cast<int>(r) == rank) continue;
    index_[r] = static_cast<int>(peers_.size());
    peers_.push_back(static_cast<int>(r));
  }
  conns_.resize(static_cast<size_t>(layout_.nchannels) * peers_.size());
}

Status RemoteProxy::create(int rank, const WindowLayout& layout, const std::vector<bool>& remote, Memory memory,
                           std::unique_ptr<RemoteProxy>* out) {
  std::unique_ptr<RemoteProxy> p(new RemoteProxy(rank, layout, remote, std::move(memory)));
  if (p->peers_.empty()) return Status::error(collieInternalError, "a proxy needs a peer on another host");
  const size_t window = static_cast<size_t>(layout.totalBytes());
  const size_t tables = p->sliceBytesSize() + layout.nranks * sizeof(uint32_t);
  COLLIE_RETURN_IF_ERROR(p->memory_.allocate(window, &p->inbox_));
  COLLIE_RETURN_IF_ERROR(p->memory_.allocate(window * p->peers_.size(), &p->outboxes_));
  COLLIE_RETURN_IF_ERROR(p->memory_.allocate(tables, &p->tables_));
  p->footprint_ = window * (1 + p->peers_.size()) + tables;
  *out = std::move(p);
  return Status();
}

RemoteProxy::~RemoteProxy() {
  if (thread_.joinable()) stop(0);
  for (Region* r : {&inbox_, &outboxes_, &tables_})
    if (r->host != nullptr) memory_.release(*r);
}

std::string RemoteProxy::failure(int peer) const {
  std::lock_guard<std::mutex> lock(failureMu_);
  return failures_[static_cast<size_t>(peer)];
}

void RemoteProxy::markLost(int peer) {
  {
    std::lock_guard<std::mutex> lock(failureMu_);
    failures_[static_cast<size_t>(peer)] = transport_->failure(peer);
  }
  // The consumer may be a kernel reading this word over PCIe: a plain store it will see, ordered after the text.
  __atomic_store_n(lostHost() + peer, 1u, __ATOMIC_RELEASE);
}

void RemoteProxy::start(RemoteWindows* transport, int spins) {
  transport_ = transport;
  // Ops live in the transport's memory: a request in flight may outlive this proxy.
  const size_t slots = conns_.size() * layout_.nslots;
  uint8_t* ops = transport->allocate(2 * slots * sizeof(RemoteWindows::Op));
  sendOps_ = reinterpret_cast<RemoteWindows::Op*>(ops);
  creditOps_ = sendOps_ + slots;
  for (size_t i = 0; i < 2 * slots; ++i) new (sendOps_ + i) RemoteWindows::Op();
  thread_ = std::thread([this, spins] { loop(spins); });
}

void RemoteProxy::stop(double seconds) {
  if (!thread_.joinable()) return;
  stopSeconds_ = seconds;
  stopping_.store(true, std::memory_order_release);
  thread_.join();
}

bool RemoteProxy::pump() {
  bool moved = false;
  const uint32_t* lost = lostHost();
  const uint64_t* sizes = reinterpret_cast<const uint64_t*>(tables_.host);
  for (size_t i = 0; i < peers_.size(); ++i) {
    const int q = peers_[i];
    if (__atomic_load_n(lost + q, __ATOMIC_RELAXED) != 0) continue;
    if (transport_->failed(q)) {
      markLost(q);
      continue;
    }
    uint8_t* box = outboxes_.host + i * layout_.totalBytes();
    for (int c = 0; c < static_cast<int>(layout_.nchannels); ++c) {
      const size_t at = static_cast<size_t>(c) * peers_.size() + i;
      Conn& k = conns_[at];
      // Slices: the consumer publishes ready only after the slot and its byte count are written.
      const uint64_t ready = loadAcquire(box + layout_.readyOffset(c, rank_));
      while (k.sent < ready) {
        RemoteWindows::Op& op = sendOps_[at * layout_.nslots + k.sent % layout_.nslots];
        // The consumer refilled this slot only after q credited it, so q has its data; the op may still be finishing.
        if (!transport_->idle(op)) break;
        const uint64_t offset = layout_.slotOffset(c, rank_, k.sent);
        const uint64_t bytes =
            std::min(sizes[layout_.connection(c, q) * layout_.nslots + k.sent % layout_.nslots], layout_.slotBytes);
        transport_->put(q, box + offset, bytes, offset, layout_.readyOffset(c, rank_), k.sent + 1, &op);
        ++k.sent;
        moved = true;
      }
      const uint64_t credit = loadAcquire(box + layout_.creditOffset(c, rank_));
      while (k.credited < credit) {
        RemoteWindows::Op& op = creditOps_[at * layout_.nslots + k.credited % layout_.nslots];
        if (!transport_->idle(op)) break;
        transport_->put(q, nullptr, 0, 0, layout_.creditOffset(c, rank_), k.credited + 1, &op);
        ++k.credited;
        moved = true;
      }
    }
  }
  return moved;
}

bool RemoteProxy::drained() const {
  const uint32_t* lost = lostHost();
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (__atomic_load_n(lost + peers_[i], __ATOMIC_RELAXED) != 0) continue;
    const uint8_t* box = outboxes_.host + i * layout_.totalBytes();
    for (int c = 0; c < static_cast<int>(layout_.nchannels); ++c) {
      const Conn& k = conns_[static_cast<size_t>(c) * peers_.size() + i];
      if (k.sent < loadAcquire(box + layout_.readyOffset(c, rank_)) ||
          k.credited < loadAcquire(box + layout_.creditOffset(c, rank_)))
        return false;
    }
  }
  return true;
}

void RemoteProxy::loop(int spins) {
  using Clock = std::chrono::steady_clock;
  int idlePolls = 0;
  long sleepNs = 0;
  Clock::time_point idleSince;
  for (;;) {
    transport_->progress();
    const bool moved = pump();
    if (stopping_.load(std::memory_order_acquire)) break;
    if (moved) {
      idlePolls = 0;
      sleepNs = 0;
      continue;
    }
    // Idle: spin a while (the next slice is usually close), then give the
    // core away, since ranks and their proxies may outnumber the CPUs.
    if (idlePolls++ < spins) {
      cpuRelax();
      continue;
    }
    if (sleepNs == 0) {
      idleSince = Clock::now();
      sleepNs = 1000;
    }
    if (Clock::now() - idleSince < std::chrono::milliseconds(2)) {
      sched_yield();
    } else {
      timespec ts{0, sleepNs};
      nanosleep(&ts, nullptr);
      sleepNs = std::min(sleepNs * 2, 50000L);
    }
  }
  // Stopping: what the consumer wrote last (its final credits) still goes out,
  // and the transport gets until the deadline to see it leave.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(stopSeconds_));
  while (Clock::now() < deadline) {
    transport_->progress();
    pump();
    if (drained() && transport_->quiet()) return;
    sched_yield();
  }
  if (!drained()) COLLIE_WARN("rank %d: the proxy stopped with slices or credits not yet sent", rank_);
}

}  // namespace collie
