// The C API for communicators, queries, memory, operators and groups; the
// collectives are in collectives.cc. Exceptions never leave these files.
//
// Public symbols get default visibility from the pragma around collie.h (the
// library is built with hidden visibility), so only the C API is exported.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "core/api_checks.h"
#include "core/comm.h"
#include "core/errors.h"
#include "core/group.h"
#include "executor/executor.h"
#include "transport/bootstrap/bootstrap.h"

using collie::Status;

using collie::api::checkComm;
using collie::api::guarded;
using collie::api::query;

extern "C" {

collieResult_t collieGetVersion(int* version) {
  return guarded(nullptr, [&] {
    if (version == nullptr) return Status::error(collieInvalidArgument, "collieGetVersion: version is NULL");
    *version = COLLIE_VERSION_CODE;
    return Status();
  });
}

const char* collieGetErrorString(collieResult_t result) {
  switch (result) {
    case collieSuccess:
      return "no error";
    case collieUnhandledCudaError:
      return "unhandled cuda error (run with COLLIE_DEBUG=INFO for details)";
    case collieSystemError:
      return "unhandled system error (run with COLLIE_DEBUG=INFO for details)";
    case collieInternalError:
      return "internal error - please report this issue to the Collie developers";
    case collieInvalidArgument:
      return "invalid argument (see collieGetLastError)";
    case collieInvalidUsage:
      return "invalid usage (see collieGetLastError)";
    case collieRemoteError:
      return "remote process exited or there was a network error";
    case collieInProgress:
      return "Collie operation in progress";
    case collieTimeout:
      return "timed out (see collieGetLastError for the rank that was waited on)";
    default:
      return "unknown result code";
  }
}

const char* collieGetLastError(collieComm_t comm) { return collie::lastErrorText(comm); }

collieResult_t collieGetUniqueId(collieUniqueId* uniqueId) {
  return guarded(nullptr, [&] {
    if (uniqueId == nullptr) return Status::error(collieInvalidArgument, "collieGetUniqueId: uniqueId is NULL");
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(nullptr, &options));
    collie::Secret secret;
    COLLIE_RETURN_IF_ERROR(collie::randomSecret(&secret));
    return collie::startRendezvousRoot("", 0, secret, options.initTimeoutSec, uniqueId)
        .withContext("collieGetUniqueId");
  });
}

collieResult_t collieCommInitRankConfig(collieComm_t* comm, int nranks, collieUniqueId commId, int rank,
                                        collieConfig_t* config) {
  return guarded(nullptr, [&] {
    const char* call = "collieCommInitRank";
    if (comm == nullptr) return Status::error(collieInvalidArgument, "%s: comm is NULL", call);
    *comm = nullptr;
    if (nranks < 1) return Status::error(collieInvalidArgument, "%s: nranks %d must be at least 1", call, nranks);
    if (rank < 0 || rank >= nranks)
      return Status::error(collieInvalidArgument, "%s: rank %d is not in [0, %d)", call, rank, nranks);
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(config, &options).withContext(call));
    if (collie::group::active()) {
      // As NCCL allows: one thread may init several ranks inside a group; they
      // join at GroupEnd, each on the device that was current when it was queued.
      int device = -1;
      if (cudaGetDevice(&device) != cudaSuccess) (void)cudaGetLastError();
      if (options.cudaDevice < 0) options.cudaDevice = device;
      collie::group::enqueueInit([=] {
        if (options.cudaDevice >= 0) (void)cudaSetDevice(options.cudaDevice);
        return collie::commInit(commId, nranks, rank, options, comm).withContext(call);
      });
      return Status();
    }
    return collie::commInit(commId, nranks, rank, options, comm).withContext(call);
  });
}

