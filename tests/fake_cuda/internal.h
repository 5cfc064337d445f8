// The fake CUDA runtime's shared state and the helpers its files share.
//
// One mutex guards everything; one condition variable (`progress`) is notified on every change a
// waiter could care about (an item pushed or completed, a stream destroyed). No Work runs while the
// mutex is held: a worker pops an item, unlocks, runs it, and locks again to record its completion.
//
// Ordering is expressed with tickets: a stream's items are numbered 1, 2, ... as they are pushed
// (`issued`) and completed strictly in that order (`done`), so "everything queued on S before now"
// is the pair (S, S.issued) and is satisfied once S.done reaches it. Items carry such pairs as
// dependencies (the legacy default stream's implicit ordering, cudaStreamWaitEvent, a graph launch
// ordered after the previous launch of the same graph).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "fake_cuda.h"

namespace fakecuda {
namespace detail {

using Clock = std::chrono::steady_clock;
struct Stream;
struct Capture;

/// When an event's record completed; set by the worker that completes it.
struct Marker {
  bool done = false;
  Clock::time_point at{};
};

/// Satisfied once `stream` has completed its first `ticket` items.
struct Dep {
  std::shared_ptr<Stream> stream;
  uint64_t ticket = 0;
};

/// One entry of a stream's FIFO. `work` may be empty (a cudaStreamWaitEvent, an event's marker).
/// `keepAlive` holds what the work refers to (a graph's memory) until the item is gone.
struct Item {
  Work work;
  std::vector<Dep> deps;
  std::shared_ptr<Marker> marker;
  std::shared_ptr<void> keepAlive;
  bool inHwQueue = false;  // entered its stream's hardware queue (see atQueueHead in streams.cc)
};

struct Stream {
  int device = 0;
  int hwQueue = -1;  // its hardware queue (COLLIE_TEST_FAKE_CUDA_QUEUES); -1: the model is off
  unsigned flags = 0;
  bool isDefault = false;  // the device's legacy default stream (0, cudaStreamLegacy, cudaStreamPerThread)
  bool destroyed = false;  // handle gone; the worker drains the queue, then exits
  std::deque<Item> queue;
  uint64_t issued = 0;
  uint64_t done = 0;
  std::shared_ptr<Capture> capture;  // set while the stream takes part in a capture
  std::vector<size_t> tail;          // capture nodes the stream's next captured operation depends on
  /// A stream the legacy default stream synchronizes with.
  bool blocking() const { return !isDefault && (flags & cudaStreamNonBlocking) == 0; }
};

struct Event;

/// A captured operation; `deps` index earlier nodes of the same capture. kRecord and kWait are the
/// external event nodes (cudaEventRecordExternal, cudaEventWaitExternal): a launch records the event,
/// or waits for its latest record, as the launch is made.
struct Node {
  enum Kind { kWork, kRecord, kWait };
  Kind kind = kWork;
  Work work;
  std::weak_ptr<Event> event;
  std::vector<size_t> deps;
};

struct UserObject;

/// What a graph owns: allocations a capture made with cudaMallocAsync and freed with cudaFreeAsync (as a
/// graph's memory nodes own theirs), and references to user objects (cudaGraphRetainUserObject). Both
/// are released when the last graph, executable graph or queued launch referring to them is gone, as
/// CUDA defers a user object's release until the graph's launches have finished. The destructor only
/// queues the frees (deferFree) and runs user objects' destructors, which may make no CUDA call, so it
/// may run with the state mutex held.
struct GraphMem {
  std::vector<void*> ptrs;
  std::vector<UserObject*> users;  // one entry per reference
  ~GraphMem();
};

struct Capture {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  int device = 0;
  std::shared_ptr<Stream> origin;
  std::vector<std::shared_ptr<Stream>> members;  // origin first, then streams that joined via events
  bool invalidated = false;
  bool ended = false;
  std::vector<Node> nodes;
  std::shared_ptr<GraphMem> mem = std::make_shared<GraphMem>();
  std::set<void*> allocated;  // cudaMallocAsync'ed inside this capture
};

struct Event {
  int device = 0;
  unsigned flags = 0;
  bool captured = false;  // last recorded inside a capture
  std::shared_ptr<Capture> capture;
  std::vector<size_t> capturedTail;
  Dep record;  // last record outside a capture; stream null: never recorded (complete)
  std::shared_ptr<Marker> marker;
};

struct Graph {
  std::vector<Node> nodes;
  std::shared_ptr<GraphMem> mem;
};

struct GraphExec {
  std::vector<Node> nodes;
  std::shared_ptr<GraphMem> mem;
  Dep last;  // the previous launch's last item: launches of one executable graph never overlap
};

enum class Kind { kDevice, kHost, kManaged, kIpc };

struct Allocation {
  uint64_t id = 0;  // unique per process: a later allocation at the same address is another one
  char* base = nullptr;
  size_t size = 0;
  Kind kind = Kind::kDevice;
  int device = 0;
  bool pool = false;     // cudaMallocAsync: not exportable through cudaIpcGetMemHandle
  bool freeing = false;  // cudaFreeAsync queued
  std::string shm;       // kDevice (not pool): the shm object's name; kIpc: the name opened
  int ipcRefs = 0;       // kIpc: cudaIpcOpenMemHandle count
};

/// One hardware work queue: the items pushed on its streams, in push order, not yet started.
using HardwareQueue = std::deque<std::pair<const Stream*, uint64_t>>;

struct DeviceState {
  std::shared_ptr<Stream> legacy;                // created on first use
  std::vector<std::shared_ptr<Stream>> streams;  // every stream with a worker, legacy included
  std::vector<HardwareQueue> queues;             // COLLIE_TEST_FAKE_CUDA_QUEUES of them, or none
  uint64_t streamsMade = 0;                      // streams are dealt to the queues in turn
  cudaError_t sticky = cudaSuccess;
  size_t allocated = 0;
  std::set<int> peers;
};

struct State {
  std::mutex mu;
  std::condition_variable progress;
  std::map<int, DeviceState> devices;
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::map<std::string, uintptr_t> ipcByName;   // opened IPC mappings
  std::unordered_map<const void*, std::shared_ptr<Stream>> streams;
  std::unordered_map<const void*, std::shared_ptr<Event>> events;
  std::unordered_map<const void*, std::shared_ptr<Graph>> graphs;
  std::unordered_map<const void*, std::shared_ptr<GraphExec>> execs;
  std::vector<std::shared_ptr<Capture>> captures;  // not yet ended
  uint64_t serial = 0;
};

// ---------------------------------------------------------------- devices.cc
struct ThreadState {
  int device = 0;
  cudaError_t last = cudaSuccess;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
};
ThreadState& self();
State& state();
/// COLLIE_TEST_FAKE_CUDA_DEVICES, read on every call (default 1).
int deviceCount();
/// COLLIE_TEST_FAKE_CUDA_QUEUES (default 0: every stream is a queue of its own).
int hardwareQueues();
/// COLLIE_TEST_FAKE_CUDA_P2P (default 1; 0: no two devices reach each other, as GPUs without P2P).
bool peerAccess();
/// COLLIE_TEST_FAKE_CUDA_ALLOC_SYNC (default 1; 0: cudaMalloc and cudaHostAlloc do not wait for the device).
bool allocationsSynchronize();
/// COLLIE_TEST_FAKE_CUDA_POOLS (default 1; 0: cudaDevAttrMemoryPoolsSupported says no, as on GPUs without them).
bool memoryPools();
/// Records a failure as the thread's last error (cudaErrorNotReady is not an error) and returns it.
cudaError_t report(cudaError_t e);
/// Counts a call that may block the calling thread on device work (fakecudaHostWaitsOfThisThread).
void countHostWait();
/// Counts a call that waits for other streams' work (fakecudaDeviceWaitsOfThisThread).
void countDeviceWait();
/// What every call that needs a device checks first: CUDA unusable in a child forked after the
/// parent used it, no device, a current device beyond the count.
cudaError_t begin();
/// Locks the state and frees what GraphMem destructors queued.
std::unique_lock<std::mutex> lockState();
DeviceState& deviceState(State& st, int device);
bool validDevice(int device);

// ---------------------------------------------------------------- streams.cc
bool isLegacyHandle(cudaStream_t s);
/// The device's legacy default stream, with its worker started on first use.
std::shared_ptr<Stream> legacyStream(State& st, int device);
/// The stream behind a handle (0 / legacy / per-thread: the current device's default stream);
/// cudaErrorInvalidResourceHandle for an unknown or destroyed one.
cudaError_t resolveStream(State& st, cudaStream_t handle, std::shared_ptr<Stream>* out);
/// What an item pushed on `s` now would wait for: the legacy stream's implicit ordering, and `s` itself.
std::vector<Dep> orderingDeps(State& st, const std::shared_ptr<Stream>& s);
/// Pushes `item` (adding the legacy ordering) and returns its ticket.
uint64_t push(State& st, const std::shared_ptr<Stream>& s, Item item);
void waitFor(State& st, std::unique_lock<std::mutex>& lock, const std::vector<Dep>& deps);
/// Waits for the work queued so far on every stream of `device` (-1: of every device), as the
/// implicitly synchronizing calls (cudaFree, cudaFreeHost, cudaIpcCloseMemHandle) do.
void drainDevice(State& st, std::unique_lock<std::mutex>& lock, int device);
/// Issues device work on `s`: recorded into the capture if `s` captures, else pushed. Checks the
/// legacy stream's capture rule and the device's sticky error. `work` is moved from only on success,
/// so that a closure whose destructor calls the runtime is never destroyed under the state mutex.
cudaError_t submit(State& st, const std::shared_ptr<Stream>& s, Work& work, std::shared_ptr<void> keepAlive = {});

// ---------------------------------------------------------------- graphs.cc
void invalidate(Capture& c);
/// Work on the legacy default stream while a blocking stream of its device captures:
/// cudaErrorStreamCaptureImplicit, and those captures are invalidated.
cudaError_t legacyCaptureCheck(State& st, const Stream& s);
/// A potentially unsafe call (see cudaThreadExchangeStreamCaptureMode) made while a capture forbids
/// it to this thread: cudaErrorStreamCaptureUnsupported, and the forbidding captures are invalidated.
cudaError_t unsafeCallCheck(State& st);
/// Appends a node to the capture `s` takes part in (cudaErrorStreamCaptureInvalidated if invalidated).
/// `node.work` is moved from only on success.
cudaError_t recordNode(State& st, Stream& s, Node& node);
/// The same for a work node.
cudaError_t recordNode(State& st, Stream& s, Work& work);

// ---------------------------------------------------------------- user_objects.cc
/// Drops `count` references; the last one runs the object's destructor.
void releaseUserObject(UserObject* u, unsigned count);

// ---------------------------------------------------------------- memory.cc
/// The allocation containing [p, p + 1), or null.
Allocation* findAllocation(State& st, const void* p);
/// Maps `size` bytes of `kind` (kDevice, kHost or kManaged) for `device`, filled with kGarbage, and
/// registers them. Called without the state mutex (the fill of a large allocation takes a while).
/// kDevice memory not from a pool is a POSIX shm object, so that cudaIpcGetMemHandle can export it.
cudaError_t createAllocation(Kind kind, size_t size, int device, bool pool, void** out);
/// Unmaps and forgets an allocation (no waiting); cudaErrorInvalidValue unless `p` is the base of a
/// device or managed allocation.
cudaError_t releaseDevice(State& st, void* p);
/// Queues a release for the next lockState() (callable with or without the state mutex held).
void deferFree(void* p);
void drainDeferredFrees(State& st);
constexpr unsigned char kGarbage = 0xA5;
constexpr size_t kTotalMem = size_t{80} << 30;

}  // namespace detail
}  // namespace fakecuda
