#include "executor/colocated_streams.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>

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
};

namespace {

using Kind = Entry::Kind;
using Note = ColocatedStreams::Note;

// The process-wide table: each co-located rank's note by its window's address.
std::mutex tableMu;
std::map<const void*, std::weak_ptr<Note>>& table() {
  static auto* t = new std::map<const void*, std::weak_ptr<Note>>();  // never destroyed: ranks may outlive main
  return *t;
}

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
  std::lock_guard<std::mutex> lock(tableMu);
  table()[own_] = note_;
}

ColocatedStreams::~ColocatedStreams() {
  std::lock_guard<std::mutex> lock(tableMu);
  auto it = table().find(own_);
  if (it != table().end() && it->second.lock() == note_) table().erase(it);
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
    if (!peers_[i]) {
      std::lock_guard<std::mutex> lock(tableMu);
      auto it = table().find(peerKeys_[i].second);
      if (it != table().end()) peers_[i] = it->second.lock();
      if (!peers_[i]) continue;  // not registered yet: it has enqueued nothing
    }
    Entry theirs;
    {
      std::lock_guard<std::mutex> lock(peers_[i]->mu);
      if (!peers_[i]->valid || peers_[i]->last.seq != seq) continue;
      theirs = peers_[i]->last;
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

}  // namespace collie
