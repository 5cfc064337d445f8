#include "base/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "base/log.h"

namespace collie {

Status Status::error(collieResult_t code, const char* fmt, ...) {
  Status s;
  s.code_ = code == collieSuccess ? collieInternalError : code;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  s.message_ = buf;
  return s;
}

Status Status::withContext(const std::string& context) const {
  if (ok()) return *this;
  Status s = *this;
  s.message_ = context + ": " + message_;
  return s;
}

Status systemError(const char* what, int err, const char* file, int line) {
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  Status s = Status::error(collieSystemError, "%s failed: %s (%s:%d)", what, strerror(err), base, line);
  COLLIE_WARN("%s", s.message().c_str());
  return s;
}

}  // namespace collie
