#include "core/errors.h"

#include <string>

#include "base/log.h"
#include "core/comm.h"

namespace collie {

namespace {
thread_local std::string tlsLastError;
}

collieResult_t report(const Status& status, collieComm_t comm) {
  if (status.ok()) return collieSuccess;
  tlsLastError = status.message();
  if (comm != nullptr && commIsLive(comm)) {
    std::lock_guard<std::mutex> lock(comm->errorMu);
    comm->lastError = status.message();
  }
  COLLIE_WARN("%s (%s)", status.message().c_str(), collieGetErrorString(status.code()));
  return status.code();
}

const char* lastErrorText(collieComm_t comm) {
  // The comm's text is copied out under a pin, so the pointer handed back stays
  // valid even when another thread destroys the comm right after: it lives in
  // this thread's storage until this thread's next call.
  static thread_local std::string commText;
  if (comm != nullptr && pinComm(comm)) {
    {
      std::lock_guard<std::mutex> lock(comm->errorMu);
      commText = comm->lastError;
    }
    unpinComm(comm);
    if (!commText.empty()) return commText.c_str();
  }
  return tlsLastError.c_str();
}

const char* resultName(collieResult_t result) {
  static const char* const kNames[] = {"collieSuccess",       "collieUnhandledCudaError", "collieSystemError",
                                       "collieInternalError", "collieInvalidArgument",    "collieInvalidUsage",
                                       "collieRemoteError",   "collieInProgress",         "collieTimeout"};
  return result >= 0 && result < collieNumResults ? kNames[result] : "unknown result";
}

Status notImplemented(const char* call, const char* when) {
  return Status::error(collieInvalidUsage, "%s is not implemented yet (%s)", call, when);
}

}  // namespace collie
