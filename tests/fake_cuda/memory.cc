// Memory of the fake CUDA runtime: allocations of every kind, pointer attributes, copies and sets.
//
// Every allocation is registered (base, size, kind, device), so that lookups accept interior
// pointers and a copy's direction can be checked against where its pointers are. New memory of every
// kind holds a garbage pattern (kGarbage), never zeros. Queued copies check again when they run that
// their registered operands are still allocated (cudaErrorIllegalAddress, sticky, otherwise), which
// catches a free that is not ordered after the work using the memory.
#include <cuda.h>  // the driver's types, for its one entry point here
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "internal.h"

namespace fakecuda {
namespace detail {
namespace {

// Frees GraphMem destructors queued. Function-local, so that calls from static initializers work.
struct Deferred {
  std::mutex mu;
  std::vector<void*> ptrs;
};
Deferred& deferred() {
  static Deferred* d = new Deferred;  // never destroyed, like the state
  return *d;
}

pid_t creator = 0;

// CUDA frees a process's device memory when it exits; the shm objects standing for it are unlinked
// here (importers keep their mappings). Skipped in a forked child, which owns nothing.
void unlinkAtExit() {
  if (getpid() != creator) return;
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu, std::try_to_lock);
  if (!lock.owns_lock()) return;
  for (const auto& [base, a] : st.allocations)
    if (a.kind == Kind::kDevice && !a.shm.empty()) shm_unlink(a.shm.c_str());
}

cudaError_t mapMemory(Kind kind, size_t size, bool pool, uint64_t serial, char** out, std::string* name) {
  void* p = MAP_FAILED;
  if (kind == Kind::kDevice && !pool) {
    static std::once_flag once;
    std::call_once(once, [] {
      creator = getpid();
      atexit(unlinkAtExit);
    });
    char buf[40];
    snprintf(buf, sizeof(buf), "/fakecuda-collie-%d-%llx", static_cast<int>(getpid()),
             static_cast<unsigned long long>(serial));
    const int fd = shm_open(buf, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return cudaErrorMemoryAllocation;
    // Reserve the pages now: a full /dev/shm is cudaErrorMemoryAllocation, not a SIGBUS later.
    if (ftruncate(fd, static_cast<off_t>(size)) != 0 || posix_fallocate(fd, 0, static_cast<off_t>(size)) != 0 ||
        (p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
      close(fd);
      shm_unlink(buf);
      return cudaErrorMemoryAllocation;
    }
    close(fd);
    *name = buf;
  } else {
    p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return cudaErrorMemoryAllocation;
  }
  memset(p, kGarbage, size);
  *out = static_cast<char*>(p);
  return cudaSuccess;
}

void unmap(State& st, std::map<uintptr_t, Allocation>::iterator it) {
  Allocation& a = it->second;
  munmap(a.base, a.size);
  if (a.kind == Kind::kDevice && !a.shm.empty()) shm_unlink(a.shm.c_str());
  if (a.kind == Kind::kDevice || a.kind == Kind::kManaged) deviceState(st, a.device).allocated -= a.size;
  st.allocations.erase(it);
}

bool onDevice(const Allocation* a) { return a != nullptr && (a->kind == Kind::kDevice || a->kind == Kind::kIpc); }
bool hostAccessible(const Allocation* a) { return a == nullptr || a->kind == Kind::kHost || a->kind == Kind::kManaged; }
bool deviceAccessible(const Allocation* a) { return a != nullptr; }

// The allocation holding [p, p + n): null for memory the runtime does not know (pageable host
// memory); cudaErrorInvalidValue when the range runs past the end of a known allocation.
cudaError_t locate(State& st, const void* p, size_t n, Allocation** out) {
  Allocation* a = findAllocation(st, p);
  if (a != nullptr && n > a->size - static_cast<size_t>(static_cast<const char*>(p) - a->base))
    return cudaErrorInvalidValue;
  *out = a;
  return cudaSuccess;
}

cudaError_t checkCopy(State& st, void* dst, const void* src, size_t n, cudaMemcpyKind kind, Allocation** da,
                      Allocation** sa) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
  if (dst == nullptr || src == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = locate(st, dst, n, da)) return e;
  if (const cudaError_t e = locate(st, src, n, sa)) return e;
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToHost:
      ok = hostAccessible(*da) && hostAccessible(*sa);
      break;
    case cudaMemcpyHostToDevice:
      ok = deviceAccessible(*da) && hostAccessible(*sa);
      break;
    case cudaMemcpyDeviceToHost:
      ok = hostAccessible(*da) && deviceAccessible(*sa);
      break;
    case cudaMemcpyDeviceToDevice:
      ok = deviceAccessible(*da) && deviceAccessible(*sa);
      break;
    default:
      break;  // cudaMemcpyDefault: the runtime infers the direction
  }
  return ok ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t checkSet(State& st, void* p, size_t n, Allocation** a) {
  if (const cudaError_t e = locate(st, p, n, a)) return e;
  return *a != nullptr ? cudaSuccess : cudaErrorInvalidValue;
}

// Whether [p, p + n) still lies in the allocation `id` (0: memory the runtime does not know).
bool stillAllocated(State& st, const void* p, size_t n, uint64_t id) {
  if (id == 0) return true;
  Allocation* a = nullptr;
  return locate(st, p, n, &a) == cudaSuccess && a != nullptr && a->id == id;
}

uint64_t idOf(const Allocation* a) { return a != nullptr ? a->id : 0; }

Work copyWork(void* dst, const void* src, size_t n, uint64_t dstId, uint64_t srcId) {
  return [=] {
    {
      auto lock = lockState();
      if (!stillAllocated(state(), dst, n, dstId) || !stillAllocated(state(), src, n, srcId))
        return cudaErrorIllegalAddress;
    }
    memcpy(dst, src, n);
    return cudaSuccess;
  };
}

Work setWork(void* p, int value, size_t n, uint64_t id) {
  return [=] {
    {
      auto lock = lockState();
      if (!stillAllocated(state(), p, n, id)) return cudaErrorIllegalAddress;
    }
    memset(p, value, n);
    return cudaSuccess;
  };
}

Work releaseWork(void* p) {
  return [p] {
    auto lock = lockState();
    return releaseDevice(state(), p) == cudaSuccess ? cudaSuccess : cudaErrorIllegalAddress;
  };
}

}  // namespace

GraphMem::~GraphMem() {
  for (void* p : ptrs) deferFree(p);
  for (UserObject* u : users) releaseUserObject(u, 1);
}

void deferFree(void* p) {
  Deferred& d = deferred();
  std::lock_guard<std::mutex> lock(d.mu);
  d.ptrs.push_back(p);
}

void drainDeferredFrees(State& st) {
  std::vector<void*> ptrs;
  {
    Deferred& d = deferred();
    std::lock_guard<std::mutex> lock(d.mu);
    ptrs.swap(d.ptrs);
  }
  for (void* p : ptrs) (void)releaseDevice(st, p);
}

Allocation* findAllocation(State& st, const void* p) {
  const auto key = reinterpret_cast<uintptr_t>(p);
  auto it = st.allocations.upper_bound(key);
  if (it == st.allocations.begin()) return nullptr;
  --it;
  return key - it->first < it->second.size ? &it->second : nullptr;
}

cudaError_t createAllocation(Kind kind, size_t size, int device, bool pool, void** out) {
  *out = nullptr;
  if (size == 0) return cudaSuccess;
  State& st = state();
  const bool counted = kind != Kind::kHost;
  uint64_t serial = 0;
  {
    auto lock = lockState();
    DeviceState& d = deviceState(st, device);
    if (counted) {
      if (size > kTotalMem - d.allocated) return cudaErrorMemoryAllocation;
      d.allocated += size;
    }
    serial = ++st.serial;
  }
  char* p = nullptr;
  std::string name;
  const cudaError_t e = mapMemory(kind, size, pool, serial, &p, &name);
  auto lock = lockState();
  if (e != cudaSuccess) {
    if (counted) deviceState(st, device).allocated -= size;
    return e;
  }
  Allocation a;
  a.id = serial;
  a.base = p;
  a.size = size;
  a.kind = kind;
  a.device = device;
  a.pool = pool;
  a.shm = name;
  st.allocations[reinterpret_cast<uintptr_t>(p)] = a;
  *out = p;
  return cudaSuccess;
}

cudaError_t releaseDevice(State& st, void* p) {
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || (it->second.kind != Kind::kDevice && it->second.kind != Kind::kManaged))
    return cudaErrorInvalidValue;
  unmap(st, it);
  return cudaSuccess;
}

}  // namespace detail
}  // namespace fakecuda

