// The CUDA executor's uploaded programs (executor/cuda_executor.h), as
// bookkeeping the CPU suite tests: which device copy holds which steps, which
// launches still read it, and which copies may be overwritten.
//
// Why it exists: a program too long for the launch parameters (more than
// kInlineSteps steps in all: a ring of 21 ranks or more, of about 11 or more
// when a call runs in rounds, all-to-all-v of many ranks)
// is copied to device memory. Its steps hold counts and offsets, so every new
// count is a new program; all-to-all-v with changing splits (a mixture of
// experts) makes one per call. Kept for ever, they grow without bound. Freeing
// one is not an option either: cudaFree may wait for the whole device, where
// another rank's kernel may be waiting for this rank's next launch.
//
// So copies are reused instead: above `maxEntries` entries or `maxBytes`
// bytes, the least recently used ones are evicted once every launch that read
// them is known to have finished (completed()), and their device blocks
// (power-of-two sizes) are handed out again for the next uploads, a larger
// one when none of the size is free. A copy used by a launch captured into a
// CUDA graph is pinned, once per graph: the graph may replay it at any time.
// The executor learns when such a graph is gone (a CUDA user object the graph
// owns, destroyed once the graph, its executable graphs and their queued
// replays are) and unpins it then. A copy uploaded during a capture is the
// graph's own: the copy is a node of the graph, so the block holds the
// program only once a replay has run, and no other launch may find it; its
// block is free again when the graph is gone. Equality is field by field: a
// Step has padding bytes, which two equal programs need not share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "algorithms/program.h"

namespace collie {

class ProgramCache {
 public:
  struct Limits {
    size_t maxEntries = 256;     // unpinned programs kept
    size_t maxBytes = 4u << 20;  // their device blocks' bytes
  };
  explicit ProgramCache(Limits limits) : limits_(limits) {}
  ProgramCache(const ProgramCache&) = delete;
  ProgramCache& operator=(const ProgramCache&) = delete;

  /// The device copy of `steps`, or nullptr. A hit is marked as read by
  /// launch `launch` (numbers grow by launch) and, when `captured`, pinned
  /// once more. Copies a graph owns (insert while captured) are never found.
  void* find(const std::vector<Step>& steps, uint64_t launch, bool captured);
  /// Bytes of the device block that holds `steps` (a power of two, at least 256).
  static size_t blockBytes(size_t steps);
  /// A block that holds `steps` steps and that no launch reads any more (an
  /// evicted program's: of blockBytes(steps), else the smallest larger one up
  /// to 4 times that), its size in *bytes; or nullptr: the caller allocates
  /// blockBytes(steps).
  void* takeFree(size_t steps, size_t* bytes);
  /// Records `steps` as uploaded to `block` of `bytes` (from takeFree, or
  /// newly allocated), read by launch `launch`. When `captured`, the upload
  /// is a node of the capture's graph: the copy is that graph's alone,
  /// pinned, never found, and its block free again at its unpin().
  void insert(const std::vector<Step>& steps, void* block, size_t bytes, uint64_t launch, bool captured);
  /// Gives back a block of `bytes` whose upload failed.
  void release(void* block, size_t bytes);
  /// A graph that pinned the program in `block` (find or insert while
  /// captured) is gone, with every replay of it: one pin fewer. Unpinned, the
  /// program is evicted like any other once the launches that read it
  /// finished; a graph's own copy (insert while captured) is dropped at once.
  void unpin(void* block);
  /// Every launch numbered up to `launch` has finished: evicts unpinned
  /// programs no later launch reads, least recently used first, until within
  /// the limits; their blocks become free.
  void completed(uint64_t launch);
  /// Whether unpinned programs exceed the limits (completed() would evict).
  bool overLimit() const;

  size_t entries() const { return entries_.size(); }
  size_t freeBlocks() const;
  /// Every device block held (cached and free), for the owner to free at the end.
  std::vector<void*> blocks() const;

 private:
  struct Entry {
    std::vector<Step> steps;
    void* block = nullptr;
    size_t bytes = 0;  // of the block
    uint64_t lastUse = 0;
    uint32_t pins = 0;       // graphs that may replay it
    bool graphsOwn = false;  // uploaded by a captured launch: valid only inside that graph
  };
  static uint64_t hash(const std::vector<Step>& steps);

  const Limits limits_;
  std::unordered_multimap<uint64_t, Entry> entries_;  // by hash(steps)
  std::map<size_t, std::deque<void*>> free_;          // blocks by size, the longest free first
  size_t unpinned_ = 0, unpinnedBytes_ = 0;
};

}  // namespace collie
