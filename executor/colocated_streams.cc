#include "executor/colocated_streams.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "executor/process_table.h"

namespace collie {

namespace {

// One rank's part of one collective: where it went.
struct Entry {
  enum class Kind { kLegacy, kPerThread, kExplicit };
  uint64_t seq = 0;
  Kind kind = Kind::kExplicit;
  void* handle = nullptr;
  std::thread::id thread;
  bool blocking = false;  // ordered with the legacy default stream (false also when CUDA could not say)
};

}  // namespace

struct ColocatedStreams::Note {
  std::mutex mu;
  bool valid = false;
  Entry last;  // this rank's latest collective
  // What this rank has queued, and so puts nothing more of into a queue: its collectives (the highest #seq + 1),
  // and per rank (up to the highest co-located one: ColocatedStreams::slots_) its sends to it and receives from
  // it. Written by the rank's calls, read by its peers'.
  std::atomic<uint64_t> collectives{0};
  std::unique_ptr<std::atomic<uint64_t>[]> sends, recvs;
  std::atomic<bool> gone{false};  // its communicator is being destroyed: it queues nothing more
};

namespace {

using Kind = Entry::Kind;
using Note = ColocatedStreams::Note;

std::string describe(const Entry& n) {
  char buf[96];
  switch (n.kind) {
    case Kind::kLegacy:
      return "the legacy default stream";
    case Kind::kPerThread:
      return "the per-thread default stream of one thread";
    case Kind::kExplicit:
      break;
  }
  snprintf(buf, sizeof(buf), "%s stream %p", n.blocking ? "blocking" : "non-blocking", n.handle);
  return buf;
}

// Whether CUDA would run the two parts one after the other: one stream, or the legacy default stream and a
// blocking one.
bool serialized(const Entry& a, const Entry& b) {
  if (a.kind != b.kind) {
    if (a.kind == Kind::kLegacy) return b.blocking;
    if (b.kind == Kind::kLegacy) return a.blocking;
    return false;
  }
  switch (a.kind) {
    case Kind::kLegacy:
      return true;
    case Kind::kPerThread:
      return a.thread == b.thread;
    case Kind::kExplicit:
      return a.handle == b.handle;
  }
  return false;
}

}  // namespace

ColocatedStreams::ColocatedStreams(int rank, int device, const void* own,
                                   std::vector<std::pair<int, const void*>> peers)
    : rank_(rank),
      device_(device),
      own_(own),
      note_(std::make_shared<Note>()),
      peerKeys_(std::move(peers)),
      peers_(peerKeys_.size()) {
  // Slots by rank: the co-located ranks' p2p counts, this one's included (its peers index theirs by it).
  int top = rank_;
  for (const auto& k : peerKeys_) top = std::max(top, k.first);
  note_->sends.reset(new std::atomic<uint64_t>[static_cast<size_t>(top) + 1]());
  note_->recvs.reset(new std::atomic<uint64_t>[static_cast<size_t>(top) + 1]());
  slots_ = static_cast<size_t>(top) + 1;
  ProcessTable<Note>::put(own_, note_);
}

ColocatedStreams::~ColocatedStreams() {
  note_->gone.store(true, std::memory_order_release);
  ProcessTable<Note>::remove(own_, note_);
}

Status ColocatedStreams::note(uint64_t seq, void* stream) {
  Entry mine;
  mine.seq = seq;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (s == nullptr || s == cudaStreamLegacy) {
    mine.kind = Kind::kLegacy;
  } else if (s == cudaStreamPerThread) {
    mine.kind = Kind::kPerThread;
    mine.blocking = true;  // CUDA: it is ordered with the legacy default stream
  } else {
    unsigned flags = 0;
    if (cudaStreamGetFlags(s, &flags) == cudaSuccess)
      mine.blocking = (flags & cudaStreamNonBlocking) == 0;
    else
      (void)cudaGetLastError();  // said by the launch, if the stream is bad
  }
  mine.handle = stream;
  mine.thread = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(note_->mu);
    note_->valid = true;
    note_->last = mine;
  }
  // Each rank writes its note, then reads its peers' (each under its lock): of two ranks enqueueing the same
  // collective at once, at least the second to write sees the first.
  for (size_t i = 0; i < peerKeys_.size(); ++i) {
    Note* p = peer(i);
    if (p == nullptr) continue;  // not registered yet: it has enqueued nothing
    Entry theirs;
    {
      std::lock_guard<std::mutex> lock(p->mu);
      if (!p->valid || p->last.seq != seq) continue;
      theirs = p->last;
    }
    if (!serialized(mine, theirs)) continue;
    // Named in rank order, whichever of the two enqueued first.
    const int peer = peerKeys_[i].first;
    const bool peerFirst = peer < rank_;
    const Entry& low = peerFirst ? theirs : mine;
    const Entry& high = peerFirst ? mine : theirs;
    const int lowRank = peerFirst ? peer : rank_, highRank = peerFirst ? rank_ : peer;
    const std::string what = low.kind == high.kind ? describe(low)
                                                   : describe(low) + " (rank " + std::to_string(lowRank) + ") and " +
                                                         describe(high) + " (rank " + std::to_string(highRank) + ")";
    return Status::error(collieInvalidUsage,
                         "ranks %d and %d are threads of this process on GPU %d, and their parts of collective #%llu "
                         "went to %s, which CUDA runs one after the other: the first kernel would wait for the "
                         "second until COLLIE_TIMEOUT. Give each rank its own stream (created with "
                         "cudaStreamNonBlocking where another rank uses the default stream)",
                         lowRank, highRank, device_, static_cast<unsigned long long>(seq), what.c_str());
  }
  return Status();
}