using namespace fakecuda::detail;
using fakecuda::Work;

namespace {

// cudaMalloc, cudaMallocManaged, cudaHostAlloc: not stream-ordered, so "potentially unsafe" while a
// capture is in progress. And, as the CUDA programming guide allows ("Implicit Synchronization": a device or
// page-locked host memory allocation keeps commands of different streams from running at once; "cudaMalloc
// and cudaFree cause the GPU to synchronize across all executing CUDA streams"), each waits here for the work
// queued on the device (every device, for host memory) and counts as a host wait: an allocation in an
// enqueue, while a peer's kernel waits for this rank's launch, deadlocks as it may on a GPU.
// COLLIE_TEST_FAKE_CUDA_ALLOC_SYNC=0 turns the wait off (the count stays).
cudaError_t allocate(Kind kind, void** out, size_t size) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  if (const cudaError_t e = begin()) return e;
  const int device = self().device;
  {
    State& st = state();
    auto lock = lockState();
    if (const cudaError_t e = unsafeCallCheck(st)) return e;
    if (kind != Kind::kHost)
      if (const cudaError_t e = deviceState(st, device).sticky) return e;
    countHostWait();
    if (allocationsSynchronize()) drainDevice(st, lock, kind == Kind::kHost ? -1 : device);
  }
  return createAllocation(kind, size, device, false, out);
}

