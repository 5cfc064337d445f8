// The exchange-floor kernel's body (kernels/exchange_floor.h), written in the device operations of
// kernels/device_ops.cuh, so that the CPU emulation runs the same code (tests/unit/exchange_floor_test.cc).
//
// Exchange f (counted from 1) uses the slots of parity f & 1: a rank writes exchange f + 2 into a peer's slot
// only after it has taken that peer's payload of exchange f + 1, which the peer sent after it had taken this
// rank's payload of exchange f. So two slots per pair suffice, and a flag is the exchange's own number.
#pragma once

#include <cstdint>

#include "kernels/device_ops.cuh"
#include "kernels/exchange_floor.h"

namespace collie {

/// Word w of `rank`'s payload in exchange f: what the receiver expects at line w.
__device__ inline uint32_t floorWord(int rank, uint32_t f, uint64_t w) {
  return static_cast<uint32_t>(rank) + 1 + f + static_cast<uint32_t>(w);
}

/// Thread 0's or each thread's bounded poll: true once `deadline` (taken at the first slow poll) has passed.
__device__ inline bool floorGaveUp(uint32_t polls, uint64_t timeoutNs, uint64_t* deadline) {
  // The clock only now and then, as Collie's waits read it: it is not free.
  if ((polls & 1023) != 0) return false;
  if (*deadline == 0) *deadline = dev::globalTimerNs() + timeoutNs;
  return dev::globalTimerNs() > *deadline;
}

/// One rank's launch. The block's threads share out the lines of every peer's payload, as the LL protocol's
/// senders and receivers do: each line is checked against the value the sender wrote there, and every exchange
/// ends in one block barrier (with a single thread it costs nothing, with 512 its share shows). With flags, the
/// data goes first, then a barrier and thread 0's release of a flag per peer; thread 0 acquires each peer's flag,
/// and after a barrier the block reads that peer's data: Simple's shape. With `drain`, thread 0 also hands each
/// peer's slot back after each exchange and waits at the end for its own to come back, as Collie's kernels do.
__device__ inline void exchangeFloorBlock(const FloorArgs& a) {
  const bool lead = dev::tid() == 0;
  const bool byLines = a.mode == static_cast<int>(FloorMode::kLine);
  const int n = a.nranks;
  const uint64_t words = a.words;
  const uint64_t start = lead ? dev::globalTimerNs() : 0;
  // The block's verdict, the same in every thread (it comes from a barrier): a wait gave up or a word was wrong.
  bool bad = false;
  for (uint32_t k = 0; k < a.count && !bad; ++k) {
    const uint32_t f = a.first + k;
    auto slot = [&](int to, int from) { return (static_cast<uint64_t>(to) * n + from) * 2 + (f & 1); };
    for (int q = 0; q < n; ++q) {
      if (q == a.rank) continue;
      uint64_t* const data = a.lines + slot(q, a.rank) * words;
      for (uint64_t w = dev::tid(); w < words; w += dev::nthreads()) {
        const uint64_t v = floorWord(a.rank, f, w);
        dev::storeVolatile64(reinterpret_cast<uint8_t*>(data + w), byLines ? (static_cast<uint64_t>(f) << 32) | v : v);
      }
    }
    if (!byLines) {
      dev::sync();  // the block's data is written before thread 0 releases it
      if (lead)
        for (int q = 0; q < n; ++q) {
          if (q == a.rank) continue;
          uint8_t* const flag = reinterpret_cast<uint8_t*>(a.flags + slot(q, a.rank));
          if (a.mode == static_cast<int>(FloorMode::kFlagGpu))
            dev::storeReleaseGpu(flag, f);
          else
            dev::storeReleaseSys(flag, f);
        }
    }
    // This thread's own verdict: one of its waits gave up or a word it took was wrong. It differs between threads,
    // so it stops only loops without a barrier in them; the barriers below make it the block's.
    bool mine = false;
    for (int p = 0; p < n; ++p) {
      if (p == a.rank) continue;
      const uint64_t* const data = a.lines + slot(a.rank, p) * words;
      uint64_t deadline = 0;
      if (!byLines) {
        if (lead) {
          const uint8_t* const flag = reinterpret_cast<const uint8_t*>(a.flags + slot(a.rank, p));
          for (uint32_t i = 1; !mine; ++i) {
            const uint64_t got =
                a.mode == static_cast<int>(FloorMode::kFlagGpu) ? dev::loadAcquireGpu(flag) : dev::loadAcquireSys(flag);
            if (got == f) break;
            mine = floorGaveUp(i, a.timeoutNs, &deadline);
          }
        }
        // The flag is seen before any thread reads the data; every thread leaves the loop here, or none.
        if (dev::syncOr(mine)) {
          mine = true;
          break;
        }
      }
      for (uint64_t w = dev::tid(); w < words && !mine; w += dev::nthreads()) {
        uint64_t v = dev::loadVolatile64(reinterpret_cast<const uint8_t*>(data + w));
        for (uint32_t i = 1; byLines && (v >> 32) != f && !mine; ++i) {
          mine = floorGaveUp(i, a.timeoutNs, &deadline);
          v = dev::loadVolatile64(reinterpret_cast<const uint8_t*>(data + w));
        }
        mine = mine || static_cast<uint32_t>(v) != floorWord(p, f, w);
      }
    }
    bad = dev::syncOr(mine);
    // With a drain, the payload's slots are handed back at once, as Collie's receivers return credits.
    if (a.drain != 0 && lead && !bad)
      for (int p = 0; p < n; ++p)
        if (p != a.rank)
          dev::storeVolatile64(reinterpret_cast<uint8_t*>(a.credits + static_cast<uint64_t>(p) * n + a.rank), f);
  }
  // The drain of Collie's kernels: the launch ends once every peer has handed back what this rank sent it.
  // Thread 0 alone, with no barrier after it: the other threads are done.
  const uint32_t last = a.first + a.count - 1;
  for (int q = 0; q < n && a.drain != 0 && lead && !bad && a.count > 0; ++q) {
    if (q == a.rank) continue;
    const uint8_t* const credit = reinterpret_cast<const uint8_t*>(a.credits + static_cast<uint64_t>(a.rank) * n + q);
    uint64_t deadline = 0;
    for (uint32_t i = 1; dev::loadVolatile64(credit) < last && !bad; ++i) bad = floorGaveUp(i, a.timeoutNs, &deadline);
  }
  if (!lead) return;
  if (bad) (void)dev::raiseFirst(a.failed);
  dev::addCount(a.elapsedNs + a.rank, dev::globalTimerNs() - start);
}

}  // namespace collie
