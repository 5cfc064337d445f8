// Buffer windows: ranges of the ranks' own device memory that every rank of a communicator registers together
// (collieCommWindowRegister, and the communicator's staging buffer), so that each rank can address every peer's
// range. How a peer's range is reached depends on where the peer runs, as for the device windows
// (device_windows.h):
//
//   same process        the peer's addresses, as is (no mapping)
//   another process     cudaIpcGetMemHandle of the allocation that holds the range -> bootstrap ->
//                       cudaIpcOpenMemHandle, once per peer allocation however many windows lie in it
//
// A handle stands for a whole cudaMalloc allocation, and opening it yields the allocation's start, so a range
// offered to peer processes goes with the start of its allocation: known for collieMemAlloc's memory and the
// staging buffer, asked of the driver (cuMemGetAddressRange) for other memory, such as a caching allocator's
// segment. A range in no single allocation, or in memory cudaIpc cannot export, is refused on every rank.
// Registration and removal are collective, in the same order on every rank, so a window's number is the same
// everywhere: each registration takes the lowest number free on all ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/peer_info.h"
#include "base/status.h"

namespace collie {

class Bootstrap;

/// How this rank reaches one peer's window: an address a of the peer's inside it is a - remoteBase + localBase
/// here; both 0 where the peer is a thread of this process (its addresses are ours) or on another host.
struct PeerRange {
  uint64_t remoteBase = 0;
  uint64_t localBase = 0;
};

class BufferWindows {
 public:
  /// `maxWindows`: how many may be registered at once (numbers 0..maxWindows-1).
  BufferWindows(Bootstrap* bootstrap, const std::vector<PeerInfo>& peers, int device, int maxWindows);
  ~BufferWindows();  // closes every mapping still open
  BufferWindows(const BufferWindows&) = delete;
  BufferWindows& operator=(const BufferWindows&) = delete;

  /// Collective: registers this rank's [base, base + bytes) as the window numbered the lowest free on every rank
  /// (0 is never: the communicator's staging buffer, which the device windows map). `allocStart`: the start of
  /// the cudaMalloc allocation holding it, or null where unknown (then the driver is asked, where peers are
  /// processes). `refusal`:
  /// this rank's own error with its arguments, which it still brings to the exchange. On success, *number is the
  /// window's, and (*ranges)[r] says how to reach rank r's range. Every rank fails alike.
  Status add(const void* base, uint64_t bytes, const void* allocStart, const Status& refusal, int* number,
             std::vector<PeerRange>* ranges);
  /// Closes this rank's mappings of window `number` (collective by contract, not by communication).
  void remove(int number);
  /// Whether rank r is another process of this host (its windows go through cudaIpc handles).
  bool peerProcess(int r) const { return peerProcess_[static_cast<size_t>(r)]; }

 private:
  struct Opened {  // one peer allocation, mapped here
    int peer;
    uint64_t remoteStart;
    void* local;
    int windows;  // how many windows use it
  };
  void release(int peer, uint64_t remoteStart);

  Bootstrap* bootstrap_;
  std::vector<bool> peerProcess_;
  int device_;
  std::vector<bool> used_;
  // Per window number, the peer allocations it holds open: (peer, remote start).
  std::vector<std::vector<std::pair<int, uint64_t>>> holds_;
  std::vector<Opened> opened_;
};

}  // namespace collie
