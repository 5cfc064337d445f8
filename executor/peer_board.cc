#include "executor/peer_board.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "executor/process_table.h"

namespace collie {

struct PeerBoard::Slot {
  // 2 x seq + meeting of the last post; 0: none yet. The post's fields are written before it.
  std::atomic<uint64_t> stamp{0};
  std::atomic<bool> gone{false};
  // By meeting: a peer that has seen every rank's first post may make its second before this rank has read its
  // first.
  Post post[3];
  void* events[2] = {};  // readyEvent, doneEvent
  void (*destroy)(void*) = nullptr;
  ~Slot() {
    for (void* e : events)
      if (e != nullptr) destroy(e);
  }
};

namespace {

using Slot = PeerBoard::Slot;

uint64_t stampOf(uint64_t seq, PeerBoard::Meeting m) { return 2 * seq + static_cast<uint64_t>(m); }

}  // namespace

PeerBoard::PeerBoard(int rank, const void* own, std::vector<std::pair<int, const void*>> peers, void* readyEvent,
                     void* doneEvent, void (*destroy)(void*))
    : rank_(rank),
      own_(own),
      slot_(std::make_shared<Slot>()),
      peerKeys_(std::move(peers)),
      peers_(peerKeys_.size()),
      slots_(static_cast<size_t>(rank) + 1) {
  slot_->events[0] = readyEvent;
  slot_->events[1] = doneEvent;
  slot_->destroy = destroy;
  for (const auto& k : peerKeys_) slots_ = std::max(slots_, static_cast<size_t>(k.first) + 1);
  ProcessTable<Slot>::put(own_, slot_);
}

PeerBoard::~PeerBoard() {
  slot_->gone.store(true, std::memory_order_release);
  ProcessTable<Slot>::remove(own_, slot_);
}

void* PeerBoard::readyEvent() const { return slot_->events[0]; }
void* PeerBoard::doneEvent() const { return slot_->events[1]; }

Status PeerBoard::meet(uint64_t seq, Meeting m, const Post& mine, double timeoutSec,
                       const std::function<Status()>& stop, const char* what, std::vector<Post>* posts) {
  const uint64_t want = stampOf(seq, m);
  slot_->post[m] = mine;
  slot_->stamp.store(want, std::memory_order_release);
  posts->assign(slots_, Post{});
  (*posts)[static_cast<size_t>(rank_)] = mine;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  // The first peer not yet there; checked again from there after each pause.
  for (size_t i = 0, polls = 0; i < peerKeys_.size(); ++polls) {
    if (!peers_[i]) peers_[i] = ProcessTable<Slot>::find(peerKeys_[i].second);
    const Slot* p = peers_[i].get();
    const int r = peerKeys_[i].first;
    // A peer can be one meeting ahead (it has seen this rank's post and gone on), never further: it waits for
    // this rank's next post, and only then rewrites this meeting's.
    if (p != nullptr && p->stamp.load(std::memory_order_acquire) >= want) {
      (*posts)[static_cast<size_t>(r)] = p->post[m];
      ++i;
      continue;
    }
    if (p != nullptr && p->gone.load(std::memory_order_acquire))
      return Status::error(collieRemoteError,
                           "rank %d: rank %d, a thread of this process, destroyed its communicator before its part "
                           "of %s collective #%llu",
                           rank_, r, what, static_cast<unsigned long long>(seq));
    COLLIE_RETURN_IF_ERROR(stop());
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (secs > timeoutSec)
      return Status::error(
          collieTimeout,
          "rank %d waited %.1f s for rank %d, a thread of this process, to %s of %s collective #%llu: its enqueue "
          "takes its peers' parts on the host, so the ranks' calls meet there, and every rank must make its call "
          "from a thread of its own or inside one group (collieGroupStart/End) holding all of them; one thread "
          "making the ranks' calls one after the other waits here",
          rank_, secs, r, m == kReady ? "enqueue its part" : "queue its work", what,
          static_cast<unsigned long long>(seq));
    pauseForPeer(polls);
  }
  return Status();
}

}  // namespace collie
