// Unit tests of the fake CUDA runtime's allocations as they meet running work: cudaMalloc and
// cudaHostAlloc wait for the device, as the CUDA programming guide allows ("Implicit Synchronization"),
// while stream-ordered allocations, from the default pool or one of cudaMemPoolCreate, wait for nothing;
// which calls count as waiting for other streams; a pool's access by other GPUs; the driver's address range.
#include <cuda.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

#include "fake_cudart_test_util.h"

extern "C" unsigned long long fakecudaHostWaitsOfThisThread(void);
extern "C" unsigned long long fakecudaDeviceWaitsOfThisThread(void);

namespace fakecuda_test {
namespace {

using fakecuda::enqueue;

// A kernel that spins until `gate` opens, standing for a peer's kernel waiting for this rank.
struct GatedStream {
  GatedStream() {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(enqueue(stream,
                      [this] {
                        const cudaError_t e = gated(gate)();
                        ran = true;
                        return e;
                      }),
              cudaSuccess);
  }
  ~GatedStream() {
    gate = true;
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  }
  // Opens the gate from another thread after `delay`.
  std::thread openAfter(std::chrono::milliseconds delay) {
    return std::thread([this, delay] {
      std::this_thread::sleep_for(delay);
      gate = true;
    });
  }
  cudaStream_t stream = nullptr;
  std::atomic<bool> gate{false};
  std::atomic<bool> ran{false};
};

TEST_F(FakeCuda, DeviceAndPinnedAllocationsWaitForRunningWork) {
  for (bool host : {false, true}) {
    GatedStream busy;
    std::thread opener = busy.openAfter(50ms);
    const unsigned long long waits = fakecudaHostWaitsOfThisThread();
    void* p = nullptr;
    EXPECT_EQ(host ? cudaHostAlloc(&p, 256, cudaHostAllocDefault) : cudaMalloc(&p, 256), cudaSuccess);
    EXPECT_TRUE(busy.ran.load()) << (host ? "cudaHostAlloc" : "cudaMalloc") << " returned while work ran";
    EXPECT_EQ(fakecudaHostWaitsOfThisThread(), waits + 1);
    opener.join();
    EXPECT_EQ(host ? cudaFreeHost(p) : cudaFree(p), cudaSuccess);
  }
}

TEST_F(FakeCuda, WithoutTheAllocationWaitOnlyTheCountStays) {
  ASSERT_EQ(setenv("COLLIE_TEST_FAKE_CUDA_ALLOC_SYNC", "0", 1), 0);
  {
    GatedStream busy;
    const unsigned long long waits = fakecudaHostWaitsOfThisThread();
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, 256), cudaSuccess);
    EXPECT_FALSE(busy.ran.load());
    EXPECT_EQ(fakecudaHostWaitsOfThisThread(), waits + 1);
    busy.gate = true;
    EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
  ASSERT_EQ(unsetenv("COLLIE_TEST_FAKE_CUDA_ALLOC_SYNC"), 0);
}

// A pool of pinned device memory on `device`.
cudaError_t createPool(int device, cudaMemPool_t* out) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  return cudaMemPoolCreate(out, &props);
}

