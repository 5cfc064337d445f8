// The age of the LL lines in a clique's host windows (emulated kernels: the
// CUDA kernels' code on host threads, ranks as threads). An LL line is new when
// its flag is that of the slice expected, and flags repeat every flag period,
// so the sender keeps every line younger than half a period plus nslots slices
// (kernels/device_prims_ll.cuh, "Stale lines"). A line older than that is a
// stale line waiting to be taken for new, whether or not a receiver has been
// quick enough to take one yet: the check catches the fault, not its luck.
// Header-only: it reads the windows through the communicator's internals, so
// only tests linked with them include it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "common/rank_threads.h"
#include "core/comm.h"
#include "executor/protocol.h"
#include "transport/shm/shm_window.h"

namespace collie {
namespace test {

/// The layout rank `to`'s window header describes.
inline WindowLayout windowLayout(const Comms& c, int to) {
  WindowHeader h;
  std::memcpy(&h, c[to]->windows->window(to), sizeof(h));
  return layoutOf(h);
}

/// Slices rank `from` has posted to rank `to` on `channel` (the ready counter in the receiver's window, without
/// its marks: protocol.h, kFlagCount).
inline uint64_t postedSlices(const Comms& c, int from, int to, int channel = 0) {
  const uint8_t* window = c[to]->windows->window(to);
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(window + windowLayout(c, to).readyOffset(channel, from)),
                         __ATOMIC_ACQUIRE) &
         kFlagCount;
}

/// The oldest line of the LL slots of connection from -> to on `channel`, in slices before the newest posted
/// (modulo the flag period, which is all a flag tells); lines never written (flag 0) do not count.
inline uint64_t oldestLLLine(const Comms& c, int from, int to, int channel = 0) {
  const uint8_t* window = c[to]->windows->window(to);
  const WindowLayout layout = windowLayout(c, to);
  const uint64_t newest = postedSlices(c, from, to, channel) - 1;
  const uint8_t* slots = window + layout.llSlotOffset(channel, from, 0);
  uint64_t oldest = 0;
  for (uint64_t w = 0; w < layout.nslots * (layout.llSlotBytes / kLLLine); ++w) {
    const uint64_t line = __atomic_load_n(reinterpret_cast<const uint64_t*>(slots + kLLLine * w), __ATOMIC_RELAXED);
    const uint32_t flag = static_cast<uint32_t>(line >> 32) & kLLSliceMask;  // without its call's tag
    if (flag == 0) continue;
    // The flag of slice e is e mod period + 1.
    const uint64_t age = (newest - (flag - 1)) & (layout.llFlagPeriod - 1);
    if (age > oldest) oldest = age;
  }
  return oldest;
}

/// "" when no line of any used connection (every channel) is as old as half a period plus nslots slices; else a
/// sentence naming the first that is. Call between calls, when no kernel is writing.
inline std::string staleLLLine(const Comms& c) {
  for (int to = 0; to < c.size(); ++to) {
    uint64_t magic = 0;
    std::memcpy(&magic, c[to]->windows->window(to), sizeof(magic));
    if (magic != kWindowMagic) return "rank " + std::to_string(to) + "'s window has no Collie header";
    const WindowLayout layout = windowLayout(c, to);
    const uint64_t bound = llStaleAfter(layout.llFlagPeriod) + layout.nslots;
    for (int ch = 0; ch < static_cast<int>(layout.nchannels); ++ch) {
      for (int from = 0; from < c.size(); ++from) {
        if (from == to) continue;
        const uint64_t posted = postedSlices(c, from, to, ch);
        if (posted == 0) continue;
        const uint64_t oldest = oldestLLLine(c, from, to, ch);
        if (oldest >= bound)
          return "the LL slots " + std::to_string(from) + " -> " + std::to_string(to) + " of channel " +
                 std::to_string(ch) + " hold a line " + std::to_string(oldest) + " slices older than slice " +
                 std::to_string(posted - 1) + " (the bound is " + std::to_string(bound) +
                 "): a line this old outlives its flag";
      }
    }
  }
  return "";
}

}  // namespace test
}  // namespace collie
