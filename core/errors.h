// Turning an internal Status into what the C API returns: the result code,
// plus the sentence collieGetLastError() gives back, kept per thread and per
// communicator.
#pragma once

#include "base/status.h"
#include "collie.h"

namespace collie {

/// Records a failed call's status (thread's and comm's last error; one WARN
/// line) and returns its code. A success clears nothing and returns collieSuccess.
collieResult_t report(const Status& status, collieComm_t comm = nullptr);

/// The enumerator's name of a result ("collieTimeout"), for messages.
const char* resultName(collieResult_t result);

/// The last error text of comm (when registered and non-empty), else of this thread.
const char* lastErrorText(collieComm_t comm);

/// The error of a call whose implementation lands in a later change:
/// collieInvalidUsage, "<call> is not implemented yet (<when>)".
Status notImplemented(const char* call, const char* when);

}  // namespace collie
