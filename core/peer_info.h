// What each rank tells the others at init, through the bootstrap. A fixed-size
// POD so it travels as raw bytes between processes of one build.
#pragma once

#include <cstdint>

namespace collie {

struct PeerInfo {
  char hostId[64];  // host identity (COLLIE_HOSTID, else hostname + boot id); equal => same machine
  int32_t pid;
  int32_t cudaDevice;  // -1 for a host communicator
  int32_t backend;     // collieBackend_t actually chosen
  int32_t reserved;
  uint64_t windowBytes;  // size of this rank's shm window, so peers can map it
  uint64_t algoHash;     // of this rank's COLLIE_ALGO overrides: ranks that disagree would run different programs
};

}  // namespace collie
