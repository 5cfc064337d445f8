#include "executor/host_executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/log.h"

namespace collie {

namespace {

uint64_t loadAcquire(const uint8_t* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}
void storeRelease(uint8_t* p, uint64_t v) { __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE); }

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Waits until ready() holds. Backs off because CI runs 8 ranks on 2 cores: a
// rank that keeps spinning holds the core its peer needs to make progress.
// Spin briefly (the peer is usually a few hundred ns away), then yield the core,
// then sleep in growing steps up to 100 us. Bounded by timeoutSec and the abort flag.
template <typename Ready>
collieResult_t waitFor(Ready ready, const std::atomic<bool>* abort, double timeoutSec) {
  for (int i = 0; i < 200; ++i) {
    if (ready()) return collieSuccess;
    cpuRelax();
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSec));
  long sleepNs = 1000;
  for (uint64_t i = 0;; ++i) {
    if (ready()) return collieSuccess;
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) return collieRemoteError;
    const Clock::time_point now = Clock::now();
    if (now > deadline) return collieTimeout;
    if (now - start < std::chrono::milliseconds(2)) {
      sched_yield();
    } else {
      timespec ts{0, sleepNs};
      nanosleep(&ts, nullptr);
      sleepNs = std::min(sleepNs * 2, 100000L);
    }
  }
}

// dst[i] = src[i] (/ divisor). dst and src may be the same range (in-place).
template <typename T>
void copyElements(T* dst, const T* src, uint64_t n, int divisor) {
  if (divisor > 0) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = divideBy(src[i], divisor);
  } else if (dst != src) {
    memmove(dst, src, n * sizeof(T));
  }
}

// dst[i] = a[i] (op) b[i] (/ divisor). dst may alias b (in-place), element by element.
template <typename T, ReduceOp Op>
void reduceElements(T* dst, const T* a, const T* b, uint64_t n, int divisor) {
  if (divisor > 0) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = divideBy(applyOp<Op>(a[i], b[i]), divisor);
  } else {
    for (uint64_t i = 0; i < n; ++i) dst[i] = applyOp<Op>(a[i], b[i]);
  }
}

}  // namespace

HostExecutor::HostExecutor(int rank, const WindowLayout& layout, std::vector<uint8_t*> windows,
                           const std::atomic<bool>* abort, double timeoutSec)
    : rank_(rank),
      layout_(layout),
      windows_(std::move(windows)),
      abort_(abort),
      timeoutSec_(timeoutSec),
      posted_(layout.nranks, 0),
      consumed_(layout.nranks, 0) {}

void HostExecutor::initWindow() {
  WindowHeader h{kWindowMagic, layout_.nranks, layout_.nslots, layout_.slotBytes};
  memcpy(windows_[static_cast<size_t>(rank_)], &h, sizeof(h));
}

Status HostExecutor::checkPeers() const {
  for (size_t r = 0; r < windows_.size(); ++r) {
    WindowHeader h;
    memcpy(&h, windows_[r], sizeof(h));
    if (h.magic != kWindowMagic || h.nranks != layout_.nranks || h.nslots != layout_.nslots ||
        h.slotBytes != layout_.slotBytes)
      return Status::error(collieInvalidUsage,
                           "rank %zu's window has %u slots of %llu bytes for %u ranks, rank %d's has %u of %llu for "
                           "%u: all ranks must use the same COLLIE_SLOTS / COLLIE_SLOT_BYTES / COLLIE_WINDOW_BYTES",
                           r, h.nslots, static_cast<unsigned long long>(h.slotBytes), h.nranks, rank_, layout_.nslots,
                           static_cast<unsigned long long>(layout_.slotBytes), layout_.nranks);
  }
  return Status();
}

