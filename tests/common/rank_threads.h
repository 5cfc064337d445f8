// Ranks as threads of the test process: a clique made with collieCommInitAll,
// a helper that runs one function per rank concurrently, and a scoped
// environment variable (read by communicator init).
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collie.h"

namespace collie {
namespace test {

/// Runs fn(rank) on n threads at once and joins them.
inline void onRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

/// n communicators of one clique; destroyed with the object.
struct Comms {
  /// Rank r on GPU devlist[r] (CUDA backend), or on GPU r modulo the count when devlist is null.
  explicit Comms(int n, const int* devlist = nullptr) : comms(static_cast<size_t>(n), nullptr) {
    result = collieCommInitAll(comms.data(), n, devlist);
  }
  /// Takes communicators made otherwise (collieCommSplit, collieCommShrink), in rank order.
  explicit Comms(std::vector<collieComm_t> made) : comms(std::move(made)), result(collieSuccess) {}
  ~Comms() {
    for (collieComm_t c : comms) collieCommDestroy(c);
  }
  collieComm_t operator[](int r) const { return comms[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(comms.size()); }
  std::vector<collieComm_t> comms;
  collieResult_t result;
};

/// Sets (or, with nullptr, unsets) an environment variable for the object's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace test
}  // namespace collie
