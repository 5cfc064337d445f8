// collieMemAlloc / collieMemFree and collieCommRegister / collieCommDeregister.
//
// Allocation: device memory (cudaMalloc on the calling thread's current
// device) when a GPU is usable, else page-aligned host memory, so a program
// written for NCCL runs unchanged on the host backend. Every pointer handed
// out is remembered, so freeing a pointer that did not come from here, or
// freeing one twice, is an error with a sentence rather than heap corruption.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdlib>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/cuda_check.h"
#include "core/api_checks.h"
#include "core/comm.h"
#include "core/memory.h"
#include "executor/executor.h"
#include "transport/cuda_ipc/buffer_windows.h"

using collie::Status;
using collie::api::checkComm;
using collie::api::guarded;

namespace collie {

namespace {

struct Allocation {
  size_t bytes;
  bool device;
};

std::mutex gAllocMu;
// By address, so that the allocation holding a pointer is found (memAllocStart).
std::map<void*, Allocation>& allocations() {
  static std::map<void*, Allocation> map;
  return map;
}

// comm's window `win` (resourceMu held), or the error that says it is none of comm's.
Status findWindow(collieComm_t comm, collieWindow_t win, const char* call, std::list<Window>::iterator* out) {
  auto it = comm->bufferWindowList.begin();
  while (it != comm->bufferWindowList.end() && reinterpret_cast<collieWindow_t>(&*it) != win) ++it;
  if (it == comm->bufferWindowList.end())
    return Status::error(collieInvalidArgument,
                         "%s: window %p was not returned by collieCommWindowRegister on this communicator, or was "
                         "deregistered already",
                         call, static_cast<void*>(win));
  *out = it;
  return Status();
}

}  // namespace

void* memAllocStart(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(gAllocMu);
  auto it = allocations().upper_bound(const_cast<void*>(p));
  if (it == allocations().begin()) return nullptr;
  --it;
  const uintptr_t start = reinterpret_cast<uintptr_t>(it->first), a = reinterpret_cast<uintptr_t>(p);
  const Allocation& m = it->second;
  if (!m.device || a - start > m.bytes || bytes > m.bytes - (a - start)) return nullptr;
  return it->first;
}

}  // namespace collie

