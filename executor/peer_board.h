// Where the ranks of one communicator that are threads of one process meet on the host, for the calls whose
// enqueue needs its peers' parts (executor/cuda_copy_engine.cc, direct_ce; executor/cuda_one_launch.cc, one launch
// serving every rank). A copy by the copy engine (cudaMemcpyAsync) takes its addresses from the host when it is
// queued, and a launch serving every rank takes every rank's arguments, so before a rank queues the call's work it
// must know its peers' parts, and its stream must wait for events its peers have already recorded (waiting on an
// event not yet recorded waits for nothing). So each call meets twice: every rank posts its part and the event
// recorded where its stream reached the call, then, once its work is queued, the event recorded after it.
//
// Each rank's post lies in a process-wide table under its device window's address (executor/process_table.h),
// so no communicator object is shared between the ranks' threads. A post's fields are written before its stamp
// (release) and read after it (acquire); a rank rewrites them only after every peer has posted the call's second
// meeting, which each does after reading them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kernels/direct_kernels.h"

namespace collie {

class PeerBoard {
 public:
  /// What a rank posts at a meeting.
  struct Post {
    const void* input = nullptr;
    void* output = nullptr;
    void* event = nullptr;   // a cudaEvent_t recorded on the rank's stream before the post
    uint64_t signature = 0;  // the call's (ExecArgs::callSignature): ranks whose calls differ refuse them
    // All-to-all-v, by peer (elements): what the rank sends it, receives from it, and where that lands in the
    // rank's output. Copied with the post, since a rank that refuses the call returns from it at once, while its
    // peers may still be reading.
    static constexpr int kMaxRanks = 8;
    uint64_t sendCount[kMaxRanks] = {};
    uint64_t recvCount[kMaxRanks] = {};
    uint64_t recvDispl[kMaxRanks] = {};
    // One launch serving every rank (cuda_one_launch.cc): the rank's one-shot arguments and blocks, and whether
    // its stream is being captured into a CUDA graph.
    DirectArgs direct;
    int blocks = 0;
    bool captured = false;
  };
  enum Meeting : uint64_t { kReady = 1, kDone = 2 };

  /// `own` keys this rank in the table (its device window's address: unique in the process while the
  /// communicator lives); `peers` are every other rank with its key, all threads of this process. The board owns
  /// `events`, this rank's two (cudaEvent_t): its peers' streams may wait for them until the peers' boards are
  /// gone too, so `destroy` frees them only when the last board that could reach them goes.
  PeerBoard(int rank, const void* own, std::vector<std::pair<int, const void*>> peers, void* readyEvent,
            void* doneEvent, void (*destroy)(void*));
  void* readyEvent() const;
  void* doneEvent() const;
  ~PeerBoard();
  PeerBoard(const PeerBoard&) = delete;
  PeerBoard& operator=(const PeerBoard&) = delete;

  /// Posts `mine` for meeting `m` of collective #`seq` and waits until every peer has posted the same, or a later
  /// one (a peer whose calls are out of step with this rank's, whose signature then differs): then (*posts)[r] is
  /// rank r's post (this rank's own included). `stop` is asked between polls; a status it returns
  /// other than OK ends the wait with it. After `timeoutSec`: collieTimeout naming the late peer and `what` (the
  /// call's algorithm, for the sentence).
  Status meet(uint64_t seq, Meeting m, const Post& mine, double timeoutSec, const std::function<Status()>& stop,
              const char* what, std::vector<Post>* posts);

  struct Slot;  // one rank's post (peer_board.cc)

 private:
  int rank_;
  const void* own_;
  std::shared_ptr<Slot> slot_;
  std::vector<std::pair<int, const void*>> peerKeys_;
  std::vector<std::shared_ptr<Slot>> peers_;  // found in the table on first use (a peer may register later)
  size_t slots_;                              // ranks 0 .. the highest of this rank and its peers: meet's posts
};

}  // namespace collie
