// A process-wide table through which the ranks of one communicator that are threads of this process find each
// other's shared state (ColocatedStreams' notes, PeerBoard's posts) without sharing a communicator object.
// A rank's key is its device window's address, unique in the process while its communicator lives. Entries are
// weak: a rank whose communicator is gone leaves nothing a later one could find. One table per type T.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace collie {

template <typename T>
class ProcessTable {
 public:
  /// Enters `value` under `key`.
  static void put(const void* key, const std::shared_ptr<T>& value) {
    std::lock_guard<std::mutex> lock(mu());
    entries()[key] = value;
  }
  /// Removes `key`'s entry if it is still `value`.
  static void remove(const void* key, const std::shared_ptr<T>& value) {
    std::lock_guard<std::mutex> lock(mu());
    auto it = entries().find(key);
    if (it != entries().end() && it->second.lock() == value) entries().erase(it);
  }
  /// `key`'s entry, or null while none is there.
  static std::shared_ptr<T> find(const void* key) {
    std::lock_guard<std::mutex> lock(mu());
    auto it = entries().find(key);
    return it != entries().end() ? it->second.lock() : nullptr;
  }

 private:
  // Never destroyed: ranks may outlive main.
  static std::mutex& mu() {
    static auto* m = new std::mutex();
    return *m;
  }
  static std::map<const void*, std::weak_ptr<T>>& entries() {
    static auto* t = new std::map<const void*, std::weak_ptr<T>>();
    return *t;
  }
};

/// Between the polls of a host wait for a peer thread (the `polls`-th so far): the peer is usually microseconds
/// behind, and a thread that slept at once would add a scheduler tick; later polls sleep, to leave the core.
inline void pauseForPeer(size_t polls) {
  if (polls < 200)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace collie
