// Argument checks shared by the C API's files (api.cc: communicators and
// queries; collectives.cc: the collectives). Each rejection is a Status with a
// sentence naming the call and the argument.
#pragma once

#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include "collie.h"
#include "core/comm.h"
#include "core/errors.h"
#include "executor/executor.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace api {

// Keeps a live comm from being freed by collieCommAbort/Destroy in another
// thread while a call runs on it (core/comm.h pinComm). The pin also proves
// the comm live, so checkComm need not ask the registry (its lock) again.
class CommPin {
 public:
  explicit CommPin(collieComm_t comm)
      : comm_(comm != nullptr && collie::pinComm(comm) ? comm : nullptr), outer_(pinned()) {
    if (comm_ != nullptr) pinned() = comm_;
  }
  ~CommPin() {
    if (comm_ == nullptr) return;
    pinned() = outer_;
    collie::unpinComm(comm_);
  }
  CommPin(const CommPin&) = delete;
  CommPin& operator=(const CommPin&) = delete;

  /// Whether the comm was live and is now pinned.
  bool held() const { return comm_ != nullptr; }

  /// The comm the innermost call of this thread has pinned (nullptr: none).
  static collieComm_t& pinned() {
    static thread_local collieComm_t comm = nullptr;
    return comm;
  }

 private:
  collieComm_t comm_;
  collieComm_t outer_;
};

template <typename Body>
inline collieResult_t guarded(collieComm_t comm, Body body) {
  const CommPin pin(comm);
  try {
    return collie::report(body(), comm);
  } catch (const std::bad_alloc&) {
    return collie::report(Status::error(collieSystemError, "out of host memory"), comm);
  } catch (const std::exception& e) {
    return collie::report(Status::error(collieInternalError, "internal error: %s", e.what()), comm);
  }
}

/// Which communicators a call takes beyond healthy ones (every call refuses NULL, dead and finalized ones).
enum class Accept {
  kHealthy,          // most calls: not aborted, revoked or broken
  kRevoked,          // collieCommSplit: a revoked one too, whatever its stopped work failed with
  kRevokedOrBroken,  // collieCommShrink: also a broken one (going on after a failed collective is what it is for)
  kStoppedOrBroken,  // collieCommRevoke: also an aborted one
};

inline Status checkComm(collieComm_t comm, const char* call, Accept accept = Accept::kHealthy) {
  if (comm == nullptr) return Status::error(collieInvalidArgument, "%s: comm is NULL", call);
  if (comm != CommPin::pinned() && !collie::commIsLive(comm))
    return Status::error(collieInvalidArgument, "%s: comm %p is not a live communicator (destroyed or never created)",
                         call, static_cast<void*>(comm));
  const bool revoked = comm->revoked.load();
  const bool stopped = accept == Accept::kStoppedOrBroken || (revoked && accept != Accept::kHealthy);
  if (comm->aborted.load() && !stopped)
    return Status::error(collieInvalidUsage,
                         revoked
                             ? "%s: comm was revoked; only collieCommDestroy, collieCommSplit or collieCommShrink may "
                               "follow"
                             : "%s: comm was aborted",
                         call);
  if (comm->finalized)
    return Status::error(collieInvalidUsage, "%s: comm was finalized; only collieCommDestroy may follow", call);
  if (accept == Accept::kRevokedOrBroken || accept == Accept::kStoppedOrBroken ||
      (revoked && accept == Accept::kRevoked))
    return Status();
  // A kernel's failure (CUDA backend) breaks the communicator for the next call too.
  if (comm->asyncError.load() == collieSuccess && comm->executor) comm->breakWith(comm->executor->asyncStatus());
  const int async = comm->asyncError.load();
  if (async == collieSuccess) return Status();
  // The failure that broke it, in full: with the GPU's, which no call returned, it is the only place its rank, peer
  // and step are said (a bare "collieTimeout" leaves the caller nothing to look at).
  std::string why;
  {
    std::lock_guard<std::mutex> lock(comm->errorMu);
    why = comm->brokenBy;
  }
  return Status::error(static_cast<collieResult_t>(async),
                       "%s: comm is broken by an earlier failure (%s%s%s); destroy it and create a new one", call,
                       resultName(static_cast<collieResult_t>(async)), why.empty() ? "" : ": ", why.c_str());
}

/// The buffer is memory the communicator's executor can reach: device (or
/// managed, or mapped pinned) memory of its GPU on the CUDA backend, host
/// memory on the host backend (core/placement.cc).
Status checkPlacement(collieComm_t comm, const void* p, const char* call, const char* what);

/// On the CUDA backend, the stream is one of the communicator's GPU (core/placement.cc).
Status checkStream(collieComm_t comm, collieStream_t stream, const char* call);

inline Status checkType(collieDataType_t type, const char* call) {
  if (collie::typeSize(type) == 0)
    return Status::error(collieInvalidArgument, "%s: datatype %d is not a collieDataType_t (0..%d)", call,
                         static_cast<int>(type), collieNumTypes - 1);
  return Status();
}

// A run-time operator (collieNumOps and up) passes here; the call checks it
// against its communicator's table when it captures it (core/redop.cc).
inline Status checkOp(collieRedOp_t op, const char* call) {
  if (op >= collieNumOps && op != collieMaxRedOp) return Status();
  collie::ReduceOp unused;
  if (!collie::toReduceOp(op, &unused))
    return Status::error(collieInvalidArgument, "%s: op %d is not a collieRedOp_t", call, static_cast<int>(op));
  return Status();
}

inline Status checkBuffer(const void* buf, size_t count, collieDataType_t type, const char* call, const char* name) {
  if (count > SIZE_MAX / collie::typeSize(type))
    return Status::error(collieInvalidArgument, "%s: count %zu of %s overflows size_t bytes", call, count,
                         collie::typeName(type));
  if (buf == nullptr && count > 0)
    return Status::error(collieInvalidArgument, "%s: %s is NULL with count %zu", call, name, count);
  return Status();
}

// A read-only query: works on any live communicator, even an aborted-in-flight or broken one,
// because programs ask for the async error and rank precisely after a failure.
template <typename T, typename Get>
collieResult_t query(collieComm_t comm, T* out, const char* call, const char* outName, Get get) {
  return guarded(comm, [&] {
    if (out == nullptr) return Status::error(collieInvalidArgument, "%s: %s is NULL", call, outName);
    if (comm == nullptr || !collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "%s: comm is not a live communicator", call);
    *out = get(comm);
    return Status();
  });
}

inline Status notYet(const char* call) { return collie::notImplemented(call, "see README.md for what works today"); }
}  // namespace api
}  // namespace collie
