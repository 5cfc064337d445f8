#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/env.h"

namespace collie {

namespace {

struct Sink {
  LogLevel level = LogLevel::kWarn;
  FILE* out = stderr;
  char host[64] = {0};
};

// Expands %h and %p in COLLIE_DEBUG_FILE so every process of a job gets its own file.
std::string expandLogPath(const std::string& pattern, const char* host) {
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') {
        path += host;
        ++i;
        continue;
      }
      if (c == 'p') {
        path += std::to_string(getpid());
        ++i;
        continue;
      }
    }
    path += pattern[i];
  }
  return path;
}

Sink& sink() {
  static Sink s;
  static std::once_flag once;
  std::call_once(once, [] {
    gethostname(s.host, sizeof(s.host) - 1);
    if (std::optional<std::string> lvl = env::get("COLLIE_DEBUG")) {
      if (strcasecmp(lvl->c_str(), "WARN") == 0)
        s.level = LogLevel::kWarn;
      else if (strcasecmp(lvl->c_str(), "INFO") == 0)
        s.level = LogLevel::kInfo;
      else if (strcasecmp(lvl->c_str(), "TRACE") == 0)
        s.level = LogLevel::kTrace;
      else if (strcasecmp(lvl->c_str(), "NONE") == 0)
        s.level = LogLevel::kNone;
      else
        fprintf(stderr, "COLLIE WARN COLLIE_DEBUG=%s is not WARN, INFO, TRACE or NONE; using WARN\n", lvl->c_str());
    }
    if (std::optional<std::string> file = env::get("COLLIE_DEBUG_FILE")) {
      std::string path = expandLogPath(*file, s.host);
      FILE* f = fopen(path.c_str(), "a");
      if (f) {
        setvbuf(f, nullptr, _IOLBF, 0);
        s.out = f;
      } else {
        fprintf(stderr, "COLLIE WARN cannot open COLLIE_DEBUG_FILE %s: %s; logging to stderr\n", path.c_str(),
                strerror(errno));
      }
    }
  });
  return s;
}

thread_local int tlsRank = -1;

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kTrace:
      return "TRACE";
    default:
      return "";
  }
}

}  // namespace

LogLevel logLevel() { return sink().level; }

void setThreadLogRank(int rank) { tlsRank = rank; }
int threadLogRank() { return tlsRank; }

void logMessage(LogLevel level, const char* file, int line, const char* fmt, ...) {
  Sink& s = sink();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank[24] = "";
  if (tlsRank >= 0) snprintf(rank, sizeof(rank), " [%d]", tlsRank);
  // One fprintf per line keeps lines whole when threads log at once.
  if (level == LogLevel::kTrace)
    fprintf(s.out, "%s:%d:%ld%s COLLIE %s %s (%s:%d)\n", s.host, getpid(), static_cast<long>(syscall(SYS_gettid)), rank,
            levelName(level), msg, base, line);
  else
    fprintf(s.out, "%s:%d:%ld%s COLLIE %s %s\n", s.host, getpid(), static_cast<long>(syscall(SYS_gettid)), rank,
            levelName(level), msg);
}

}  // namespace collie
