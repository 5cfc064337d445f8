// The process's pinned host memory (base/device_memory.h): status blocks and
// regions that are never given back to CUDA, since cudaFreeHost may wait for
// the device. What is given back must be what the next request of a size it
// fits gets, zeroed, so that a process making and destroying communicators
// holds no more than it ever had in use at once.
#include "base/device_memory.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "gpu/gpu_skip.h"

namespace {

// Other tests of the process may have left regions free (staging in powers of two, the proxy's), so this one
// asserts only what holds whatever is free: the smallest free region that fits is taken, so the same request
// right after gets the same region back; a region is never more than twice the request.
TEST(PinnedRegions, AGivenBackRegionIsTakenAgainZeroedBySizesItFits) {
  SKIP_WITHOUT_GPU();
  void* host = nullptr;
  void* device = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(40000, &host, &device).ok());
  ASSERT_NE(host, nullptr);
  ASSERT_NE(device, nullptr);
  const size_t held = collie::pinnedRegionBytesHeld();
  memset(host, 0xab, 40000);
  collie::givePinnedRegionBack(host);

  // The same request: the same region, zeroed.
  void* again = nullptr;
  void* againDevice = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(40000, &again, &againDevice).ok());
  EXPECT_EQ(again, host);
  EXPECT_EQ(againDevice, device);
  const auto* bytes = static_cast<const uint8_t*>(again);
  for (size_t i = 0; i < 40000; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  EXPECT_EQ(collie::pinnedRegionBytesHeld(), held);

  // While it is taken, a second request gets a region of its own.
  void* second = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(40000, &second, &againDevice).ok());
  EXPECT_NE(second, host);
  collie::givePinnedRegionBack(second);
  collie::givePinnedRegionBack(again);

  // More than twice 40000 (the most the region can hold), or under half of it: never this region.
  void* larger = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(80001, &larger, &againDevice).ok());
  EXPECT_NE(larger, host);
  void* small = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(1000, &small, &againDevice).ok());
  EXPECT_NE(small, host);
  collie::givePinnedRegionBack(larger);
  collie::givePinnedRegionBack(small);

  // Taken and given back over and over, the process holds no more than after the first time.
  void* first = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(30000, &first, &againDevice).ok());
  collie::givePinnedRegionBack(first);
  const size_t before = collie::pinnedRegionBytesHeld();
  for (int i = 0; i < 100; ++i) {
    void* p = nullptr;
    ASSERT_TRUE(collie::takePinnedRegion(30000, &p, &againDevice).ok());
    collie::givePinnedRegionBack(p);
  }
  EXPECT_EQ(collie::pinnedRegionBytesHeld(), before);
}

TEST(PinnedRegions, KernelsReachARegionByItsDeviceAddress) {
  SKIP_WITHOUT_GPU();
  void* host = nullptr;
  void* device = nullptr;
  ASSERT_TRUE(collie::takePinnedRegion(4096, &host, &device).ok());
  // A copy by the device address lands where the host reads.
  const uint32_t word = 0x5eed;
  ASSERT_EQ(cudaMemcpy(device, &word, sizeof(word), cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(*static_cast<const uint32_t*>(host), word);
  collie::givePinnedRegionBack(host);
}

TEST(PinnedBlocks, AGivenBackBlockIsTheNextTakenZeroed) {
  SKIP_WITHOUT_GPU();
  void* host = nullptr;
  void* device = nullptr;
  ASSERT_TRUE(collie::takePinnedBlock(&host, &device).ok());
  memset(host, 0xcd, collie::kPinnedBlockBytes);
  collie::givePinnedBlockBack(host);
  void* again = nullptr;
  void* againDevice = nullptr;
  ASSERT_TRUE(collie::takePinnedBlock(&again, &againDevice).ok());
  EXPECT_EQ(again, host);
  EXPECT_EQ(againDevice, device);
  const auto* bytes = static_cast<const uint8_t*>(again);
  for (size_t i = 0; i < collie::kPinnedBlockBytes; ++i) ASSERT_EQ(bytes[i], 0) << "byte " << i;
  collie::givePinnedBlockBack(again);
}

}  // namespace