ColocatedStreams::Note* ColocatedStreams::peer(size_t i) {
  if (!peers_[i]) peers_[i] = ProcessTable<Note>::find(peerKeys_[i].second);
  return peers_[i].get();
}

void ColocatedStreams::queuedCollective(uint64_t seq) {
  // Calls of one rank come in order, so the count only grows; max() all the same, should one come twice.
  uint64_t now = note_->collectives.load(std::memory_order_relaxed);
  while (now < seq + 1 && !note_->collectives.compare_exchange_weak(now, seq + 1, std::memory_order_release,
                                                                    std::memory_order_relaxed)) {
  }
}

void ColocatedStreams::queuedP2p(int peer, uint64_t sends, uint64_t recvs) {
  if (peer < 0 || static_cast<size_t>(peer) >= slots_ || peer == rank_) return;
  note_->sends[static_cast<size_t>(peer)].fetch_add(sends, std::memory_order_release);
  note_->recvs[static_cast<size_t>(peer)].fetch_add(recvs, std::memory_order_release);
}

Status ColocatedStreams::waitForPeers(double timeoutSec, const std::function<Status()>& stop, bool* waited) {
  *waited = false;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const uint64_t collectives = note_->collectives.load(std::memory_order_relaxed);
  // The first peer still behind; checked again from there after each pause.
  for (size_t i = 0, polls = 0; i < peerKeys_.size(); ++polls) {
    const int r = peerKeys_[i].first;
    const uint64_t sent = note_->sends[static_cast<size_t>(r)].load(std::memory_order_relaxed);
    const uint64_t received = note_->recvs[static_cast<size_t>(r)].load(std::memory_order_relaxed);
    Note* p = peer(i);
    // Acquire: the peer's work, queued before its counts grew, is in its queue before ours.
    std::string owed;
    char buf[96];
    if (p == nullptr || !p->gone.load(std::memory_order_acquire)) {
      // What our queued work cannot finish without: the peer's part of every collective, its receives matching
      // our sends (a send's kernel ends only once its receiver has taken the data, so two ranks that each send,
      // then receive, in calls of their own would wait for each other) and its sends matching our receives.
      const uint64_t theirCollectives = p ? p->collectives.load(std::memory_order_acquire) : 0;
      const uint64_t theirRecvs = p ? p->recvs[static_cast<size_t>(rank_)].load(std::memory_order_acquire) : 0;
      const uint64_t theirSends = p ? p->sends[static_cast<size_t>(rank_)].load(std::memory_order_acquire) : 0;
      if (theirCollectives < collectives) {
        snprintf(buf, sizeof(buf), "its collective #%llu", static_cast<unsigned long long>(collectives - 1));
        owed = buf;
      } else if (theirRecvs < sent) {
        snprintf(buf, sizeof(buf), "its receive #%llu from rank %d", static_cast<unsigned long long>(sent - 1), rank_);
        owed = buf;
      } else if (theirSends < received) {
        snprintf(buf, sizeof(buf), "its send #%llu to rank %d", static_cast<unsigned long long>(received - 1), rank_);
        owed = buf;
      }
    }
    if (owed.empty()) {
      ++i;
      continue;
    }
    *waited = true;
    COLLIE_RETURN_IF_ERROR(stop());
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (secs > timeoutSec)
      return Status::error(
          collieTimeout,
          "rank %d waited %.1f s for rank %d, a thread of this process on GPU %d, to queue %s before queueing more: "
          "a rank queues a collective or a send/receive only once every rank sharing its GPU in this process has "
          "queued its part of what this rank queued before, since its kernel could otherwise hold back the peer's "
          "in a hardware queue their streams share. One thread that makes several ranks' calls must make each call "
          "on every rank before the next, or group them (collieGroupStart/End)",
          rank_, secs, r, device_, owed.c_str());
    pauseForPeer(polls);
  }
  return Status();
}

}  // namespace collie
