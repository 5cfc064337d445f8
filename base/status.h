// Status: the error value every internal call returns. Exceptions never cross the
// C boundary; inside, failures travel as a Status carrying the public result code
// and a sentence that becomes collieGetLastError()'s text.
#pragma once

#include <cerrno>
#include <string>

#include "collie.h"

namespace collie {

class Status {
 public:
  Status() = default;  // success

  /// printf-style constructor for a failure; `code` must not be collieSuccess.
  static Status error(collieResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

  bool ok() const { return code_ == collieSuccess; }
  collieResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

  /// Prefixes the message with context ("allreduce: " + message).
  Status withContext(const std::string& context) const;

 private:
  collieResult_t code_ = collieSuccess;
  std::string message_;
};

/// A collieSystemError naming the failed system call, errno text and file:line; logged once at WARN.
Status systemError(const char* what, int err, const char* file, int line);

}  // namespace collie

#define COLLIE_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::collie::Status collie_status_ = (expr);        \
    if (!collie_status_.ok()) return collie_status_; \
  } while (0)

/// Checks a POSIX call that returns -1 and sets errno.
#define COLLIE_CHECK_SYS(call)                                                        \
  do {                                                                                \
    if ((call) == -1) return ::collie::systemError(#call, errno, __FILE__, __LINE__); \
  } while (0)