template <typename T, ReduceOp Op>
Status HostExecutor::runTyped(const Program& program, const ExecArgs& args) {
  T* const input = static_cast<T*>(const_cast<void*>(args.input));
  T* const output = static_cast<T*>(args.output);
  if (scratch_.size() < program.scratchCount * sizeof(T)) scratch_.resize(program.scratchCount * sizeof(T));
  T* const scratch = reinterpret_cast<T*>(scratch_.data());
  auto at = [&](const Range& r) {
    return (r.buffer == Buffer::kInput ? input : (r.buffer == Buffer::kOutput ? output : scratch)) + r.offset;
  };
  uint8_t* const mine = windows_[static_cast<size_t>(rank_)];
  const uint64_t perSlice = layout_.slotBytes / sizeof(T);

  for (size_t si = 0; si < program.steps.size(); ++si) {
    const Step& s = program.steps[si];
    const int divisor = s.finalize ? args.divisor : 0;
    if (s.op == StepOp::kCopy) {
      copyElements(at(s.dst), at(s.src), s.count, divisor);
      continue;
    }
    if (s.op == StepOp::kReduce) {
      reduceElements<T, Op>(at(s.dst), at(s.src), at(s.dst), s.count, divisor);
      continue;
    }
    auto fail = [&](collieResult_t code, int peer) {
      const char* what = code == collieTimeout ? "timed out" : "was aborted";
      Status st = Status::error(code, "rank %d waiting on rank %d at step %zu of %s %s #%llu %s after %.1f s", rank_,
                                peer, si, program.algorithm.c_str(), collectiveName(program.collective),
                                static_cast<unsigned long long>(args.seq), what, timeoutSec_);
      COLLIE_WARN("%s", st.message().c_str());
      return st;
    };
    const int p = s.recvPeer, q = s.sendPeer;
    // Slot readiness: the next slice from p has arrived; our next slot at q is free.
    auto arrived = [&] { return sliceReady(consumed_[p], loadAcquire(mine + layout_.readyOffset(p))); };
    auto room = [&] { return slotFree(posted_[q], loadAcquire(mine + layout_.creditOffset(q)), layout_.nslots); };
    auto inSlot = [&] { return reinterpret_cast<const T*>(mine + layout_.slotOffset(p, consumed_[p])); };
    auto outSlot = [&] {
      return reinterpret_cast<T*>(windows_[static_cast<size_t>(q)] + layout_.slotOffset(rank_, posted_[q]));
    };
    auto release = [&] {
      storeRelease(windows_[static_cast<size_t>(p)] + layout_.creditOffset(rank_), ++consumed_[p]);
    };
    auto post = [&] { storeRelease(windows_[static_cast<size_t>(q)] + layout_.readyOffset(rank_), ++posted_[q]); };

    if (stepIsExchange(s.op)) {
      // Both directions at once: send a slice whenever the peer has room,
      // take one whenever it has arrived, so neither waits on the other.
      uint64_t sent = 0, got = 0;
      while (sent < s.count || got < s.recvCount) {
        bool progressed = false;
        if (sent < s.count && room()) {
          const uint64_t n = std::min(perSlice, s.count - sent);
          memcpy(outSlot(), at(s.src) + sent, n * sizeof(T));
          post();
          sent += n;
          progressed = true;
        }
        if (got < s.recvCount && arrived()) {
          const uint64_t n = std::min(perSlice, s.recvCount - got);
          T* dst = at(s.dst) + got;
          if (s.op == StepOp::kSendRecvReduce) {
            reduceElements<T, Op>(dst, inSlot(), dst, n, divisor);
          } else {
            copyElements(dst, inSlot(), n, divisor);
          }
          release();
          got += n;
          progressed = true;
        }
        if (progressed) continue;
        const bool sending = sent < s.count, receiving = got < s.recvCount;
        collieResult_t rc =
            waitFor([&] { return (sending && room()) || (receiving && arrived()); }, abort_, timeoutSec_);
        if (rc != collieSuccess) return fail(rc, receiving ? p : q);
      }
      continue;
    }

    const bool in = stepReceives(s.op), out = stepSends(s.op);
    for (uint64_t off = 0; off < s.count; off += perSlice) {
      const uint64_t n = std::min(perSlice, s.count - off);
      if (in) {
        collieResult_t rc = waitFor(arrived, abort_, timeoutSec_);
        if (rc != collieSuccess) return fail(rc, p);
      }
      if (out) {
        collieResult_t rc = waitFor(room, abort_, timeoutSec_);
        if (rc != collieSuccess) return fail(rc, q);
      }
      const T* slotIn = in ? inSlot() : nullptr;
      T* slotOut = out ? outSlot() : nullptr;
      switch (s.op) {
        case StepOp::kSend:
          memcpy(slotOut, at(s.src) + off, n * sizeof(T));
          break;
        case StepOp::kRecv:
          copyElements(at(s.dst) + off, slotIn, n, divisor);
          break;
        case StepOp::kRecvReduceSend:
          reduceElements<T, Op>(slotOut, slotIn, at(s.src) + off, n, 0);
          break;
        case StepOp::kRecvReduceCopy:
          reduceElements<T, Op>(at(s.dst) + off, slotIn, at(s.src) + off, n, divisor);
          break;
        case StepOp::kRecvCopySend:
          memcpy(slotOut, slotIn, n * sizeof(T));
          copyElements(at(s.dst) + off, slotIn, n, divisor);
          break;
        default:
          break;  // local and exchange steps are handled above
      }
      if (in) release();
      if (out) post();
    }
  }
  return Status();
}

Status HostExecutor::run(const Program& program, const ExecArgs& args) {
  Status st = Status::error(collieInvalidArgument, "unknown data type %d", static_cast<int>(args.type));
  visitType(args.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(args.op, [&](auto op) { st = runTyped<T, decltype(op)::value>(program, args); });
  });
  return st;
}

}  // namespace collie
