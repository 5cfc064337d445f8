// Logging. COLLIE_DEBUG=WARN|INFO|TRACE picks the level (default: WARN),
// COLLIE_DEBUG_FILE sends it to a file (%h = host name, %p = pid) instead of
// stderr. Every line carries host, pid, and the rank the calling thread is
// working for, so interleaved output of many ranks can be untangled.
#pragma once

namespace collie {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };

/// The level read once from COLLIE_DEBUG.
LogLevel logLevel();

void logMessage(LogLevel level, const char* file, int line, const char* fmt, ...) __attribute__((format(printf, 4, 5)));

/// The rank printed in this thread's log lines (-1: none). Set while a call runs for a rank.
void setThreadLogRank(int rank);
int threadLogRank();

/// Sets the thread's log rank for a scope and restores the previous one.
class ScopedLogRank {
 public:
  explicit ScopedLogRank(int rank) : saved_(threadLogRank()) { setThreadLogRank(rank); }
  ~ScopedLogRank() { setThreadLogRank(saved_); }
  ScopedLogRank(const ScopedLogRank&) = delete;
  ScopedLogRank& operator=(const ScopedLogRank&) = delete;

 private:
  int saved_;
};

}  // namespace collie

#define COLLIE_LOG_AT(level, ...)                                                                        \
  do {                                                                                                   \
    if (::collie::logLevel() >= (level)) ::collie::logMessage((level), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define COLLIE_WARN(...) COLLIE_LOG_AT(::collie::LogLevel::kWarn, __VA_ARGS__)
#define COLLIE_INFO(...) COLLIE_LOG_AT(::collie::LogLevel::kInfo, __VA_ARGS__)
#define COLLIE_TRACE(...) COLLIE_LOG_AT(::collie::LogLevel::kTrace, __VA_ARGS__)
