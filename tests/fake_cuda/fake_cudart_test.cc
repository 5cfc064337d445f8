// Unit tests of the fake CUDA runtime (fake_cuda.h): devices, errors, memory, streams, events, IPC.
// Capture and graphs: fake_cudart_capture_test.cc.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "fake_cudart_test_util.h"

extern char** environ;

namespace fakecuda_test {
namespace {

using fakecuda::enqueue;

std::string toHex(const void* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

bool fromHex(const char* s, void* p, size_t n) {
  if (strlen(s) != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    const std::string byte(s + 2 * i, 2);
    static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(strtoul(byte.c_str(), nullptr, 16));
  }
  return true;
}

unsigned char parentByte(size_t i) { return static_cast<unsigned char>(i * 7 + 3); }
unsigned char childByte(size_t i) { return static_cast<unsigned char>(i * 5 + 1); }

// The child side of the IPC tests, run by a copy of this binary started with FAKECUDA_TEST_IPC set
// (before main, so no test runs there). Exit status 0 means every check passed; otherwise the
// status names the first failed step.
int ipcChild() {
  const char* mode = getenv("FAKECUDA_TEST_IPC");
  if (mode == nullptr) return 0;
  const char* hex = getenv("FAKECUDA_TEST_IPC_HANDLE");
  const size_t size = strtoul(getenv("FAKECUDA_TEST_IPC_SIZE"), nullptr, 10);
  cudaIpcMemHandle_t handle;
  if (hex == nullptr || !fromHex(hex, &handle, sizeof(handle))) _exit(2);
  void* p = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
  if (strcmp(mode, "gone") == 0) _exit(e == cudaErrorMapBufferObjectFailed ? 0 : 3);
  if (e != cudaSuccess) _exit(4);
  void* again = nullptr;
  if (cudaIpcOpenMemHandle(&again, handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess || again != p) _exit(5);
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, static_cast<char*>(p) + 10) != cudaSuccess || attr.type != cudaMemoryTypeDevice ||
      attr.device != 1)
    _exit(6);
  std::vector<unsigned char> host(size);
  if (cudaMemcpy(host.data(), p, size, cudaMemcpyDeviceToHost) != cudaSuccess) _exit(7);
  for (size_t i = 0; i < size; ++i)
    if (host[i] != parentByte(i)) _exit(8);
  for (size_t i = 0; i < size; ++i) host[i] = childByte(i);
  if (cudaMemcpy(p, host.data(), size, cudaMemcpyHostToDevice) != cudaSuccess) _exit(9);
  if (cudaIpcCloseMemHandle(again) != cudaSuccess || cudaIpcCloseMemHandle(p) != cudaSuccess) _exit(10);
  if (cudaIpcCloseMemHandle(p) != cudaErrorInvalidValue) _exit(11);
  _exit(0);
}
[[maybe_unused]] const int kIpcChild = ipcChild();

// Runs this binary as an IPC child and returns its exit status (-1: it did not exit normally).
int runIpcChild(const char* mode, const cudaIpcMemHandle_t& handle, size_t size) {
  std::vector<std::string> vars = {std::string("FAKECUDA_TEST_IPC=") + mode,
                                   "FAKECUDA_TEST_IPC_HANDLE=" + toHex(&handle, sizeof(handle)),
                                   "FAKECUDA_TEST_IPC_SIZE=" + std::to_string(size)};
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (std::string& v : vars) env.push_back(&v[0]);
  env.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, exe, nullptr, nullptr, argv, env.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// ---------------------------------------------------------------- devices and errors

TEST_F(FakeCuda, DeviceCountFollowsTheEnvironment) {
  int n = -1;
  ASSERT_EQ(setenv("COLLIE_TEST_FAKE_CUDA_DEVICES", "2", 1), 0);
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
  ASSERT_EQ(setenv("COLLIE_TEST_FAKE_CUDA_DEVICES", "0", 1), 0);
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaErrorNoDevice);
  EXPECT_EQ(n, 0);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 16), cudaErrorNoDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorNoDevice);
  ASSERT_EQ(setenv("COLLIE_TEST_FAKE_CUDA_DEVICES", "4", 1), 0);
  EXPECT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  EXPECT_EQ(n, 4);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(FakeCuda, CurrentDeviceIsPerThreadAndErrorsAreRemembered) {
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  int other = -1;
  std::thread([&] { cudaGetDevice(&other); }).join();
  EXPECT_EQ(other, 0);
  int mine = -1;
  EXPECT_EQ(cudaGetDevice(&mine), cudaSuccess);
  EXPECT_EQ(mine, 2);
  EXPECT_EQ(cudaSetDevice(4), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaGetDevice(&mine), cudaSuccess);
  EXPECT_EQ(mine, 2);
}

TEST_F(FakeCuda, PropertiesAttributesAndVersions) {
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 2), cudaSuccess);
  EXPECT_STREQ(prop.name, "Collie fake CUDA device");
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.totalGlobalMem, size_t{80} << 30);
  EXPECT_EQ(prop.sharedMemPerBlock, size_t{48} << 10);
  EXPECT_EQ(prop.pciBusID, 2);
  EXPECT_EQ(prop.unifiedAddressing, 1);
  EXPECT_EQ(prop.l2CacheSize, 0);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 4), cudaErrorInvalidDevice);
  int v = -1;
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 1), cudaSuccess);
  EXPECT_EQ(v, 132);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrPciBusId, 3), cudaSuccess);
  EXPECT_EQ(v, 3);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrL2CacheSize, 0), cudaSuccess);
  EXPECT_EQ(v, 0);
  EXPECT_EQ(cudaDeviceGetAttribute(&v, cudaDevAttrWarpSize, 7), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  EXPECT_EQ(cudaDriverGetVersion(&v), cudaSuccess);
  EXPECT_EQ(v, 13000);
  cudaFuncAttributes fa;
  EXPECT_EQ(cudaFuncGetAttributes(&fa, reinterpret_cast<const void*>(&toHex)), cudaErrorInvalidDeviceFunction);
  cudaGetLastError();
}

