// POSIX shared-memory windows for host ranks of one machine. Every rank
// creates one segment (its window: slots and flags, see executor/protocol.h)
// and maps every peer's on the same host (others reach it through UCX). Names are derived from a hash of the
// communicator's secret and a per-communicator nonce, and each segment is unlinked as soon as all peers have mapped it,
// so a crash after init leaves nothing in /dev/shm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace collie {

class Bootstrap;

/// One mapped shm segment (RAII: unmapped, and unlinked if still named, on destruction).
///
/// A process maps each segment once: while a segment is named, opening it in the process that created it (ranks
/// that are threads of one process) shares the creator's mapping, unmapped when the last holder goes. One address
/// per byte is what lets ThreadSanitizer see the slot protocol between such ranks: with a mapping per rank, a flag
/// was stored at one address and loaded at another, and TSan ordered nothing by it (docs/design.md).
class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  /// Creates a new, zero-filled segment; fails if the name exists.
  static Status create(const std::string& name, size_t bytes, ShmSegment* out);
  /// Maps an existing segment, which must be exactly `bytes` long.
  static Status open(const std::string& name, size_t bytes, ShmSegment* out);
  /// Removes the name; the mapping stays valid.
  Status unlink();

  uint8_t* data() const { return map_ != nullptr ? static_cast<uint8_t*>(map_->addr) : nullptr; }
  size_t size() const { return map_ != nullptr ? map_->size : 0; }
  /// The shm name it was created or opened under ("/collie-...").
  const std::string& name() const { return name_; }

 private:
  struct Mapping {
    Mapping(void* a, size_t s) : addr(a), size(s) {}
    ~Mapping();
    void* const addr;
    const size_t size;
  };
  void reset();
  std::shared_ptr<Mapping> map_;
  std::string name_;
  bool owner_ = false;  // created by us and not yet unlinked
};

/// The windows of all ranks of a communicator, mapped into this process.
class ShmWindows {
 public:
  /// Collective over the bootstrap: every rank creates its window of
  /// `bytes`, then maps the others' (only ranks r with map[r] when `map` is
  /// given: those of our host), then unlinks its own.
  static Status create(Bootstrap* bootstrap, size_t bytes, std::unique_ptr<ShmWindows>* out,
                       const std::vector<bool>& map = {});

  /// Rank `rank`'s window; nullptr when it was not mapped (a peer on another host).
  uint8_t* window(int rank) const { return segments_[static_cast<size_t>(rank)].data(); }
  size_t bytes() const { return bytes_; }
  /// The name rank `rank`'s window had (tests check it is gone from /dev/shm).
  const std::string& name(int rank) const { return segments_[static_cast<size_t>(rank)].name(); }

 private:
  std::vector<ShmSegment> segments_;
  size_t bytes_ = 0;
};

}  // namespace collie