extern "C" {

collieResult_t collieMemAlloc(void** ptr, size_t size) {
  return guarded(nullptr, [&] {
    const char* call = "collieMemAlloc";
    if (ptr == nullptr) return Status::error(collieInvalidArgument, "%s: ptr is NULL", call);
    *ptr = nullptr;
    if (size == 0) return Status();  // nothing to allocate; collieMemFree(NULL) is accepted
    void* p = nullptr;
    int current = -1;
    const bool device = collie::gpuUsable(&current);
    if (device) {
      COLLIE_RETURN_IF_ERROR(
          collie::cudaStatus(cudaMalloc(&p, size), ("cudaMalloc of " + std::to_string(size) + " bytes").c_str())
              .withContext(call));
    } else {
      const long page = sysconf(_SC_PAGESIZE);
      const int rc = posix_memalign(&p, page > 0 ? static_cast<size_t>(page) : 4096, size);
      if (rc != 0) return collie::systemError("posix_memalign", rc, __FILE__, __LINE__).withContext(call);
    }
    std::lock_guard<std::mutex> lock(collie::gAllocMu);
    collie::allocations()[p] = collie::Allocation{size, device};
    *ptr = p;
    return Status();
  });
}

collieResult_t collieMemFree(void* ptr) {
  return guarded(nullptr, [&] {
    if (ptr == nullptr) return Status();
    collie::Allocation a;
    {
      std::lock_guard<std::mutex> lock(collie::gAllocMu);
      auto it = collie::allocations().find(ptr);
      if (it == collie::allocations().end())
        return Status::error(collieInvalidArgument,
                             "collieMemFree: %p was not returned by collieMemAlloc, or was freed already", ptr);
      a = it->second;
      collie::allocations().erase(it);
    }
    if (!a.device) {
      free(ptr);
      return Status();
    }
    return collie::cudaStatus(cudaFree(ptr), "cudaFree").withContext("collieMemFree");
  });
}

collieResult_t collieCommRegister(const collieComm_t comm, void* buff, size_t size, void** handle) {
  return guarded(comm, [&] {
    const char* call = "collieCommRegister";
    if (handle == nullptr) return Status::error(collieInvalidArgument, "%s: handle is NULL", call);
    *handle = nullptr;
    COLLIE_RETURN_IF_ERROR(checkComm(comm, call));
    if (buff == nullptr) return Status::error(collieInvalidArgument, "%s: buff is NULL", call);
    // The buffer must be one this communicator's executor can use, as a later call would check.
    COLLIE_RETURN_IF_ERROR(collie::api::checkPlacement(comm, buff, call, "buff"));
    std::lock_guard<std::mutex> lock(comm->resourceMu);
    comm->registrations.push_back(collie::Registration{buff, size});
    *handle = &comm->registrations.back();
    return Status();
  });
}

collieResult_t collieCommDeregister(const collieComm_t comm, void* handle) {
  return guarded(comm, [&] {
    const char* call = "collieCommDeregister";
    // A broken or finalized communicator may still give its registrations back.
    if (comm == nullptr || !collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "%s: comm is not a live communicator", call);
    std::lock_guard<std::mutex> lock(comm->resourceMu);
    for (auto it = comm->registrations.begin(); it != comm->registrations.end(); ++it) {
      if (&*it != handle) continue;
      comm->registrations.erase(it);
      return Status();
    }
    return Status::error(collieInvalidArgument,
                         "%s: handle %p was not returned by collieCommRegister on this communicator, or was "
                         "deregistered already",
                         call, handle);
  });
}

collieResult_t collieCommWindowRegister(collieComm_t comm, void* buff, size_t size, collieWindow_t* win, int flags) {
  return guarded(comm, [&] {
    const char* call = "collieCommWindowRegister";
    if (win == nullptr) return Status::error(collieInvalidArgument, "%s: win is NULL", call);
    *win = nullptr;
    COLLIE_RETURN_IF_ERROR(checkComm(comm, call));
    // Errors in this rank's own arguments still go through the peers' exchange (BufferWindows::add), so that every
    // rank fails alike rather than waiting for this one.
    Status refusal;
    if (buff == nullptr || size == 0)
      refusal = Status::error(collieInvalidArgument, "%s: buff is NULL or size is 0", call);
    else if ((flags & ~COLLIE_WIN_COLL_SYMMETRIC) != 0)
      refusal = Status::error(collieInvalidArgument,
                              "%s: flags %#x: only COLLIE_WIN_DEFAULT and COLLIE_WIN_COLL_SYMMETRIC are known", call,
                              static_cast<unsigned>(flags));
    else
      refusal = collie::api::checkPlacement(comm, buff, call, "buff");
    collie::Window w{buff, size, 0};
    if (comm->bufferWindows != nullptr) {
      std::vector<collie::PeerRange> ranges;
      const Status added = comm->bufferWindows->add(
          buff, size, refusal.ok() ? collie::memAllocStart(buff, size) : nullptr, refusal, &w.number, &ranges);
      if (!added.ok()) return refusal.ok() ? added.withContext(call) : refusal;  // (the refusal names the call)
      Status mapped = comm->executor->mapWindow(w.number, buff, size, ranges).withContext(call);
      if (!mapped.ok()) {
        comm->bufferWindows->remove(w.number);
        return mapped;
      }
    } else {
      COLLIE_RETURN_IF_ERROR(refusal);
    }
    std::lock_guard<std::mutex> lock(comm->resourceMu);
    comm->bufferWindowList.push_back(w);
    *win = reinterpret_cast<collieWindow_t>(&comm->bufferWindowList.back());
    return Status();
  });
}

collieResult_t collieCommWindowDeregister(collieComm_t comm, collieWindow_t win) {
  return guarded(comm, [&] {
    const char* call = "collieCommWindowDeregister";
    // A broken or finalized communicator may still give its windows back.
    if (comm == nullptr || !collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "%s: comm is not a live communicator", call);
    collie::Window w;
    {
      std::lock_guard<std::mutex> lock(comm->resourceMu);
      std::list<collie::Window>::iterator it;
      COLLIE_RETURN_IF_ERROR(collie::findWindow(comm, win, call, &it));
      w = *it;
      comm->bufferWindowList.erase(it);
    }
    if (w.number == 0) return Status();
    // The kernels' table first (after the calls that may use it), then this rank's mappings of the peers' ranges.
    Status unmapped = comm->executor->unmapWindow(w.number).withContext(call);
    comm->bufferWindows->remove(w.number);
    return unmapped;
  });
}

collieResult_t collieWinGetUserPtr(collieComm_t comm, collieWindow_t win, void** ptr) {
  return guarded(comm, [&] {
    const char* call = "collieWinGetUserPtr";
    if (ptr == nullptr) return Status::error(collieInvalidArgument, "%s: ptr is NULL", call);
    *ptr = nullptr;
    COLLIE_RETURN_IF_ERROR(checkComm(comm, call));
    std::lock_guard<std::mutex> lock(comm->resourceMu);
    std::list<collie::Window>::iterator it;
    COLLIE_RETURN_IF_ERROR(collie::findWindow(comm, win, call, &it));
    *ptr = it->buffer;
    return Status();
  });
}

}  // extern "C"
