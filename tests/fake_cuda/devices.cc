// Devices, the per-thread state (current device, last error, capture mode), properties, peer access
// and kernel attributes of the fake CUDA runtime.
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "internal.h"

namespace fakecuda {
namespace detail {
namespace {

// Set in a child forked after the parent used the runtime: CUDA cannot be used there (every call
// fails with cudaErrorInitializationError), and the fake's worker threads do not exist there either.
std::atomic<bool> forkedAfterUse{false};

constexpr int kMultiProcessors = 132;
constexpr int kWarpSize = 32;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr size_t kSharedMemPerBlock = 48 * 1024;
constexpr size_t kSharedMemPerBlockOptin = 227 * 1024;  // an H100's
constexpr int kVersion = 13000;

}  // namespace

State& state() {
  // Never destroyed: detached workers and late calls from static destructors may still use it.
  static State* st = [] {
    pthread_atfork(nullptr, nullptr, [] { forkedAfterUse.store(true); });
    return new State;
  }();
  return *st;
}

ThreadState& self() {
  thread_local ThreadState t;
  return t;
}

namespace {

// An integer setting of the fake, read on every call: `fallback` when unset or not a number in [0, max].
int setting(const char* name, int fallback, long max) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > max) return fallback;
  return static_cast<int>(n);
}

}  // namespace

int deviceCount() { return setting("COLLIE_TEST_FAKE_CUDA_DEVICES", 1, 64); }

int hardwareQueues() { return setting("COLLIE_TEST_FAKE_CUDA_QUEUES", 0, 128); }

bool peerAccess() { return setting("COLLIE_TEST_FAKE_CUDA_P2P", 1, 1) != 0; }

bool allocationsSynchronize() { return setting("COLLIE_TEST_FAKE_CUDA_ALLOC_SYNC", 1, 1) != 0; }

bool memoryPools() { return setting("COLLIE_TEST_FAKE_CUDA_POOLS", 1, 1) != 0; }

bool validDevice(int device) { return device >= 0 && device < deviceCount(); }

cudaError_t report(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) self().last = e;
  return e;
}

cudaError_t begin() {
  if (forkedAfterUse.load()) return cudaErrorInitializationError;
  state();
  if (deviceCount() == 0) return cudaErrorNoDevice;
  if (!validDevice(self().device)) return cudaErrorInvalidDevice;
  return cudaSuccess;
}

std::unique_lock<std::mutex> lockState() {
  State& st = state();
  std::unique_lock<std::mutex> lock(st.mu);
  drainDeferredFrees(st);
  return lock;
}

DeviceState& deviceState(State& st, int device) { return st.devices[device]; }

}  // namespace detail

cudaError_t clearStickyErrorForTesting(int device) {
  using namespace detail;
  if (!validDevice(device)) return cudaErrorInvalidDevice;
  auto lock = lockState();
  deviceState(state(), device).sticky = cudaSuccess;
  return cudaSuccess;
}

}  // namespace fakecuda

using namespace fakecuda::detail;

namespace {

cudaError_t getDeviceCount(int* count) {
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = 0;
  const cudaError_t e = begin();
  if (e == cudaErrorInitializationError) return e;
  *count = deviceCount();
  return *count == 0 ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t setDevice(int device) {
  const cudaError_t e = begin();
  if (e != cudaSuccess && e != cudaErrorInvalidDevice) return e;
  if (!validDevice(device)) return cudaErrorInvalidDevice;
  self().device = device;
  return cudaSuccess;
}

cudaError_t getDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = begin();
  if (e != cudaSuccess && e != cudaErrorInvalidDevice) return e;
  if (!validDevice(device)) return cudaErrorInvalidDevice;
  memset(prop, 0, sizeof(*prop));
  snprintf(prop->name, sizeof(prop->name), "Collie fake CUDA device");
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = kMultiProcessors;
  prop->totalGlobalMem = kTotalMem;
  prop->warpSize = kWarpSize;
  prop->maxThreadsPerBlock = kMaxThreadsPerBlock;
  prop->sharedMemPerBlock = kSharedMemPerBlock;
  prop->sharedMemPerBlockOptin = kSharedMemPerBlockOptin;
  prop->pciBusID = device;
  // Distinct per device and the same in every process, as a real GPU's UUID is.
  memset(prop->uuid.bytes, 0x5a, sizeof(prop->uuid.bytes));
  memcpy(prop->uuid.bytes, &device, sizeof(device));
  prop->unifiedAddressing = 1;
  prop->canMapHostMemory = 1;
  prop->concurrentKernels = 1;
  return cudaSuccess;
}

cudaError_t deviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = begin();
  if (e != cudaSuccess && e != cudaErrorInvalidDevice) return e;
  if (!validDevice(device)) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
      *value = kMaxThreadsPerBlock;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
      *value = static_cast<int>(kSharedMemPerBlock);
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = static_cast<int>(kSharedMemPerBlockOptin);
      break;
    case cudaDevAttrWarpSize:
      *value = kWarpSize;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = kMultiProcessors;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *value = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      break;
    case cudaDevAttrPciBusId:
      *value = device;
      break;
    case cudaDevAttrMemoryClockRate:  // an H100 SXM's HBM3: 2619 MHz x 5120 bits x 2 = 3.35 TB/s
      *value = 2619000;
      break;
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 5120;
      break;
    case cudaDevAttrUnifiedAddressing:
    case cudaDevAttrCanMapHostMemory:
    case cudaDevAttrConcurrentKernels:
      *value = 1;
      break;
    case cudaDevAttrMemoryPoolsSupported:
      *value = memoryPools() ? 1 : 0;
      break;
    default:
      *value = 0;
      break;
  }
  return cudaSuccess;
}