// cudaFree and cudaFreeHost synchronize with the device(s) first, as CUDA does.
cudaError_t freeMemory(void* p, bool host) {
  if (const cudaError_t e = begin()) return e;
  if (p == nullptr) return cudaSuccess;
  State& st = state();
  auto lock = lockState();
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  const bool right =
      it != st.allocations.end() &&
      (host ? it->second.kind == Kind::kHost : (it->second.kind == Kind::kDevice || it->second.kind == Kind::kManaged));
  if (!right || it->second.freeing) return cudaErrorInvalidValue;
  const int device = it->second.device;
  const uint64_t id = it->second.id;
  it->second.freeing = true;
  drainDevice(st, lock, host ? -1 : device);
  it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.id != id) return cudaErrorInvalidValue;
  unmap(st, it);
  return host ? cudaSuccess : deviceState(st, device).sticky;
}

constexpr unsigned kHostAllocFlags = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;

cudaError_t hostGetDevicePointer(void** out, void* host, unsigned int flags) {
  if (out == nullptr || flags != 0) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  auto lock = lockState();
  const Allocation* a = findAllocation(state(), host);
  if (a == nullptr || a->kind != Kind::kHost) return cudaErrorInvalidValue;
  *out = host;  // unified addressing: the device sees pinned memory at the host's address
  return cudaSuccess;
}

// A memory pool of cudaMemPoolCreate: only its device matters here (allocations are fresh mappings, never
// reused, so its attributes change nothing). Handles are checked against the live ones.
struct Pool {
  int device = 0;
};
std::set<const void*>& livePools() {
  static auto* pools = new std::set<const void*>;  // under the state's lock
  return *pools;
}

