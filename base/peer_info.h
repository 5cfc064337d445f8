// What each rank tells the others at init, through the bootstrap. A fixed-size
// POD so it travels as raw bytes between processes of one build.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace collie {

struct PeerInfo {
  char hostId[64];  // host identity (COLLIE_HOSTID, else hostname + boot id); equal => same machine
  int32_t pid;
  int32_t cudaDevice;      // -1 for a host communicator
  int32_t backend;         // collieBackend_t actually chosen
  int32_t checkCalls;      // COLLIE_CHECK: all ranks must agree, or the checking ones would wait for the others
  uint64_t windowBytes;    // size of this rank's shm window, so peers can map it
  uint64_t algoHash;       // of this rank's COLLIE_ALGO overrides: ranks that disagree would run different programs
  uint64_t machine;        // hash of hostname + boot id, never faked: ranks that share CPUs (core/cpu_share.h)
  uint64_t cpus[16];       // the CPUs this rank may run on (a bit per CPU, the first 1024)
  uint64_t pidNamespace;   // inode of /proc/self/ns/pid (0: unknown): pids compare only within one namespace
  uint8_t gpuUuid[16];     // the GPU's UUID (zeros: a host communicator, or unknown): device ordinals differ
                           // between processes with different CUDA_VISIBLE_DEVICES, the UUID does not
  uint64_t directStaging;  // COLLIE_DIRECT_STAGING: ranks that stage different amounts would refuse different calls
  int32_t directTune;      // COLLIE_DIRECT_TUNE: ranks that disagree would choose different algorithms
  int32_t oneLaunch;       // COLLIE_DIRECT_ONE_LAUNCH: ranks that disagree would wait for each other until the timeout
};

/// Ranks a and b run on one host (hostId, which COLLIE_HOSTID may fake).
inline bool sameHost(const std::vector<PeerInfo>& peers, int a, int b) {
  return memcmp(peers[static_cast<size_t>(a)].hostId, peers[static_cast<size_t>(b)].hostId, sizeof(peers[0].hostId)) ==
         0;
}

/// Ranks a and b are threads of one process: the same pid in the same pid namespace (containers on one host may
/// reuse pids).
inline bool sameProcess(const std::vector<PeerInfo>& peers, int a, int b) {
  const PeerInfo& x = peers[static_cast<size_t>(a)];
  const PeerInfo& y = peers[static_cast<size_t>(b)];
  return x.pid == y.pid && x.pidNamespace == y.pidNamespace;
}

}  // namespace collie