cudaError_t lastError(bool clear) {
  ThreadState& t = self();
  cudaError_t e = t.last;
  if (clear) t.last = cudaSuccess;
  if (e == cudaSuccess && !forkedAfterUse.load() && validDevice(t.device)) {
    // A sticky error stays: every later query reports it again.
    auto lock = lockState();
    e = deviceState(state(), t.device).sticky;
  }
  return e;
}

cudaError_t deviceCanAccessPeer(int* can, int device, int peer) {
  if (can == nullptr) return cudaErrorInvalidValue;
  const cudaError_t e = begin();
  if (e != cudaSuccess && e != cudaErrorInvalidDevice) return e;
  if (!validDevice(device) || !validDevice(peer)) return cudaErrorInvalidDevice;
  *can = device != peer && peerAccess() ? 1 : 0;
  return cudaSuccess;
}

cudaError_t deviceEnablePeerAccess(int peer, unsigned int flags) {
  if (const cudaError_t e = begin()) return e;
  const int device = self().device;
  if (!validDevice(peer) || peer == device) return cudaErrorInvalidDevice;
  if (flags != 0) return cudaErrorInvalidValue;
  if (!peerAccess()) return cudaErrorPeerAccessUnsupported;
  auto lock = lockState();
  if (!deviceState(state(), device).peers.insert(peer).second) return cudaErrorPeerAccessAlreadyEnabled;
  return cudaSuccess;
}

cudaError_t deviceDisablePeerAccess(int peer) {
  if (const cudaError_t e = begin()) return e;
  if (!validDevice(peer)) return cudaErrorInvalidDevice;
  auto lock = lockState();
  return deviceState(state(), self().device).peers.erase(peer) == 1 ? cudaSuccess : cudaErrorPeerAccessNotEnabled;
}

cudaError_t versionOf(int* out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = kVersion;
  return cudaSuccess;
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) { return report(getDeviceCount(count)); }

cudaError_t CUDARTAPI cudaSetDevice(int device) { return report(setDevice(device)); }

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  if (device == nullptr) return report(cudaErrorInvalidValue);
  const cudaError_t e = begin();
  if (e != cudaSuccess && e != cudaErrorInvalidDevice) return report(e);
  *device = self().device;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return report(getDeviceProperties(prop, device));
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  return report(deviceGetAttribute(value, attr, device));
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* version) { return report(versionOf(version)); }

cudaError_t CUDARTAPI cudaDriverGetVersion(int* version) { return report(versionOf(version)); }

cudaError_t CUDARTAPI cudaGetLastError(void) { return lastError(true); }

cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return lastError(false); }

cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  return report(deviceCanAccessPeer(can, device, peer));
}

cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  return report(deviceEnablePeerAccess(peer, flags));
}

cudaError_t CUDARTAPI cudaDeviceDisablePeerAccess(int peer) { return report(deviceDisablePeerAccess(peer)); }

// No kernel exists in a fake build: launchers enqueue fakecuda::Work instead.
cudaError_t CUDARTAPI cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) {
  return report(cudaErrorInvalidDeviceFunction);
}

cudaError_t CUDARTAPI cudaFuncGetAttributes(cudaFuncAttributes*, const void*) {
  return report(cudaErrorInvalidDeviceFunction);
}

}  // extern "C"