cudaError_t memPoolCreate(cudaMemPool_t* out, const cudaMemPoolProps* props) {
  if (out == nullptr || props == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  if (props->allocType != cudaMemAllocationTypePinned || props->location.type != cudaMemLocationTypeDevice ||
      !validDevice(props->location.id))
    return cudaErrorInvalidValue;
  auto* pool = new Pool{props->location.id};
  auto lock = lockState();
  livePools().insert(pool);
  *out = reinterpret_cast<cudaMemPool_t>(pool);
  return cudaSuccess;
}

cudaError_t findPool(cudaMemPool_t handle, int* device) {
  auto lock = lockState();
  if (livePools().count(handle) == 0) return cudaErrorInvalidValue;
  *device = reinterpret_cast<const Pool*>(handle)->device;
  return cudaSuccess;
}

cudaError_t memPoolDestroy(cudaMemPool_t handle) {
  if (const cudaError_t e = begin()) return e;
  auto lock = lockState();
  if (livePools().erase(handle) == 0) return cudaErrorInvalidValue;
  delete reinterpret_cast<Pool*>(handle);
  return cudaSuccess;
}

// `poolDevice` < 0: the stream's device's default pool (cudaMallocAsync).
cudaError_t mallocAsync(void** out, size_t size, cudaStream_t handle, int poolDevice = -1) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  int device = 0;
  {
    auto lock = lockState();
    std::shared_ptr<Stream> s;
    if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
    if (s->capture && s->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    if (!s->capture)
      if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
    if (const cudaError_t e = deviceState(st, s->device).sticky) return e;
    device = poolDevice >= 0 ? poolDevice : s->device;
  }
  // Allocated at once (stream order only matters for reuse, which a fresh mapping never is).
  if (const cudaError_t e = createAllocation(Kind::kDevice, size, device, true, out)) return e;
  if (*out == nullptr) return cudaSuccess;
  Work refill;
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (resolveStream(st, handle, &s) == cudaSuccess && s->capture && !s->capture->invalidated) {
    // Captured: a graph's allocation holds garbage again at every launch.
    s->capture->allocated.insert(*out);
    refill = [p = *out, size] {
      memset(p, kGarbage, size);
      return cudaSuccess;
    };
    return recordNode(st, *s, refill);
  }
  return cudaSuccess;
}

cudaError_t freeAsync(void* p, cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  if (p == nullptr) return cudaSuccess;
  Work release = releaseWork(p);
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.kind != Kind::kDevice || it->second.freeing)
    return cudaErrorInvalidValue;
  if (s->capture) {
    Capture& c = *s->capture;
    if (c.invalidated) return cudaErrorStreamCaptureInvalidated;
    if (c.allocated.erase(p) == 1) {
      // Allocated and freed inside the capture: the graph owns the memory.
      it->second.freeing = true;
      c.mem->ptrs.push_back(p);
      return cudaSuccess;
    }
    return recordNode(st, *s, release);  // freed when the graph runs
  }
  const cudaError_t e = submit(st, s, release);
  if (e == cudaSuccess) it->second.freeing = true;
  return e;
}

