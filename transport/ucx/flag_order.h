// The counters of our window that peers on other hosts advance by messages,
// which a transport may deliver out of order (UCX promises no order for
// active messages). A counter's values come one by one (1, 2, 3, ...), each
// after its slice's data has landed; it may show v only once every value
// below v has come, or a reader would take a slice whose data is not there.
// No UCX in here, so the unit tests run it on any build.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace collie {

class FlagOrder {
 public:
  /// Records that `value` of the counter `key` has come. Returns the value
  /// the counter may now show when that moved, else 0 (a value that came
  /// early, or a repeat).
  uint64_t arrive(uint64_t key, uint64_t value) {
    Flag& f = flags_[key];
    if (value <= f.applied) return 0;
    if (value != f.applied + 1) {
      f.early.push_back(value);
      return 0;
    }
    f.applied = value;
    for (;;) {
      const auto next = std::find(f.early.begin(), f.early.end(), f.applied + 1);
      if (next == f.early.end()) break;
      ++f.applied;
      *next = f.early.back();
      f.early.pop_back();
    }
    return f.applied;
  }

 private:
  struct Flag {
    uint64_t applied = 0;         // every value up to this one has come
    std::vector<uint64_t> early;  // values that came before one below them (at most the slots in flight)
  };
  std::unordered_map<uint64_t, Flag> flags_;
};

}  // namespace collie