TEST_F(FakeCuda, PeerAccess) {
  int can = -1;
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  EXPECT_EQ(can, 1);
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 1, 1), cudaSuccess);
  EXPECT_EQ(can, 0);
  EXPECT_EQ(cudaDeviceCanAccessPeer(&can, 0, 9), cudaErrorInvalidDevice);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(2, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(2, 0), cudaErrorPeerAccessAlreadyEnabled);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaDeviceEnablePeerAccess(3, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(2), cudaSuccess);
  EXPECT_EQ(cudaDeviceDisablePeerAccess(2), cudaErrorPeerAccessNotEnabled);
  cudaGetLastError();
}

TEST_F(FakeCuda, ErrorStringsAreCudas) {
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorCapturedEvent),
               "operation not permitted on an event last recorded in a capturing stream");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorDeviceUninitialized), "cudaErrorDeviceUninitialized");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorDeviceUninitialized), "invalid device context");
  EXPECT_STREQ(cudaGetErrorString(static_cast<cudaError_t>(12345)), "unrecognized error code");
  EXPECT_STREQ(cudaGetErrorName(static_cast<cudaError_t>(12345)), "unrecognized error code");
}

// A child forked after the parent used CUDA cannot use it.
TEST_F(FakeCuda, ForkedChildCannotUseCuda) {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(cudaGetDeviceCount(&n) == cudaErrorInitializationError ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// ---------------------------------------------------------------- memory

TEST_F(FakeCuda, PointerAttributesOfEveryKindAndInteriorPointers) {
  char *dev = nullptr, *dev1 = nullptr, *host = nullptr, *managed = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 4096), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host), 4096, cudaHostAllocPortable), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&managed), 4096), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev1), 4096), cudaSuccess);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, dev + 100), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 0);
  EXPECT_EQ(a.devicePointer, dev + 100);
  EXPECT_EQ(a.hostPointer, nullptr);
  ASSERT_EQ(cudaPointerGetAttributes(&a, dev1 + 4095), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(a.device, 1);
  ASSERT_EQ(cudaPointerGetAttributes(&a, host + 7), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeHost);
  EXPECT_EQ(a.hostPointer, host + 7);
  EXPECT_EQ(a.devicePointer, host + 7);
  ASSERT_EQ(cudaPointerGetAttributes(&a, managed + 9), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeManaged);
  EXPECT_EQ(a.hostPointer, managed + 9);
  int local = 0;
  ASSERT_EQ(cudaPointerGetAttributes(&a, &local), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  EXPECT_EQ(a.device, -2);
  EXPECT_EQ(a.devicePointer, nullptr);
  EXPECT_EQ(cudaPointerGetAttributes(nullptr, dev), cudaErrorInvalidValue);
  void* alias = nullptr;
  EXPECT_EQ(cudaHostGetDevicePointer(&alias, host + 5, 0), cudaSuccess);
  EXPECT_EQ(alias, host + 5);
  EXPECT_EQ(cudaHostGetDevicePointer(&alias, host, 1), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostGetDevicePointer(&alias, dev, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostGetDevicePointer(&alias, &local, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(dev1), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaFree(managed), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
  cudaGetLastError();
}

TEST_F(FakeCuda, NewMemoryIsNotZero) {
  const size_t n = 1 << 20;
  void *dev = nullptr, *pool = nullptr, *host = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, n), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&pool, n, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&host, n), cudaSuccess);
  std::vector<unsigned char> out(n, 0);
  for (void* p : {dev, pool, host}) {
    ASSERT_EQ(cudaMemcpy(out.data(), p, n, cudaMemcpyDefault), cudaSuccess);
    size_t garbage = 0;
    for (unsigned char c : out) garbage += c == kGarbage;
    EXPECT_EQ(garbage, n);
  }
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(pool, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
}

TEST_F(FakeCuda, AllocationAndFreeErrors) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(cudaMalloc(&p, 0), cudaSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaMalloc(nullptr, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMalloc(&p, size_t{81} << 30), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaMallocManaged(&p, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaHostAlloc(&p, 16, 0x40), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  char *dev = nullptr, *host = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 256), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&host), 256, cudaHostAllocMapped), cudaSuccess);
  int local = 0;
  EXPECT_EQ(cudaFree(dev + 8), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(&local), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(dev), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaFree(dev), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(host), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
}

TEST_F(FakeCuda, MemGetInfoCountsAllocations) {
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  size_t free0 = 0, total = 0, free1 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  EXPECT_EQ(total, size_t{80} << 30);
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 3 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free0 - free1, size_t{3} << 20);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);
}

