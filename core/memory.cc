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
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/cuda_check.h"
#include "core/api_checks.h"
#include "core/comm.h"
#include "core/memory.h"

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
std::unordered_map<void*, Allocation>& allocations() {
  static std::unordered_map<void*, Allocation> map;
  return map;
}

}  // namespace

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

}  // extern "C"
