#include "executor/program_cache.h"

#include <algorithm>

#include "base/hash.h"

namespace collie {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return fnv1a(&v, sizeof(v), h); }

}  // namespace

uint64_t ProgramCache::hash(const std::vector<Step>& steps) {
  uint64_t h = kFnvOffset;
  for (const Step& s : steps) {
    h = mix(h, static_cast<uint64_t>(s.op) | static_cast<uint64_t>(s.src.buffer) << 8 |
                   static_cast<uint64_t>(s.dst.buffer) << 16 | static_cast<uint64_t>(s.finalize) << 24 |
                   static_cast<uint64_t>(s.joined) << 32 | static_cast<uint64_t>(s.peerDispl) << 40);
    h = mix(h, static_cast<uint64_t>(static_cast<uint32_t>(s.sendPeer)) << 32 | static_cast<uint32_t>(s.recvPeer));
    h = mix(h, s.src.offset);
    h = mix(h, s.dst.offset);
    h = mix(h, s.count);
    h = mix(h, s.recvCount);
  }
  return h;
}

size_t ProgramCache::blockBytes(size_t steps) {
  size_t bytes = 256;
  while (bytes < steps * sizeof(Step)) bytes *= 2;
  return bytes;
}

void* ProgramCache::find(const std::vector<Step>& steps, uint64_t launch, bool captured) {
  auto range = entries_.equal_range(hash(steps));
  for (auto it = range.first; it != range.second; ++it) {
    Entry& e = it->second;
    if (e.graphsOwn || !sameSteps(e.steps, steps)) continue;
    e.lastUse = std::max(e.lastUse, launch);
    if (captured && e.pins++ == 0) {
      --unpinned_;
      unpinnedBytes_ -= e.bytes;
    }
    return e.block;
  }
  return nullptr;
}

void* ProgramCache::takeFree(size_t steps, size_t* bytes) {
  // Of the size, else the smallest larger up to 4 times it: otherwise free
  // blocks of one size pile up while programs of another keep asking for new
  // ones; but a small program in a huge block would make the next huge one
  // allocate again.
  const size_t want = blockBytes(steps);
  for (auto it = free_.lower_bound(want); it != free_.end() && it->first <= 4 * want; ++it) {
    if (it->second.empty()) continue;
    void* block = it->second.front();
    it->second.pop_front();
    *bytes = it->first;
    return block;
  }
  return nullptr;
}

void ProgramCache::insert(const std::vector<Step>& steps, void* block, size_t bytes, uint64_t launch, bool captured) {
  Entry e;
  e.steps = steps;
  e.block = block;
  e.bytes = bytes;
  e.lastUse = launch;
  e.pins = captured ? 1 : 0;
  e.graphsOwn = captured;
  if (!captured) {
    ++unpinned_;
    unpinnedBytes_ += bytes;
  }
  entries_.emplace(hash(steps), std::move(e));
}

void ProgramCache::release(void* block, size_t bytes) { free_[bytes].push_back(block); }

void ProgramCache::unpin(void* block) {
  // Rare (a graph destroyed), so a scan rather than an index by block.
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    Entry& e = it->second;
    if (e.block != block || e.pins == 0) continue;
    if (e.graphsOwn) {
      // Its one graph is gone with every replay: nothing reads the block any more.
      free_[e.bytes].push_back(e.block);
      entries_.erase(it);
      return;
    }
    if (--e.pins == 0) {
      ++unpinned_;
      unpinnedBytes_ += e.bytes;
    }
    return;
  }
}

bool ProgramCache::overLimit() const { return unpinned_ > limits_.maxEntries || unpinnedBytes_ > limits_.maxBytes; }

void ProgramCache::completed(uint64_t launch) {
  if (!overLimit()) return;
  // The candidates, oldest use first. Evicting down to three quarters of the
  // limits leaves room, so the scan does not come back at every call.
  std::vector<std::pair<uint64_t, decltype(entries_)::iterator>> old;
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->second.pins == 0 && it->second.lastUse <= launch) old.emplace_back(it->second.lastUse, it);
  std::sort(old.begin(), old.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& o : old) {
    if (unpinned_ <= limits_.maxEntries * 3 / 4 && unpinnedBytes_ <= limits_.maxBytes * 3 / 4) break;
    Entry& e = o.second->second;
    free_[e.bytes].push_back(e.block);
    --unpinned_;
    unpinnedBytes_ -= e.bytes;
    entries_.erase(o.second);
  }
}

size_t ProgramCache::freeBlocks() const {
  size_t n = 0;
  for (const auto& f : free_) n += f.second.size();
  return n;
}

std::vector<void*> ProgramCache::blocks() const {
  std::vector<void*> all;
  for (const auto& e : entries_) all.push_back(e.second.block);
  for (const auto& f : free_) all.insert(all.end(), f.second.begin(), f.second.end());
  return all;
}

}  // namespace collie
