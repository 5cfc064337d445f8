#include "executor/host_executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/log.h"
#include "executor/step_runner.h"

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
int waitFor(Ready ready, const std::atomic<bool>* abort, double timeoutSec) {
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
      posted_(static_cast<size_t>(layout.nranks) * layout.nchannels, 0),
      consumed_(static_cast<size_t>(layout.nranks) * layout.nchannels, 0) {}

void HostExecutor::initWindow() {
  WindowHeader h{kWindowMagic,      layout_.nranks,    layout_.nslots,
                 layout_.slotBytes, layout_.nchannels, layout_.llSlotBytes};
  memcpy(windows_[static_cast<size_t>(rank_)], &h, sizeof(h));
}

Status HostExecutor::checkPeers() const {
  for (size_t r = 0; r < windows_.size(); ++r) {
    WindowHeader h;
    memcpy(&h, windows_[r], sizeof(h));
    if (h.magic != kWindowMagic || h.nranks != layout_.nranks || h.nslots != layout_.nslots ||
        h.slotBytes != layout_.slotBytes || h.nchannels != layout_.nchannels)
      return Status::error(collieInvalidUsage,
                           "rank %zu's window has %u slots of %llu bytes for %u ranks, rank %d's has %u of %llu for "
                           "%u: all ranks must use the same COLLIE_SLOTS / COLLIE_SLOT_BYTES / COLLIE_WINDOW_BYTES",
                           r, h.nslots, static_cast<unsigned long long>(h.slotBytes), h.nranks, rank_, layout_.nslots,
                           static_cast<unsigned long long>(layout_.slotBytes), layout_.nranks);
  }
  return Status();
}

// The host's primitives for the shared step runner (executor/step_runner.h):
// one thread, flags through acquire/release atomics on the mapped windows.
template <typename T, ReduceOp Op>
class HostPrims {
 public:
  HostPrims(int rank, int channel, const WindowLayout& layout, const std::vector<uint8_t*>& windows, uint64_t* posted,
            uint64_t* consumed, const std::atomic<bool>* abort, double timeoutSec)
      : rank_(rank),
        channel_(channel),
        layout_(layout),
        windows_(windows),
        mine_(windows[static_cast<size_t>(rank)]),
        posted_(posted),
        consumed_(consumed),
        abort_(abort),
        timeoutSec_(timeoutSec) {}

  bool arrived(int p) const { return sliceReady(consumed_[p], loadAcquire(mine_ + layout_.readyOffset(channel_, p))); }
  bool room(int q) const {
    return slotFree(posted_[q], loadAcquire(mine_ + layout_.creditOffset(channel_, q)), layout_.nslots);
  }
  int waitArrived(int p) const {
    return waitFor([&] { return arrived(p); }, abort_, timeoutSec_);
  }
  int waitRoom(int q) const {
    return waitFor([&] { return room(q); }, abort_, timeoutSec_);
  }
  int waitEither(bool sending, int q, bool receiving, int p) const {
    return waitFor([&] { return (sending && room(q)) || (receiving && arrived(p)); }, abort_, timeoutSec_);
  }
  const T* inSlot(int p) const {
    return reinterpret_cast<const T*>(mine_ + layout_.slotOffset(channel_, p, consumed_[p]));
  }
  T* outSlot(int q) const {
    return reinterpret_cast<T*>(windows_[static_cast<size_t>(q)] + layout_.slotOffset(channel_, rank_, posted_[q]));
  }
  void release(int p) {
    storeRelease(windows_[static_cast<size_t>(p)] + layout_.creditOffset(channel_, rank_), ++consumed_[p]);
  }
  void post(int q, uint64_t /*n*/) {
    storeRelease(windows_[static_cast<size_t>(q)] + layout_.readyOffset(channel_, rank_), ++posted_[q]);
  }

  void copy(T* dst, const T* src, uint64_t n, int divisor) const { copyElements(dst, src, n, divisor); }
  void reduce(T* dst, const T* a, const T* b, uint64_t n, int divisor) const {
    reduceElements<T, Op>(dst, a, b, n, divisor);
  }
  void copy2(T* dst1, T* dst2, const T* src, uint64_t n, int divisor) const {
    memcpy(dst1, src, n * sizeof(T));
    copyElements(dst2, src, n, divisor);
  }

 private:
  int rank_;
  int channel_;
  const WindowLayout& layout_;
  const std::vector<uint8_t*>& windows_;
  uint8_t* mine_;
  uint64_t* posted_;
  uint64_t* consumed_;
  const std::atomic<bool>* abort_;
  double timeoutSec_;
};

template <typename T, ReduceOp Op>
Status HostExecutor::runTyped(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  uint64_t scratchCount = 0;
  for (const ChannelWork& w : work) scratchCount = std::max(scratchCount, w.program->scratchCount);
  if (scratch_.size() < scratchCount * sizeof(T)) scratch_.resize(scratchCount * sizeof(T));
  // Channels run one after another: each is a complete pipeline of its own,
  // so every rank taking them in the same order cannot deadlock. Several
  // channels on the host exist to test the GPU's channel plan on the CPU.
  const int nch = args.splitSteps ? static_cast<int>(layout_.nchannels) : static_cast<int>(work.size());
  StepFailure f;
  const Program* failed = nullptr;
  for (int c = 0; c < nch && f.code == collieSuccess; ++c) {
    const ChannelWork& w = work[args.splitSteps ? 0 : static_cast<size_t>(c)];
    T* const bufs[3] = {args.input ? static_cast<T*>(const_cast<void*>(args.input)) + w.offset : nullptr,
                        args.output ? static_cast<T*>(args.output) + w.offset : nullptr,
                        reinterpret_cast<T*>(scratch_.data())};
    const size_t at = static_cast<size_t>(c) * layout_.nranks;
    HostPrims<T, Op> prims(rank_, c, layout_, windows_, posted_.data() + at, consumed_.data() + at, abort_,
                           timeoutSec_);
    f = runSteps<T>(prims, w.program->steps.data(), static_cast<int>(w.program->steps.size()), bufs,
                    layout_.slotBytes / sizeof(T), args.divisor, args.splitSteps ? c : 0, args.splitSteps ? nch : 1,
                    16 / sizeof(T));
    failed = w.program;
  }
  const Program& program = *failed;
  if (f.code == collieSuccess) return Status();
  const collieResult_t code = static_cast<collieResult_t>(f.code);
  Status st = Status::error(code, "rank %d waiting on rank %d at step %d of %s %s #%llu %s after %.1f s", rank_, f.peer,
                            f.step, program.algorithm.c_str(), collectiveName(program.collective),
                            static_cast<unsigned long long>(args.seq),
                            code == collieTimeout ? "timed out" : "was aborted", timeoutSec_);
  COLLIE_WARN("%s", st.message().c_str());
  return st;
}

Status HostExecutor::run(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  if (work.empty()) return Status();
  Status st = Status::error(collieInvalidArgument, "unknown data type %d", static_cast<int>(args.type));
  visitType(args.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(args.op, [&](auto op) { st = runTyped<T, decltype(op)::value>(work, args); });
  });
  return st;
}

}  // namespace collie
