// Streams and events of the fake CUDA runtime: one FIFO and one worker thread per stream, the legacy
// default stream's implicit synchronization with blocking streams, synchronization, sticky errors.
#include <algorithm>
#include <system_error>

#include "internal.h"

namespace fakecuda {
namespace detail {
namespace {

bool depsDone(const std::vector<Dep>& deps) {
  for (const Dep& d : deps)
    if (d.stream->done < d.ticket) return false;
  return true;
}

// Waiting on a stream that is capturing (synchronize, query) is refused and spoils the capture.
cudaError_t refuseCapturing(Stream& s) {
  if (!s.capture) return cudaSuccess;
  invalidate(*s.capture);
  return cudaErrorStreamCaptureUnsupported;
}

// The hardware-queue model (COLLIE_TEST_FAKE_CUDA_QUEUES, off by default): a GPU has a few work queues
// (CUDA_DEVICE_MAX_CONNECTIONS, default 8) and streams share them when they outnumber them. A kernel,
// a copy or a wait for an event starts only at the head of its queue, once its own dependencies (the
// previous item of its stream, the event) are done, and until then holds back every item behind it,
// whatever their stream. An event's record holds nothing back: it completes in its stream's order
// without entering the queue. The real mapping of streams to queues is not documented; here streams
// are dealt to the queues in turn, in the order they are made.
bool atQueueHead(State& st, const Stream& s) {
  if (!s.queue.front().inHwQueue) return true;
  const HardwareQueue& q = deviceState(st, s.device).queues[static_cast<size_t>(s.hwQueue)];
  return !q.empty() && q.front().first == &s && q.front().second == s.done + 1;
}

// Runs `s`'s items in order, each once its dependencies are done. After a device's sticky error its
// items complete without running, as a GPU context that hit one runs no more kernels.
void workerLoop(std::shared_ptr<Stream> s) {
  self().device = s->device;
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  for (;;) {
    st.progress.wait(lock, [&] {
      return (!s->queue.empty() && depsDone(s->queue.front().deps) && atQueueHead(st, *s)) ||
             (s->destroyed && s->queue.empty());
    });
    if (s->queue.empty()) break;
    Item item = std::move(s->queue.front());
    s->queue.pop_front();
    if (item.inHwQueue) {
      deviceState(st, s->device).queues[static_cast<size_t>(s->hwQueue)].pop_front();
      st.progress.notify_all();  // the next item of the hardware queue may start now
    }
    const bool dead = deviceState(st, s->device).sticky != cudaSuccess;
    lock.unlock();
    cudaError_t e = cudaSuccess;
    if (item.work && !dead) {
      try {
        e = item.work();
      } catch (...) {
        e = cudaErrorLaunchFailure;
      }
    }
    const Clock::time_point at = Clock::now();
    std::shared_ptr<Marker> marker = std::move(item.marker);
    item = Item();  // the work's captures are released without the mutex
    lock.lock();
    drainDeferredFrees(st);
    DeviceState& d = deviceState(st, s->device);
    if (e != cudaSuccess && d.sticky == cudaSuccess) d.sticky = e;
    if (marker) {
      marker->done = true;
      marker->at = at;
    }
    ++s->done;
    st.progress.notify_all();
  }
  std::vector<std::shared_ptr<Stream>>& list = deviceState(st, s->device).streams;
  list.erase(std::remove(list.begin(), list.end(), s), list.end());
  st.progress.notify_all();
}

cudaError_t startWorker(State& st, const std::shared_ptr<Stream>& s) {
  // Streams are dealt to the hardware queues in turn, in the order they are made (the legacy stream too).
  DeviceState& d = deviceState(st, s->device);
  if (const int queues = hardwareQueues(); queues > 0) {
    // Grown, never shrunk: streams made under a larger setting keep their queue.
    if (d.queues.size() < static_cast<size_t>(queues)) d.queues.resize(static_cast<size_t>(queues));
    s->hwQueue = static_cast<int>(d.streamsMade++ % static_cast<uint64_t>(queues));
  }
  try {
    std::thread(workerLoop, s).detach();
  } catch (const std::system_error&) {
    return cudaErrorMemoryAllocation;
  }
  d.streams.push_back(s);
  return cudaSuccess;
}

// The legacy default stream's implicit ordering for an item pushed on `s` now.
std::vector<Dep> legacyDeps(State& st, const std::shared_ptr<Stream>& s) {
  std::vector<Dep> deps;
  DeviceState& d = deviceState(st, s->device);
  if (s->isDefault) {
    for (const std::shared_ptr<Stream>& o : d.streams)
      if (o->blocking() && o->issued > o->done) deps.push_back({o, o->issued});
  } else if (s->blocking() && d.legacy && d.legacy->issued > d.legacy->done) {
    deps.push_back({d.legacy, d.legacy->issued});
  }
  return deps;
}

std::shared_ptr<Event> findEvent(State& st, cudaEvent_t e) {
  auto it = st.events.find(e);
  return it == st.events.end() ? nullptr : it->second;
}

}  // namespace

bool isLegacyHandle(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread; }

std::shared_ptr<Stream> legacyStream(State& st, int device) {
  DeviceState& d = deviceState(st, device);
  if (!d.legacy) {
    auto s = std::make_shared<Stream>();
    s->device = device;
    s->isDefault = true;
    if (startWorker(st, s) != cudaSuccess) return nullptr;
    d.legacy = s;
  }
  return d.legacy;
}

cudaError_t resolveStream(State& st, cudaStream_t handle, std::shared_ptr<Stream>* out) {
  if (isLegacyHandle(handle)) {
    *out = legacyStream(st, self().device);
    return *out ? cudaSuccess : cudaErrorMemoryAllocation;
  }
  auto it = st.streams.find(handle);
  if (it == st.streams.end()) return cudaErrorInvalidResourceHandle;
  *out = it->second;
  return cudaSuccess;
}

std::vector<Dep> orderingDeps(State& st, const std::shared_ptr<Stream>& s) {
  std::vector<Dep> deps = legacyDeps(st, s);
  if (s->issued > s->done) deps.push_back({s, s->issued});
  return deps;
}

uint64_t push(State& st, const std::shared_ptr<Stream>& s, Item item) {
  if (s->isDefault) countDeviceWait();  // the legacy stream's work waits for every blocking stream's
  item.inHwQueue = s->hwQueue >= 0 && (item.work || !item.deps.empty());
  for (Dep& d : legacyDeps(st, s)) item.deps.push_back(std::move(d));
  const bool queued = item.inHwQueue;
  s->queue.push_back(std::move(item));
  ++s->issued;
  if (queued) deviceState(st, s->device).queues[static_cast<size_t>(s->hwQueue)].emplace_back(s.get(), s->issued);
  st.progress.notify_all();
  return s->issued;
}

void waitFor(State& st, std::unique_lock<std::mutex>& lock, const std::vector<Dep>& deps) {
  st.progress.wait(lock, [&] { return depsDone(deps); });
}

void drainDevice(State& st, std::unique_lock<std::mutex>& lock, int device) {
  countDeviceWait();
  std::vector<Dep> deps;
  for (const auto& [index, d] : st.devices)
    if (device < 0 || index == device)
      for (const std::shared_ptr<Stream>& s : d.streams)
        if (s->issued > s->done) deps.push_back({s, s->issued});
  waitFor(st, lock, deps);
}

cudaError_t submit(State& st, const std::shared_ptr<Stream>& s, Work& work, std::shared_ptr<void> keepAlive) {
  if (s->capture) {
    if (s->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    if (keepAlive) work = [w = std::move(work), k = std::move(keepAlive)] { return w(); };
    return recordNode(st, *s, work);
  }
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (const cudaError_t e = deviceState(st, s->device).sticky) return e;
  Item item;
  item.work = std::move(work);
  item.keepAlive = std::move(keepAlive);
  push(st, s, std::move(item));
  return cudaSuccess;
}

}  // namespace detail

cudaError_t enqueue(cudaStream_t stream, Work work) {
  using namespace detail;
  if (const cudaError_t e = begin()) return report(e);
  if (!work) return report(cudaErrorInvalidValue);
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, stream, &s)) return report(e);
  // A kernel runs in the current device's context; a stream of another device is not a handle there.
  if (s->device != self().device) return report(cudaErrorInvalidResourceHandle);
  return report(submit(st, s, work));
}

}  // namespace fakecuda