cudaError_t pointerGetAttributes(cudaPointerAttributes* attr, const void* p) {
  if (attr == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  auto lock = lockState();
  memset(attr, 0, sizeof(*attr));
  const Allocation* a = findAllocation(state(), p);
  void* ptr = const_cast<void*>(p);
  if (a == nullptr) {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
    return cudaSuccess;
  }
  attr->device = a->device;
  attr->devicePointer = ptr;
  switch (a->kind) {
    case Kind::kDevice:
    case Kind::kIpc:
      attr->type = cudaMemoryTypeDevice;
      break;
    case Kind::kHost:
      attr->type = cudaMemoryTypeHost;
      attr->hostPointer = ptr;
      break;
    case Kind::kManaged:
      attr->type = cudaMemoryTypeManaged;
      attr->hostPointer = ptr;
      break;
  }
  return cudaSuccess;
}

cudaError_t memGetInfo(size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  auto lock = lockState();
  *total = kTotalMem;
  *free = kTotalMem - deviceState(state(), self().device).allocated;
  return cudaSuccess;
}

// Synchronous cudaMemcpy / cudaMemset: issued on the current device's legacy default stream (so
// after the work queued there and on its blocking streams). The host waits for the result unless
// both sides are device memory, where CUDA returns at once.
cudaError_t syncOnLegacy(State& st, std::unique_lock<std::mutex>& lock, Work& work, bool deviceOnly) {
  std::shared_ptr<Stream> s = legacyStream(st, self().device);
  if (!s) return cudaErrorMemoryAllocation;
  if (const cudaError_t e = legacyCaptureCheck(st, *s)) return e;
  if (const cudaError_t e = unsafeCallCheck(st)) return e;
  if (const cudaError_t e = deviceState(st, s->device).sticky) return e;
  Item item;
  item.work = std::move(work);
  const uint64_t ticket = push(st, s, std::move(item));
  if (deviceOnly) return cudaSuccess;
  waitFor(st, lock, {{s, ticket}});
  return deviceState(st, s->device).sticky;
}

cudaError_t memcpySync(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (const cudaError_t e = begin()) return e;
  Work work;
  State& st = state();
  auto lock = lockState();
  if (n == 0) return cudaSuccess;
  Allocation *da = nullptr, *sa = nullptr;
  if (const cudaError_t e = checkCopy(st, dst, src, n, kind, &da, &sa)) return e;
  if (sa == nullptr && onDevice(da)) {
    // From pageable memory to the device CUDA returns once the bytes are staged, before the copy lands
    // (the runtime API's "API synchronization behavior"): a reader on another stream or in another
    // process must wait for the legacy stream, or it may read a window header still zero.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + n);
    const Work copy = copyWork(dst, staged->data(), n, idOf(da), 0);
    // Lands a little later (COLLIE_TEST_FAKE_CUDA_PAGEABLE_MS, default 2), so a reader that does not wait
    // sees the old bytes here as it may on a GPU.
    const char* env = getenv("COLLIE_TEST_FAKE_CUDA_PAGEABLE_MS");
    const int ms = env != nullptr ? atoi(env) : 2;
    work = [copy, staged, ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return copy();
    };
    // As CUDA does, the call still waits for the work queued before it on the legacy stream.
    Work before = [] { return cudaSuccess; };
    if (const cudaError_t e = syncOnLegacy(st, lock, before, false)) return e;
    return syncOnLegacy(st, lock, work, true);
  }
  work = copyWork(dst, src, n, idOf(da), idOf(sa));
  return syncOnLegacy(st, lock, work, onDevice(da) && onDevice(sa));
}

cudaError_t memcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  Work work;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (n == 0) return cudaSuccess;
  Allocation *da = nullptr, *sa = nullptr;
  if (const cudaError_t e = checkCopy(st, dst, src, n, kind, &da, &sa)) return e;
  work = copyWork(dst, src, n, idOf(da), idOf(sa));
  return submit(st, s, work);
}

cudaError_t memsetSync(void* p, int value, size_t n) {
  if (const cudaError_t e = begin()) return e;
  Work work;
  State& st = state();
  auto lock = lockState();
  if (n == 0) return cudaSuccess;
  Allocation* a = nullptr;
  if (const cudaError_t e = checkSet(st, p, n, &a)) return e;
  work = setWork(p, value, n, a->id);
  return syncOnLegacy(st, lock, work, onDevice(a));
}

cudaError_t memsetAsync(void* p, int value, size_t n, cudaStream_t handle) {
  if (const cudaError_t e = begin()) return e;
  Work work;
  State& st = state();
  auto lock = lockState();
  std::shared_ptr<Stream> s;
  if (const cudaError_t e = resolveStream(st, handle, &s)) return e;
  if (n == 0) return cudaSuccess;
  Allocation* a = nullptr;
  if (const cudaError_t e = checkSet(st, p, n, &a)) return e;
  work = setWork(p, value, n, a->id);
  return submit(st, s, work);
}

}  // namespace