collieResult_t collieCommInitRank(collieComm_t* comm, int nranks, collieUniqueId commId, int rank) {
  return collieCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

collieResult_t collieCommInitAll(collieComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, [&] {
    const char* call = "collieCommInitAll";
    if (comms == nullptr) return Status::error(collieInvalidArgument, "%s: comms is NULL", call);
    if (ndev < 1) return Status::error(collieInvalidArgument, "%s: ndev %d must be at least 1", call, ndev);
    for (int i = 0; i < ndev; ++i) {
      comms[i] = nullptr;
      if (devlist != nullptr && devlist[i] < 0)
        return Status::error(collieInvalidArgument, "%s: devlist[%d] = %d is not a device", call, i, devlist[i]);
    }
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(nullptr, &options).withContext(call));
    int count = 0;  // devices this process sees; 0 without a usable GPU, where the host backend ignores devlist
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      count = 0;
    }
    // A device that is not there is the caller's mistake (NCCL: ncclInvalidArgument), said before any rank starts
    // rather than as a CUDA error from the middle of init.
    const bool onGpus = count > 0 && options.backend != collieBackendHost;
    if (onGpus && devlist != nullptr) {
      for (int i = 0; i < ndev; ++i)
        if (devlist[i] >= count)
          return Status::error(collieInvalidArgument, "%s: devlist[%d] = %d is not a device (this process sees %d)",
                               call, i, devlist[i], count);
    }
    if (onGpus && devlist == nullptr && ndev > count)
      COLLIE_INFO("%s: %d ranks on %d GPUs: rank i uses device i %% %d (NCCL would refuse)", call, ndev, count, count);
    collieUniqueId id;
    collie::Secret secret;
    COLLIE_RETURN_IF_ERROR(collie::randomSecret(&secret));
    COLLIE_RETURN_IF_ERROR(collie::startRendezvousRoot("127.0.0.1", 0, secret, options.initTimeoutSec, &id));
    // Every rank's init blocks until all have joined, so each needs its own thread.
    std::vector<Status> results(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(ndev));
    for (int r = 0; r < ndev; ++r)
      threads.emplace_back([&, r] {
        // Rank r's GPU: devlist[r], else device r modulo the device count
        // (several ranks may share a GPU).
        collie::InitOptions mine = options;
        if (count > 0) mine.cudaDevice = devlist != nullptr ? devlist[r] : r % count;
        if (mine.cudaDevice >= 0 && mine.cudaDevice < count) (void)cudaSetDevice(mine.cudaDevice);
        results[static_cast<size_t>(r)] = collie::commInit(id, ndev, r, mine, &comms[r]);
      });
    for (std::thread& t : threads) t.join();
    // The error to return: the first rank's that failed for a reason of its own. A rank whose peer failed first
    // (collieRemoteError: the peer's window gone before it was mapped, the peer's bootstrap connection closed)
    // only echoes it, and which rank reached its check first is a race: rank 0's error alone was the echo in some
    // runs and the cause in others (CudaBackend.ABadProgramCacheSettingIsRefusedAtInit, on the fake runtime).
    int first = -1;
    for (int r = 0; r < ndev && first < 0; ++r) {  // a rank's own failure
      const Status& s = results[static_cast<size_t>(r)];
      if (!s.ok() && s.code() != collieRemoteError) first = r;
    }
    for (int r = 0; r < ndev && first < 0; ++r)  // else an echo: every rank failed for a peer
      if (!results[static_cast<size_t>(r)].ok()) first = r;
    if (first < 0) return Status();
    for (int i = 0; i < ndev; ++i) {
      if (comms[i] != nullptr) collieCommDestroy(comms[i]);
      comms[i] = nullptr;
    }
    return results[static_cast<size_t>(first)].withContext(call);
  });
}

collieResult_t collieCommInitFromEnv(collieComm_t* comm, collieConfig_t* config) {
  return guarded(nullptr, [&] {
    const char* call = "collieCommInitFromEnv";
    if (comm == nullptr) return Status::error(collieInvalidArgument, "%s: comm is NULL", call);
    *comm = nullptr;
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(config, &options).withContext(call));
    return collie::commInitFromEnv(options, comm).withContext(call);
  });
}