TEST_F(FakeCuda, CopyKindsMustMatchThePointers) {
  char *dev = nullptr, *pinned = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 256), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 256), cudaSuccess);
  char pageable[256] = {};
  EXPECT_EQ(cudaMemcpy(pageable, pinned, 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dev, dev, 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dev, pageable, 256, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(pageable, dev, 256, cudaMemcpyDeviceToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dev, dev, 256, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(pageable, dev, 256, cudaMemcpyHostToHost), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(dev + 8, pageable, 256, cudaMemcpyHostToDevice), cudaErrorInvalidValue);  // overruns
  EXPECT_EQ(cudaMemcpy(dev, pageable, 256, static_cast<cudaMemcpyKind>(7)), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemset(pageable, 0, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(dev + 250, 0, 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(dev, pageable, 256, cudaMemcpyDeviceToDevice, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(pageable, 0, 16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  // The allowed ones, round trip through device and pinned memory.
  for (int i = 0; i < 256; ++i) pageable[i] = static_cast<char>(i);
  EXPECT_EQ(cudaMemcpy(dev, pageable, 256, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(pinned, dev, 256, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(dev, 0, 256), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, pinned, 256, cudaMemcpyDefault), cudaSuccess);
  char back[256] = {};
  EXPECT_EQ(cudaMemcpy(back, dev, 256, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(memcmp(back, pageable, 256), 0);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// A device-to-device cudaMemcpy and a cudaMemset of device memory return before the copy ran (CUDA
// does not synchronize the host for them); the legacy stream orders them.
TEST_F(FakeCuda, DeviceOnlySyncCopiesDoNotWaitForTheHost) {
  char *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&a), 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&b), 64), cudaSuccess);
  std::atomic<bool> gate{false};
  ASSERT_EQ(enqueue(nullptr, gated(gate)), cudaSuccess);
  EXPECT_EQ(cudaMemset(a, 7, 64), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(b, a, 64, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(b[0], static_cast<char>(kGarbage));  // still queued behind the gate
  gate = true;
  char out[64] = {};
  EXPECT_EQ(cudaMemcpy(out, b, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[63], 7);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
}

// cudaFree waits for the device's queued work, which may still be using the memory.
TEST_F(FakeCuda, FreeWaitsForQueuedWork) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  char* p = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), 4096), cudaSuccess);
  std::atomic<bool> ran{false};
  ASSERT_EQ(enqueue(s,
                    [&] {
                      std::this_thread::sleep_for(30ms);
                      memset(p, 1, 4096);  // a kernel writing its output
                      ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// A free not ordered after the work that reads the memory: the work fails with a sticky error.
TEST_F(FakeCuda, UnorderedFreeAsyncIsAnIllegalAddress) {
  ASSERT_EQ(cudaSetDevice(3), cudaSuccess);
  cudaStream_t reader, freer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&freer, cudaStreamNonBlocking), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 256, freer), cudaSuccess);
  std::atomic<bool> gate{false};
  std::vector<char> out(256);
  ASSERT_EQ(enqueue(reader, gated(gate)), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), p, 256, cudaMemcpyDeviceToHost, reader), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, freer), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(p, freer), cudaErrorInvalidValue);  // already queued for freeing
  ASSERT_EQ(cudaStreamSynchronize(freer), cudaSuccess);
  gate = true;
  EXPECT_EQ(cudaStreamSynchronize(reader), cudaErrorIllegalAddress);
  EXPECT_EQ(fakecuda::clearStickyErrorForTesting(3), cudaSuccess);
  cudaGetLastError();
  EXPECT_EQ(cudaStreamDestroy(reader), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(freer), cudaSuccess);
}

// ---------------------------------------------------------------- streams and events

TEST_F(FakeCuda, StreamOrderHoldsForSlowWork) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(int)), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [dev] {
                      std::this_thread::sleep_for(20ms);
                      *dev = 42;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  int host = 0;
  ASSERT_EQ(cudaMemcpyAsync(&host, dev, sizeof(int), cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(host, 42);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
}

TEST_F(FakeCuda, TwoStreamsRunConcurrently) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&b), cudaSuccess);
  std::atomic<bool> flag{false};
  ASSERT_EQ(enqueue(a, gated(flag)), cudaSuccess);  // a kernel waiting for its peer's
  ASSERT_EQ(enqueue(b,
                    [&] {
                      flag = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
}

// COLLIE_TEST_FAKE_CUDA_QUEUES models a GPU's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): streams are dealt
// to them in turn as they are made, and an item waiting at the head of a queue holds back the items behind
// it, whatever their stream. Here kernel a1 waits for b1 on another stream while a2, queued on a's stream
// before b1, waits for a1: with one queue b1 cannot start until a1 gives up.
TEST_F(FakeCuda, StreamsSharingAHardwareQueueWaitBehindEachOther) {
  struct Run {
    bool a1SawB1 = false;
    bool b1Ran = false;
  };
  auto run = [](const char* queues, bool b1BeforeA2) {
    setenv("COLLIE_TEST_FAKE_CUDA_QUEUES", queues, 1);
    cudaStream_t a, b;
    EXPECT_EQ(cudaStreamCreate(&a), cudaSuccess);
    EXPECT_EQ(cudaStreamCreate(&b), cudaSuccess);
    unsetenv("COLLIE_TEST_FAKE_CUDA_QUEUES");
    std::atomic<bool> flag{false};
    Run r;
    auto a1 = [&] {
      // Long enough for b1 to start when it can, short enough to give up when it cannot.
      const auto until = std::chrono::steady_clock::now() + (b1BeforeA2 || queues[0] != '1' ? kWait : 300ms);
      while (!flag.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(100us);
      r.a1SawB1 = flag.load();
      return cudaSuccess;
    };
    auto b1 = [&] {
      flag = true;
      r.b1Ran = true;
      return cudaSuccess;
    };
    auto a2 = [] { return cudaSuccess; };
    EXPECT_EQ(enqueue(a, a1), cudaSuccess);
    if (b1BeforeA2) {
      EXPECT_EQ(enqueue(b, b1), cudaSuccess);
    }
    EXPECT_EQ(enqueue(a, a2), cudaSuccess);
    if (!b1BeforeA2) {
      EXPECT_EQ(enqueue(b, b1), cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
    return r;
  };
  const Run blocked = run("1", false);
  EXPECT_FALSE(blocked.a1SawB1) << "b1 started ahead of a2, queued before it in the one hardware queue";
  EXPECT_TRUE(blocked.b1Ran);
  EXPECT_TRUE(run("1", true).a1SawB1) << "b1 was pushed before a2: it starts once a1 has";
  EXPECT_TRUE(run("2", false).a1SawB1) << "two streams made in a row get queues of their own";
  EXPECT_TRUE(run("0", false).a1SawB1) << "without the model every stream is a queue of its own";
}

TEST_F(FakeCuda, LegacyStreamSynchronizesWithBlockingStreamsOnly) {
  cudaStream_t blocking, nonBlocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&nonBlocking, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<int> x{0};
  int seen = -1;
  auto later = [&](int v) {
    return [&x, v] {
      std::this_thread::sleep_for(30ms);
      x = v;
      return cudaSuccess;
    };
  };
  auto read = [&] {
    seen = x;
    return cudaSuccess;
  };
  ASSERT_EQ(enqueue(blocking, later(1)), cudaSuccess);
  ASSERT_EQ(enqueue(cudaStreamLegacy, read), cudaSuccess);  // waits for the blocking stream
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(seen, 1);
  ASSERT_EQ(enqueue(nullptr, later(2)), cudaSuccess);
  ASSERT_EQ(enqueue(blocking, read), cudaSuccess);  // waits for the legacy stream
  ASSERT_EQ(cudaStreamSynchronize(blocking), cudaSuccess);
  EXPECT_EQ(seen, 2);
  // The legacy stream does not wait for a non-blocking stream (which here waits for it).
  std::atomic<bool> gate{false};
  ASSERT_EQ(enqueue(nonBlocking, gated(gate)), cudaSuccess);
  ASSERT_EQ(enqueue(nullptr,
                    [&] {
                      gate = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nonBlocking), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  // A synchronous copy waits for the blocking stream's work.
  int* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(int)), cudaSuccess);
  ASSERT_EQ(enqueue(blocking,
                    [dev] {
                      std::this_thread::sleep_for(30ms);
                      *dev = 5;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  int host = 0;
  EXPECT_EQ(cudaMemcpy(&host, dev, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, 5);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(nonBlocking), cudaSuccess);
}

TEST_F(FakeCuda, StreamWaitEventOrdersAcrossStreams) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  std::atomic<int> x{0};
  int seen = -1;
  ASSERT_EQ(enqueue(a,
                    [&] {
                      std::this_thread::sleep_for(30ms);
                      x = 1;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
  // Recording the event again later does not change what b already waits for.
  std::atomic<bool> gate{false};
  ASSERT_EQ(enqueue(a, gated(gate)), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(enqueue(b,
                    [&] {
                      seen = x;
                      gate = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(cudaStreamWaitEvent(b, e, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
  cudaGetLastError();
}

TEST_F(FakeCuda, EventsQuerySynchronizeAndTime) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&end, cudaEventBlockingSync), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  EXPECT_EQ(cudaEventCreateWithFlags(&untimed, 0x80), cudaErrorInvalidValue);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);  // never recorded: complete
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  std::atomic<bool> gate{false};
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  ASSERT_EQ(enqueue(s, gated(gate)), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [] {
                      std::this_thread::sleep_for(20ms);
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaErrorNotReady);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not ready is not an error
  gate = true;
  EXPECT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(untimed), cudaSuccess);  // recorded last on s
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 19.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  // An event and a stream of different devices.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s1;
  ASSERT_EQ(cudaStreamCreate(&s1), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(start, s1), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(s1, end, 0), cudaSuccess);  // waiting across devices is fine
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (cudaEvent_t e : {start, end, untimed}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

TEST_F(FakeCuda, StreamHandles) {
  EXPECT_EQ(cudaStreamDestroy(nullptr), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamDestroy(cudaStreamLegacy), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamCreateWithFlags(nullptr, 0), cudaErrorInvalidValue);
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  int device = -1;
  EXPECT_EQ(cudaStreamGetDevice(s, &device), cudaSuccess);
  EXPECT_EQ(device, 2);
  unsigned flags = 7;
  EXPECT_EQ(cudaStreamGetFlags(s, &flags), cudaSuccess);
  EXPECT_EQ(flags, static_cast<unsigned>(cudaStreamNonBlocking));
  EXPECT_EQ(cudaStreamGetFlags(s, nullptr), cudaErrorInvalidValue);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  EXPECT_EQ(cudaStreamGetDevice(nullptr, &device), cudaSuccess);
  EXPECT_EQ(device, 1);
  EXPECT_EQ(cudaStreamGetFlags(nullptr, &flags), cudaSuccess);
  EXPECT_EQ(flags, 0u);
  // A kernel cannot be launched into a stream of another device than the current one.
  EXPECT_EQ(enqueue(s, [] { return cudaSuccess; }), cudaErrorInvalidResourceHandle);
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  // Destroy returns at once; the queued work still runs.
  std::atomic<bool> gate{false}, ran{false};
  ASSERT_EQ(enqueue(s, gated(gate)), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [&] {
                      ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_FALSE(ran.load());
  EXPECT_EQ(cudaStreamDestroy(s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(enqueue(s, [] { return cudaSuccess; }), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorInvalidResourceHandle);
  gate = true;
  EXPECT_TRUE(waitFlag(ran));
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST_F(FakeCuda, StickyErrorIsReportedAndStays) {
  ASSERT_EQ(cudaSetDevice(3), cudaSuccess);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::atomic<bool> gate{false}, later{false};
  // A kernel that fails once both are queued; the launch itself succeeds.
  ASSERT_EQ(enqueue(s, [&] { return waitFlag(gate) ? cudaErrorIllegalAddress : cudaErrorLaunchTimeout; }), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [&] {
                      later = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  gate = true;
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
  EXPECT_FALSE(later.load());  // nothing runs on the device after the error
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // sticky: not cleared
  EXPECT_EQ(enqueue(s, [] { return cudaSuccess; }), cudaErrorIllegalAddress);
  ASSERT_EQ(cudaSetDevice(2), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // another device is unaffected
  ASSERT_EQ(cudaSetDevice(3), cudaSuccess);
  EXPECT_EQ(fakecuda::clearStickyErrorForTesting(3), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaErrorIllegalAddress);  // the failed enqueue's
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// ---------------------------------------------------------------- IPC

TEST_F(FakeCuda, IpcHandlesAreForOtherProcesses) {
  char* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 4096), cudaSuccess);
  cudaIpcMemHandle_t h;
  ASSERT_EQ(cudaIpcGetMemHandle(&h, dev + 64), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), cudaErrorDeviceUninitialized);
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, h, 0), cudaErrorInvalidValue);
  cudaIpcMemHandle_t bad;
  memset(&bad, 0, sizeof(bad));
  EXPECT_EQ(cudaIpcOpenMemHandle(&p, bad, cudaIpcMemLazyEnablePeerAccess), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaIpcCloseMemHandle(dev), cudaErrorInvalidValue);
  void *host = nullptr, *managed = nullptr, *pool = nullptr;
  ASSERT_EQ(cudaMallocHost(&host, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, 64), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&pool, 64, nullptr), cudaSuccess);
  int local = 0;
  for (void* q : {host, managed, pool, static_cast<void*>(&local)})
    EXPECT_EQ(cudaIpcGetMemHandle(&h, q), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
  EXPECT_EQ(cudaFree(managed), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(pool, nullptr), cudaSuccess);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  cudaGetLastError();
}

// From pageable host memory to the device, cudaMemcpy returns once the bytes are staged; the copy
// lands later, on the legacy stream. A non-blocking stream is not ordered after it: it may still read
// the old bytes (a peer process may read a window header still zero). Waiting for the legacy
// stream makes the copy visible.
TEST_F(FakeCuda, PageableCopyToDeviceLandsAfterReturning) {
  const size_t n = 4096;
  char* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), n), cudaSuccess);
  ASSERT_EQ(cudaMemset(dev, 0, n), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t other;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  std::vector<char> src(n, 7), seen(n, 1);
  setenv("COLLIE_TEST_FAKE_CUDA_PAGEABLE_MS", "1000", 1);  // long enough for the look below to come first
  ASSERT_EQ(cudaMemcpy(dev, src.data(), n, cudaMemcpyHostToDevice), cudaSuccess);
  const auto returned = std::chrono::steady_clock::now();
  unsetenv("COLLIE_TEST_FAKE_CUDA_PAGEABLE_MS");
  src.assign(n, 9);  // staged: what lands is what src held during the call
  ASSERT_EQ(cudaMemcpyAsync(seen.data(), dev, n, cudaMemcpyDeviceToHost, other), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  // A machine so loaded that the look took most of the second cannot tell; say so rather than fail.
  if (std::chrono::steady_clock::now() - returned < 800ms)
    EXPECT_EQ(seen[0], 0) << "the copy was modelled as landing before cudaMemcpy returned";
  else
    printf("the look took too long to tell whether the copy landed late\n");
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(seen.data(), dev, n, cudaMemcpyDeviceToHost, other), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(seen[0], 7);
  EXPECT_EQ(seen[n - 1], 7);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
}

// Another process opens the handle (twice: one mapping, counted), reads what this one wrote and
// writes back; once the memory is freed here the handle no longer opens.
TEST_F(FakeCuda, IpcAcrossProcesses) {
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  const size_t n = 1 << 16;
  char* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), n), cudaSuccess);
  std::vector<unsigned char> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = parentByte(i);
  ASSERT_EQ(cudaMemcpy(dev, host.data(), n, cudaMemcpyHostToDevice), cudaSuccess);
  // From pageable memory the copy may land after cudaMemcpy returns: the child must not look before.
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamLegacy), cudaSuccess);
  cudaIpcMemHandle_t h;
  ASSERT_EQ(cudaIpcGetMemHandle(&h, dev + 100), cudaSuccess);  // the handle stands for the allocation
  EXPECT_EQ(runIpcChild("open", h, n), 0);
  ASSERT_EQ(cudaMemcpy(host.data(), dev, n, cudaMemcpyDeviceToHost), cudaSuccess);
  size_t written = 0;
  for (size_t i = 0; i < n; ++i) written += host[i] == childByte(i);
  EXPECT_EQ(written, n);
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(runIpcChild("gone", h, n), 0);
}

}  // namespace
}  // namespace fakecuda_test
