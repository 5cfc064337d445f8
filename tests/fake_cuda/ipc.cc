// IPC memory handles of the fake CUDA runtime. A cudaMalloc allocation is a POSIX shm object; its
// handle carries the object's name, so another process maps the same pages. As in CUDA, the handle
// stands for the whole allocation (opening it yields the allocation's base, whatever interior
// pointer was exported), the exporting process cannot open its own handles, and one process opening
// a handle twice gets the same mapping with a reference count.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "internal.h"

using namespace fakecuda::detail;

namespace {

constexpr uint32_t kMagic = 0x49434643;  // "CFCI"

// The 64 bytes of a cudaIpcMemHandle_t.
struct Handle {
  uint32_t magic;
  int32_t pid;     // the exporter's
  int32_t device;  // the exporter's device number
  uint32_t reserved;
  uint64_t size;
  char name[40];  // the shm object, NUL-terminated
};
static_assert(sizeof(Handle) == CUDA_IPC_HANDLE_SIZE, "a handle fills cudaIpcMemHandle_t");

cudaError_t getHandle(cudaIpcMemHandle_t* handle, void* p) {
  if (handle == nullptr) return cudaErrorInvalidValue;
  if (const cudaError_t e = begin()) return e;
  auto lock = lockState();
  const Allocation* a = findAllocation(state(), p);
  // Only cudaMalloc memory: not host, managed, pool (cudaMallocAsync) or imported memory.
  if (a == nullptr || a->kind != Kind::kDevice || a->pool || a->shm.size() >= sizeof(Handle::name))
    return cudaErrorInvalidValue;
  Handle h;
  memset(&h, 0, sizeof(h));
  h.magic = kMagic;
  h.pid = static_cast<int32_t>(getpid());
  h.device = a->device;
  h.size = a->size;
  memcpy(h.name, a->shm.c_str(), a->shm.size() + 1);
  memcpy(handle, &h, sizeof(h));
  return cudaSuccess;
}

cudaError_t openHandle(void** out, cudaIpcMemHandle_t handle, unsigned int flags) {
  if (out == nullptr || flags != cudaIpcMemLazyEnablePeerAccess) return cudaErrorInvalidValue;
  *out = nullptr;
  if (const cudaError_t e = begin()) return e;
  Handle h;
  memcpy(&h, &handle, sizeof(h));
  if (h.magic != kMagic || memchr(h.name, 0, sizeof(h.name)) == nullptr || h.size == 0)
    return cudaErrorInvalidResourceHandle;
  // CUDA refuses to open a handle in the process that exported it ("invalid device context").
  if (h.pid == static_cast<int32_t>(getpid())) return cudaErrorDeviceUninitialized;
  State& st = state();
  auto lock = lockState();
  const std::string name(h.name);
  auto open = st.ipcByName.find(name);
  if (open != st.ipcByName.end()) {
    Allocation& a = st.allocations.at(open->second);
    ++a.ipcRefs;
    *out = a.base;
    return cudaSuccess;
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return cudaErrorMapBufferObjectFailed;  // freed by its exporter, or never existed
  struct stat sb;
  void* p = MAP_FAILED;
  if (fstat(fd, &sb) == 0 && static_cast<uint64_t>(sb.st_size) >= h.size)
    p = mmap(nullptr, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return cudaErrorMapBufferObjectFailed;
  Allocation a;
  a.id = ++st.serial;
  a.base = static_cast<char*>(p);
  a.size = h.size;
  a.kind = Kind::kIpc;
  a.device = h.device;
  a.shm = name;
  a.ipcRefs = 1;
  st.allocations[reinterpret_cast<uintptr_t>(p)] = a;
  st.ipcByName[name] = reinterpret_cast<uintptr_t>(p);
  *out = p;
  return cudaSuccess;
}

cudaError_t closeHandle(void* p) {
  if (const cudaError_t e = begin()) return e;
  State& st = state();
  auto lock = lockState();
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.kind != Kind::kIpc || it->second.ipcRefs == 0)
    return cudaErrorInvalidValue;
  if (--it->second.ipcRefs > 0) return cudaSuccess;
  const uint64_t id = it->second.id;
  // The mapping goes once the work queued so far (which may use it) has run.
  drainDevice(st, lock, -1);
  it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.id != id || it->second.ipcRefs > 0) return cudaSuccess;
  munmap(it->second.base, it->second.size);
  st.ipcByName.erase(it->second.shm);
  st.allocations.erase(it);
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  return report(getHandle(handle, devPtr));
}

cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  return report(openHandle(devPtr, handle, flags));
}

cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void* devPtr) { return report(closeHandle(devPtr)); }

}  // extern "C"
