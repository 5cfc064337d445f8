// Host-only interface to the exchange-floor kernel (kernels/exchange_floor.cu): the least a small collective of
// ranks sharing one GPU can do there. Each rank's kernel, one block, hands a payload to every peer and waits for
// every peer's, by one of the ways Collie's protocols use, and checks every word it took. tests/gpu/exchange_floor.cc
// times it, so that Collie's small calls can be compared with the floor measured in the same run (their goal:
// 8 B to 64 KiB in 10 us at 2-8 ranks). Not used by the library.
#pragma once

#include <cstdint>

namespace collie {

/// How a payload goes from one rank to a peer.
enum class FloorMode : int {
  kLine = 0,     // a word per 8-byte {flag, word} line, stored and polled volatile: the LL protocol's way
  kFlagGpu = 1,  // the words, then a flag by a release at GPU scope, polled by acquire: Simple's on one GPU
  kFlagSys = 2,  // the same at system scope: Simple's between processes or GPUs
};

/// One launch's arguments. The buffers are shared by every rank (ranks are threads of one process here).
struct FloorArgs {
  uint64_t* lines = nullptr;      // device, nranks x nranks x 2 x words: [receiver][sender][parity] lines
  uint64_t* flags = nullptr;      // device, nranks x nranks x 2: the flags of kFlagGpu and kFlagSys
  uint32_t* failed = nullptr;     // device: raised by a rank whose wait timed out or that took a wrong word
  uint64_t* credits = nullptr;    // device, nranks x nranks: [sender][receiver], the receiver's last exchange taken
  uint64_t* elapsedNs = nullptr;  // device, nranks: thread 0's time in this rank's exchanges, summed over launches
  int rank = 0, nranks = 1;
  int mode = 0;        // FloorMode
  uint32_t first = 1;  // the number of the launch's first exchange, counted from 1 over the buffers' life
  uint32_t count = 1;  // exchanges in this launch
  uint64_t words = 1;  // 4-byte words each rank hands each peer per exchange, each in a line of its own
  int drain = 0;       // 1: credits back after each exchange, and a wait for them at the launch's end
  uint64_t timeoutNs = 5000000000ull;
};

/// Loads the kernel on the current device before the first launch: loaded lazily, the first launch of one rank
/// could wait for the kernels of its peers, which wait for it (launch.h, preloadProgramKernels). Returns a
/// cudaError_t as an int.
int preloadExchangeFloor();

/// Launches one block of `threads` threads on `stream` (a cudaStream_t). Returns a cudaError_t as an int.
int launchExchangeFloor(const FloorArgs& args, int threads, void* stream);

}  // namespace collie