namespace {

// cuMemGetAddressRange: the device allocation (cudaMalloc, pool, managed, or a peer's opened by IPC) holding
// `p`; CUDA_ERROR_INVALID_VALUE for host memory and addresses in none.
CUresult fakeAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  State& st = state();
  auto lock = lockState();
  const Allocation* a = findAllocation(st, reinterpret_cast<const void*>(static_cast<uintptr_t>(p)));
  if (a == nullptr || a->kind == Kind::kHost) return CUDA_ERROR_INVALID_VALUE;
  if (base != nullptr) *base = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(a->base));
  if (size != nullptr) *size = a->size;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) { return report(allocate(Kind::kDevice, devPtr, size)); }

cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  countHostWait();
  return report(freeMemory(devPtr, false));
}

cudaError_t CUDARTAPI cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  if (size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)) return report(cudaErrorInvalidValue);
  return report(allocate(Kind::kManaged, devPtr, size));
}

cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  if ((flags & ~kHostAllocFlags) != 0) return report(cudaErrorInvalidValue);
  return report(allocate(Kind::kHost, pHost, size));
}

cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) { return report(allocate(Kind::kHost, ptr, size)); }

cudaError_t CUDARTAPI cudaFreeHost(void* ptr) { return report(freeMemory(ptr, true)); }

cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  return report(hostGetDevicePointer(pDevice, pHost, flags));
}

cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size, cudaStream_t stream) {
  return report(mallocAsync(devPtr, size, stream));
}

cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t stream) { return report(freeAsync(devPtr, stream)); }

cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t* memPool, const cudaMemPoolProps* poolProps) {
  return report(memPoolCreate(memPool, poolProps));
}

cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool) { return report(memPoolDestroy(memPool)); }

// Accepted and ignored (see Pool).
cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr, void* value) {
  int device = 0;
  if (value == nullptr) return report(cudaErrorInvalidValue);
  return report(findPool(memPool, &device));
}

// Checked, then accepted: the fake's memory is reachable from every fake GPU anyway. A peer GPU needs P2P
// (COLLIE_TEST_FAKE_CUDA_P2P), as on a real machine.
cudaError_t CUDARTAPI cudaMemPoolSetAccess(cudaMemPool_t memPool, const cudaMemAccessDesc* map, size_t count) {
  int device = 0;
  if (const cudaError_t e = findPool(memPool, &device)) return report(e);
  if (map == nullptr || count == 0) return report(cudaErrorInvalidValue);
  for (size_t i = 0; i < count; ++i) {
    const cudaMemAccessDesc& d = map[i];
    if (d.location.type != cudaMemLocationTypeDevice || !validDevice(d.location.id) ||
        (d.flags != cudaMemAccessFlagsProtNone && d.flags != cudaMemAccessFlagsProtRead &&
         d.flags != cudaMemAccessFlagsProtReadWrite))
      return report(cudaErrorInvalidValue);
    if (d.location.id != device && !peerAccess()) return report(cudaErrorInvalidDevice);
  }
  return report(cudaSuccess);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  int device = 0;
  if (const cudaError_t e = findPool(memPool, &device)) return report(e);
  return report(mallocAsync(ptr, size, stream, device));
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  return report(pointerGetAttributes(attributes, ptr));
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t* free, size_t* total) { return report(memGetInfo(free, total)); }

// The driver's entry points, of which the fake has one: cuMemGetAddressRange (fakeAddressRange).
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       cudaDriverEntryPointQueryResult* driverStatus) {
  if (symbol == nullptr || funcPtr == nullptr || cudaVersion < 3020 || flags > cudaEnablePerThreadDefaultStream)
    return report(cudaErrorInvalidValue);
  const bool known = strcmp(symbol, "cuMemGetAddressRange") == 0;
  *funcPtr = known ? reinterpret_cast<void*>(&fakeAddressRange) : nullptr;
  if (driverStatus != nullptr) *driverStatus = known ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return report(cudaSuccess);
}

cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  countHostWait();
  return report(memcpySync(dst, src, count, kind));
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  return report(memcpyAsync(dst, src, count, kind, stream));
}

cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
  countHostWait();
  return report(memsetSync(devPtr, value, count));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  return report(memsetAsync(devPtr, value, count, stream));
}

}  // extern "C"
