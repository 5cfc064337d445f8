// The exchange-floor kernel's body (kernels/exchange_floor.h), written in the device operations of
// kernels/device_ops.cuh, so that the CPU emulation runs the same code (tests/unit/exchange_floor_test.cc).
//
// Exchange f (counted from 1) uses the slots of parity f & 1: a rank writes exchange f + 2 into a peer's slot
// only after it has taken that peer's value of exchange f + 1, which the peer sent after it had taken this rank's
// value of exchange f. So two slots per pair suffice, and a flag is the exchange's own number.
#pragma once

#include <cstdint>

#include "kernels/device_ops.cuh"
#include "kernels/exchange_floor.h"

namespace collie {

/// Thread 0 of the block sends and waits; every thread then passes one barrier, as Collie's waits end (its
/// primitives' fromThread0): with one thread the barrier costs nothing, with a block of 512 its share shows.
__device__ inline void exchangeFloorBlock(const FloorArgs& a) {
  const bool lead = dev::tid() == 0;
  const int n = a.nranks;
  const uint64_t start = lead ? dev::globalTimerNs() : 0;
  bool bad = false;
  for (uint32_t k = 0; k < a.count && !bad; ++k) {
    const uint32_t f = a.first + k;
    if (lead) {
      const uint32_t mine = static_cast<uint32_t>(a.rank) + 1 + f;
      for (int q = 0; q < n; ++q) {
        if (q == a.rank) continue;
        const uint64_t at = (static_cast<uint64_t>(q) * n + a.rank) * 2 + (f & 1);
        uint8_t* line = reinterpret_cast<uint8_t*>(a.lines + at);
        uint8_t* flag = reinterpret_cast<uint8_t*>(a.flags + at);
        if (a.mode == static_cast<int>(FloorMode::kLine)) {
          dev::storeVolatile64(line, (static_cast<uint64_t>(f) << 32) | mine);
        } else {
          dev::storeVolatile64(line, mine);
          if (a.mode == static_cast<int>(FloorMode::kFlagGpu))
            dev::storeReleaseGpu(flag, f);
          else
            dev::storeReleaseSys(flag, f);
        }
      }
      uint64_t sum = mine, deadline = 0;
      for (int p = 0; p < n && !bad; ++p) {
        if (p == a.rank) continue;
        const uint64_t at = (static_cast<uint64_t>(a.rank) * n + p) * 2 + (f & 1);
        const uint8_t* line = reinterpret_cast<const uint8_t*>(a.lines + at);
        const uint8_t* flag = reinterpret_cast<const uint8_t*>(a.flags + at);
        uint64_t v = 0;
        for (uint32_t i = 1;; ++i) {
          bool in = false;
          if (a.mode == static_cast<int>(FloorMode::kLine)) {
            v = dev::loadVolatile64(line);
            in = (v >> 32) == f;
          } else {
            in = (a.mode == static_cast<int>(FloorMode::kFlagGpu) ? dev::loadAcquireGpu(flag)
                                                                  : dev::loadAcquireSys(flag)) == f;
            if (in) v = dev::loadVolatile64(line);
          }
          if (in) break;
          // The clock only now and then, as Collie's waits read it: it is not free.
          if ((i & 1023) != 0) continue;
          if (deadline == 0) deadline = dev::globalTimerNs() + a.timeoutNs;
          if (dev::globalTimerNs() > deadline) {
            bad = true;
            break;
          }
        }
        sum += static_cast<uint32_t>(v);
      }
      // Every rank's value is its rank + 1 + f.
      const uint64_t expected = static_cast<uint64_t>(n) * (n + 1) / 2 + static_cast<uint64_t>(n) * f;
      bad = bad || sum != expected;
    }
    bad = dev::syncOr(bad);
  }
  if (!lead) return;
  if (bad) (void)dev::raiseFirst(a.failed);
  dev::addCount(a.elapsedNs + a.rank, dev::globalTimerNs() - start);
}

}  // namespace collie