TEST_F(FakeCuda, StreamOrderedAllocationsWaitForNothing) {
  GatedStream busy;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(createPool(0, &pool), cudaSuccess);
  uint64_t keep = UINT64_MAX;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), cudaSuccess);
  const unsigned long long waits = fakecudaHostWaitsOfThisThread();
  void *a = nullptr, *b = nullptr;
  EXPECT_EQ(cudaMallocAsync(&a, 256, s), cudaSuccess);
  EXPECT_EQ(cudaMallocFromPoolAsync(&b, 256, pool, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);  // nothing queued: usable from any stream
  EXPECT_FALSE(busy.ran.load());
  EXPECT_EQ(fakecudaHostWaitsOfThisThread(), waits);
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, b), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  EXPECT_EQ(attr.device, 0);
  EXPECT_EQ(cudaFreeAsync(a, s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(b, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(FakeCuda, PoolHandlesAndPropertiesAreChecked) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 9;  // 4 devices
  cudaMemPool_t pool = nullptr;
  EXPECT_EQ(cudaMemPoolCreate(&pool, &props), cudaErrorInvalidValue);
  props.location.id = 1;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  int supported = 0;
  EXPECT_EQ(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 1), cudaSuccess);
  EXPECT_EQ(supported, 1);
  // Memory of the pool's device, whatever device is current.
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  void* p = nullptr;
  ASSERT_EQ(cudaMallocFromPoolAsync(&p, 64, pool, s), cudaSuccess);
  cudaPointerAttributes attr;
  ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
  EXPECT_EQ(attr.device, 1);
  EXPECT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  int no = 0;
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMallocFromPoolAsync(&p, 64, pool, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaErrorInvalidValue);
  cudaGetLastError();
}

// The calls that wait for other streams' work are counted (Collie's init and destroy make none where ranks share
// a GPU, base/device_memory.h); stream-ordered allocation and work on a non-blocking stream are not.
TEST_F(FakeCuda, DeviceWaitsAreCountedForCallsThatWaitForOtherStreams) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  unsigned long long before = fakecudaDeviceWaitsOfThisThread();
  void* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(&p, 256, s), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(p, 0, 256, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(fakecudaDeviceWaitsOfThisThread(), before);
  struct Call {
    const char* name;
    std::function<cudaError_t()> run;
  };
  void* dev = nullptr;
  void* host = nullptr;
  const Call calls[] = {
      {"cudaMalloc", [&] { return cudaMalloc(&dev, 256); }},
      {"cudaMemset", [&] { return cudaMemset(dev, 0, 256); }},
      {"cudaStreamSynchronize of the legacy stream", [&] { return cudaStreamSynchronize(cudaStreamLegacy); }},
      {"cudaFree", [&] { return cudaFree(dev); }},
      {"cudaHostAlloc", [&] { return cudaHostAlloc(&host, 256, cudaHostAllocMapped); }},
      {"cudaFreeHost", [&] { return cudaFreeHost(host); }},
      {"cudaDeviceSynchronize", [&] { return cudaDeviceSynchronize(); }},
  };
  for (const Call& c : calls) {
    before = fakecudaDeviceWaitsOfThisThread();
    EXPECT_EQ(c.run(), cudaSuccess) << c.name;
    EXPECT_EQ(fakecudaDeviceWaitsOfThisThread(), before + 1) << c.name;
  }
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// cudaMemPoolSetAccess checks its pool and descriptors, and opens a pool to another GPU only with P2P;
// COLLIE_TEST_FAKE_CUDA_POOLS=0 plays a GPU without memory pools.
TEST_F(FakeCuda, PoolAccessNeedsP2PAndPoolsCanBeMissing) {
  cudaMemPool_t pool = nullptr;
  ASSERT_EQ(createPool(0, &pool), cudaSuccess);
  cudaMemAccessDesc desc = {};
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = 1;
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaSuccess);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, nullptr, 1), cudaErrorInvalidValue);
  desc.location.id = 9;  // 4 devices
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidValue);
  desc.location.id = 1;
  ASSERT_EQ(setenv("COLLIE_TEST_FAKE_CUDA_P2P", "0", 1), 0);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidDevice);
  ASSERT_EQ(unsetenv("COLLIE_TEST_FAKE_CUDA_P2P"), 0);
  EXPECT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  EXPECT_EQ(cudaMemPoolSetAccess(pool, &desc, 1), cudaErrorInvalidValue);
  int supported = 1;
  ASSERT_EQ(setenv("COLLIE_TEST_FAKE_CUDA_POOLS", "0", 1), 0);
  EXPECT_EQ(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0), cudaSuccess);
  EXPECT_EQ(supported, 0);
  ASSERT_EQ(unsetenv("COLLIE_TEST_FAKE_CUDA_POOLS"), 0);
  cudaGetLastError();
}

}  // namespace
// The one driver entry point the fake has, cuMemGetAddressRange: the allocation holding an interior pointer, of
// cudaMalloc and pool memory alike; host memory and unknown addresses are none. Other symbols are not found.
TEST_F(FakeCuda, TheDriversAddressRangeFindsTheAllocation) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  ASSERT_EQ(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found),
            cudaSuccess);
  ASSERT_EQ(found, cudaDriverEntryPointSuccess);
  ASSERT_NE(fn, nullptr);
  const GetRange range = reinterpret_cast<GetRange>(fn);
  void* plainMem = nullptr;
  void* pooledMem = nullptr;
  void* host = nullptr;
  ASSERT_EQ(cudaMalloc(&plainMem, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&pooledMem, 4096, nullptr), cudaSuccess);
  char* plain = static_cast<char*>(plainMem);
  char* pooled = static_cast<char*>(pooledMem);
  ASSERT_EQ(cudaMallocHost(&host, 4096), cudaSuccess);
  for (char* base : {plain, pooled}) {
    CUdeviceptr start = 0;
    size_t size = 0;
    ASSERT_EQ(range(&start, &size, reinterpret_cast<CUdeviceptr>(base + 100)), CUDA_SUCCESS);
    EXPECT_EQ(start, reinterpret_cast<CUdeviceptr>(base));
    EXPECT_EQ(size, base == plain ? size_t{1} << 20 : size_t{4096});
  }
  CUdeviceptr start = 0;
  size_t size = 0;
  EXPECT_EQ(range(&start, &size, reinterpret_cast<CUdeviceptr>(host)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(range(&start, &size, reinterpret_cast<CUdeviceptr>(&size)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion("cuNoSuchCall", &fn, 12000, cudaEnableDefault, &found), cudaSuccess);
  EXPECT_EQ(fn, nullptr);
  EXPECT_EQ(found, cudaDriverEntryPointSymbolNotFound);
  EXPECT_EQ(cudaGetDriverEntryPointByVersion(nullptr, &fn, 12000, cudaEnableDefault, &found), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFreeAsync(pooled, nullptr), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_EQ(cudaFree(plain), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(host), cudaSuccess);
}

}  // namespace fakecuda_test