using namespace fakecuda::detail;

namespace {

cudaError_t streamCreate(cudaStream_t* out, unsigned int flags) {
  if (out == nullptr || (flags & ~static_cast<unsigned>(cudaStreamNonBlocking)) != 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  auto s = std::make_shared<Stream>();
  s->device = self().device;
  s->flags = flags;
  if (const cudaError_t e = startWorker(st, s)) return e;
  st.streams[s.get()] = s;
  *out = reinterpret_cast<cudaStream_t>(s.get());
  return cudaSuccess;
}

// Returns at once, as CUDA does: queued work still runs, then the worker exits.
cudaError_t streamDestroy(cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  if (isLegacyHandle(handle)) return cudaErrorInvalidResourceHandle;
  State& st = state();
  auto lock = lockState();
  auto it = st.streams.find(handle);
  if (it == st.streams.end()) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<Stream> s = it->second;
  // Destroying a capturing stream: CUDA leaves this undefined; refusing keeps the capture endable.
  if (const cudaError_t e = refuseCapturing(*s)) return e;
  st.streams.erase(it);
  s->destroyed = true;
  st.progress.notify_all();
  return cudaSuccess;
}

cudaError_t streamSynchronize(cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (const cudaError_t e = refuseCapturing(*s)) return e;
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (const cudaError_t e = unsafeCallCheck(st)) return e;
  if (s->isDefault) countDeviceWait();
  waitFor(st, lock, orderingDeps(st, s));
  return deviceState(st, s->device).sticky;
}

cudaError_t streamQuery(cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (const cudaError_t e = refuseCapturing(*s)) return e;
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (const cudaError_t e = deviceState(st, s->device).sticky) return e;
  for (const Dep& d : orderingDeps(st, s))
    if (d.stream->done < d.ticket) return cudaErrorNotReady;
  return cudaSuccess;
}

cudaError_t streamGetDevice(cudaStream_t handle, int* device) {
  if (device == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  // "Potentially unsafe" during a global-mode capture: CUDA refuses it with
  // cudaErrorStreamCaptureUnsupported and invalidates the capture.
  if (const cudaError_t e = unsafeCallCheck(st)) return e;
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  *device = s->device;
  return cudaSuccess;
}

cudaError_t streamGetFlags(cudaStream_t handle, unsigned int* flags) {
  if (flags == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  *flags = s->flags;
  return cudaSuccess;
}

cudaError_t deviceSynchronize() {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  const int device = self().device;
  // Synchronizing a device that has a capture in progress is invalid whatever the threads' modes.
  bool capturing = false;
  for (const std::shared_ptr<Capture>& c : st.captures)
    if (c->device == device) {
      invalidate(*c);
      capturing = true;
    }
  if (capturing) return cudaErrorStreamCaptureUnsupported;
  if (const cudaError_t e = unsafeCallCheck(st)) return e;
  drainDevice(st, lock, device);
  return deviceState(st, device).sticky;
}

constexpr unsigned kEventFlags = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;

cudaError_t eventCreate(cudaEvent_t* out, unsigned int flags) {
  if (out == nullptr || (flags & ~kEventFlags) != 0) return cudaErrorInvalidValue;
  if ((flags & cudaEventInterprocess) != 0 && (flags & cudaEventDisableTiming) == 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  auto ev = std::make_shared<Event>();
  ev->device = self().device;
  ev->flags = flags;
  st.events[ev.get()] = ev;
  *out = reinterpret_cast<cudaEvent_t>(ev.get());
  return cudaSuccess;
}

cudaError_t eventDestroy(cudaEvent_t event) {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  return st.events.erase(event) == 1 ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

cudaError_t eventRecord(cudaEvent_t event, cudaStream_t handle, unsigned int flags) {
  if ((flags & ~static_cast<unsigned>(cudaEventRecordExternal)) != 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Event> ev = findEvent(st, event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (s->device != ev->device) return cudaErrorInvalidResourceHandle;
  if (s->capture) {
    if (s->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    if (flags == cudaEventRecordExternal) {
      Node node;  // records the event at each launch; the event itself is left as it is
      node.kind = Node::kRecord;
      node.event = ev;
      return recordNode(st, *s, node);
    }
    // No node: the event now stands for the capture's nodes so far on `s` (a fork or join point).
    ev->captured = true;
    ev->capture = s->capture;
    ev->capturedTail = s->tail;
    return cudaSuccess;
  }
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (const cudaError_t e = deviceState(st, s->device).sticky) return e;
  Item item;
  item.marker = std::make_shared<Marker>();
  ev->marker = item.marker;
  ev->record = {s, push(st, s, std::move(item))};
  ev->captured = false;
  ev->capture.reset();
  ev->capturedTail.clear();
  return cudaSuccess;
}

cudaError_t eventQuery(cudaEvent_t event) {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Event> ev = findEvent(st, event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  if (ev->captured) return cudaErrorCapturedEvent;
  if (const cudaError_t e = unsafeCallCheck(st)) return e;
  if (!ev->record.stream) return cudaSuccess;
  if (const cudaError_t e = deviceState(st, ev->record.stream->device).sticky) return e;
  return ev->record.stream->done >= ev->record.ticket ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t eventSynchronize(cudaEvent_t event) {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Event> ev = findEvent(st, event);
  if (!ev) return cudaErrorInvalidResourceHandle;
  if (ev->captured) return cudaErrorCapturedEvent;
  if (const cudaError_t e = unsafeCallCheck(st)) return e;
  if (!ev->record.stream) return cudaSuccess;
  const Dep record = ev->record;
  waitFor(st, lock, {record});
  return deviceState(st, record.stream->device).sticky;
}

cudaError_t eventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Event> a = findEvent(st, start), b = findEvent(st, end);
  if (!a || !b) return cudaErrorInvalidResourceHandle;
  if (((a->flags | b->flags) & cudaEventDisableTiming) != 0) return cudaErrorInvalidResourceHandle;
  if (a->captured || b->captured) return cudaErrorCapturedEvent;
  if (!a->record.stream || !b->record.stream) return cudaErrorInvalidResourceHandle;
  if (!a->marker->done || !b->marker->done) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->marker->at - a->marker->at).count();
  return cudaSuccess;
}

}  // namespace

namespace fakecuda::detail {
namespace {
thread_local unsigned long long tHostWaits = 0;
thread_local unsigned long long tDeviceWaits = 0;
}  // namespace
void countHostWait() { ++tHostWaits; }
void countDeviceWait() { ++tDeviceWaits; }
}  // namespace fakecuda::detail

extern "C" {

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* stream) { return report(streamCreate(stream, 0)); }

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return report(streamCreate(stream, flags));
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) { return report(streamDestroy(stream)); }

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  countHostWait();
  return report(streamSynchronize(stream));
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) { return report(streamQuery(stream)); }

cudaError_t CUDARTAPI cudaStreamGetDevice(cudaStream_t stream, int* device) {
  return report(streamGetDevice(stream, device));
}

cudaError_t CUDARTAPI cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  return report(streamGetFlags(stream, flags));
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  countHostWait();
  return report(deviceSynchronize());
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) { return report(eventCreate(event, cudaEventDefault)); }

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  return report(eventCreate(event, flags));
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) { return report(eventDestroy(event)); }

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return report(eventRecord(event, stream, cudaEventRecordDefault));
}

cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  return report(eventRecord(event, stream, flags));
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) { return report(eventQuery(event)); }

// Tests hold a stream with it (a host function that waits for a flag). Stricter than CUDA: the stream must be
// of the current device, as for a kernel.
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  if (fn == nullptr) return report(cudaErrorInvalidValue);
  return fakecuda::enqueue(stream, [fn, userData] {
    fn(userData);
    return cudaSuccess;
  });
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  countHostWait();
  return report(eventSynchronize(event));
}

cudaError_t CUDARTAPI cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return report(eventElapsedTime(ms, start, end));
}

unsigned long long fakecudaHostWaitsOfThisThread(void) { return fakecuda::detail::tHostWaits; }
unsigned long long fakecudaDeviceWaitsOfThisThread(void) { return fakecuda::detail::tDeviceWaits; }

}  // extern "C"
