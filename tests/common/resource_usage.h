// What a process holds, for tests that create and destroy communicators many
// times and check that nothing grows: open file descriptors, Collie's shared
// memory segments (names under /dev/shm and mappings of them), resident memory.
// Linux only (/proc). Header-only, so the unit tests and the multi-process
// programs (linked to the shared library) use the same counts.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>

namespace collie {
namespace test {

/// True when the build is instrumented by AddressSanitizer, whose quarantine
/// keeps freed memory resident (up to 256 MiB): RSS then says nothing about
/// leaks, and LeakSanitizer checks them at exit instead.
constexpr bool kAddressSanitizer =
#if defined(__SANITIZE_ADDRESS__)
    true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    true;
#else
    false;
#endif
#else
    false;
#endif

/// Entries of /proc/self/fd (the directory stream's own descriptor excluded).
inline int openFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;
}

/// Names of Collie's segments under /dev/shm ("collie-<tag>-<rank>", transport/shm/shm_window.cc).
inline std::set<std::string> shmNames() {
  std::set<std::string> names;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return names;
  while (dirent* e = readdir(d))
    if (strncmp(e->d_name, "collie-", 7) == 0) names.insert(e->d_name);
  closedir(d);
  return names;
}

/// Names in `after` but not in `before` that still exist a moment later.
/// Other processes (tests run in parallel) create segments too, but unlink
/// them within their init, a few milliseconds; a leaked name stays.
inline std::set<std::string> lingeringShmNames(const std::set<std::string>& before) {
  std::set<std::string> fresh;
  for (const std::string& s : shmNames())
    if (!before.count(s)) fresh.insert(s);
  if (fresh.empty()) return fresh;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::set<std::string> now = shmNames();
  std::set<std::string> stayed;
  for (const std::string& s : fresh)
    if (now.count(s)) stayed.insert(s);
  return stayed;
}

/// Mappings of Collie's segments in this process (/proc/self/maps lines naming
/// /dev/shm/collie-, unlinked ones included): a window never unmapped is
/// a leak even after its name is gone.
inline int shmMappings() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == nullptr) return -1;
  int n = 0;
  char line[4096];
  while (fgets(line, sizeof(line), f))
    if (strstr(line, "/dev/shm/collie-")) ++n;
  fclose(f);
  return n;
}

/// Resident set size in KiB (/proc/self/statm's second field).
inline long rssKiB() {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const int got = fscanf(f, "%ld %ld", &size, &resident);
  fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

/// One sample of the counts above.
struct Usage {
  int fds = 0;
  int shmMaps = 0;
  long rss = 0;  // KiB
};

inline Usage sampleUsage() { return Usage{openFds(), shmMappings(), rssKiB()}; }

}  // namespace test
}  // namespace collie