collieResult_t collieCommFinalize(collieComm_t comm) {
  return guarded(comm, [&] {
    COLLIE_RETURN_IF_ERROR(checkComm(comm, "collieCommFinalize"));
    // The host backend finishes every call before returning; the CUDA one
    // waits here for the kernels it queued.
    comm->finalized = true;
    return comm->executor ? comm->executor->synchronize().withContext("collieCommFinalize") : Status();
  });
}

collieResult_t collieCommDestroy(collieComm_t comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return Status();
    if (!collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "collieCommDestroy: comm %p is not a live communicator",
                           static_cast<void*>(comm));
    collie::retireComm(comm);
    delete comm;
    return Status();
  });
}

collieResult_t collieCommAbort(collieComm_t comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return Status();
    if (!collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "collieCommAbort: comm %p is not a live communicator",
                           static_cast<void*>(comm));
    comm->aborted.store(true);
    if (comm->executor) comm->executor->abort();
    if (comm->bootstrap) comm->bootstrap->abort();
    // A call blocked on this comm in another thread now returns promptly; freeing waits for it.
    collie::retireComm(comm);
    delete comm;
    return Status();
  });
}

collieResult_t collieCommRevoke(collieComm_t comm, int revokeFlags) {
  return guarded(comm, [&] {
    const char* call = "collieCommRevoke";
    COLLIE_RETURN_IF_ERROR(checkComm(comm, call, collie::api::Accept::kStoppedOrBroken));
    if (revokeFlags != COLLIE_REVOKE_DEFAULT)
      return Status::error(collieInvalidArgument, "%s: revokeFlags %d is not COLLIE_REVOKE_DEFAULT (0)", call,
                           revokeFlags);
    // As an abort, but the bootstrap stays up for a split or shrink, and the communicator is not freed.
    comm->revoked.store(true);
    comm->aborted.store(true);
    if (comm->executor) comm->executor->abort();
    // Quiescent before returning: every other thread's call has left the comm (a host wait sees the abort at
    // its next poll; a bootstrap exchange of COLLIE_CHECK ends within the timeout), and the GPU's kernels have
    // stopped. What they failed with is not this call's error.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(comm->timeoutSec + 1);
    while (comm->users.load() > 1) {
      if (std::chrono::steady_clock::now() > deadline)
        return Status::error(collieTimeout, "%s: a call of another thread still runs on comm after %.0f s", call,
                             comm->timeoutSec + 1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (comm->executor) (void)comm->executor->synchronize();
    return Status();
  });
}

collieResult_t collieCommGetAsyncError(collieComm_t comm, collieResult_t* asyncError) {
  return query(comm, asyncError, "collieCommGetAsyncError", "asyncError", [](collieComm_t c) {
    // A revoked communicator is quiescent: NCCL reports success for it, whatever its stopped work failed with.
    if (c->revoked.load()) return static_cast<collieResult_t>(collieSuccess);
    // A kernel's failure surfaces here, after the call that queued it returned.
    if (c->asyncError.load() == collieSuccess) {
      collie::Status st = c->executor ? c->executor->asyncStatus() : collie::Status();
      if (!st.ok()) {
        c->breakWith(st);
        std::lock_guard<std::mutex> lock(c->errorMu);
        c->lastError = st.message();
      }
    }
    return static_cast<collieResult_t>(c->asyncError.load());
  });
}

collieResult_t collieCommCount(const collieComm_t comm, int* count) {
  return query(comm, count, "collieCommCount", "count", [](collieComm_t c) { return c->nranks; });
}

collieResult_t collieCommCuDevice(const collieComm_t comm, int* device) {
  return query(comm, device, "collieCommCuDevice", "device", [](collieComm_t c) { return c->cudaDevice; });
}

collieResult_t collieCommUserRank(const collieComm_t comm, int* rank) {
  return query(comm, rank, "collieCommUserRank", "rank", [](collieComm_t c) { return c->rank; });
}

collieResult_t collieCommGetBackend(const collieComm_t comm, collieBackend_t* backend) {
  return query(comm, backend, "collieCommGetBackend", "backend", [](collieComm_t c) { return c->backend; });
}

}  // extern "C"
