// The launcher headers (launch.h, scale.h, reduce_check.h, direct_kernels.h, ceiling_kernels.h) in a build without
// device code (COLLIE_DEVICE_CODE=OFF): the sanitizer builds of CI, which run
// on machines without a GPU and never launch a kernel. nvcc's share of such a
// build is about three minutes of CPU for one architecture, spent on code
// nothing runs. The kernels' own code is still built for the CPU
// (kernels/emulator.cc), so COLLIE_TEST_EMULATE_KERNELS tests it under the
// sanitizers.
//
// On a machine with a GPU such a build cannot run the CUDA backend: a CUDA
// communicator's init fails at loading the kernels with "no kernel image is
// available", the error CUDA gives for a build without code for the device.
#include <cuda_runtime_api.h>

#include "kernels/ceiling_kernels.h"
#include "kernels/direct_kernels.h"
#include "kernels/exchange_floor.h"
#include "kernels/launch.h"
#include "kernels/reduce_check.h"
#include "kernels/scale.h"
#include "kernels/store.h"

namespace collie {

namespace {
constexpr int kNoImage = static_cast<int>(cudaErrorNoKernelImageForDevice);
}  // namespace

int preloadProgramKernels() { return kNoImage; }
int launchProgram(const KernelArgs&, collieDataType_t, ReduceOp, void*) { return kNoImage; }
int launchScale(collieDataType_t, void*, const void*, size_t, const void*, const void*, void*) { return kNoImage; }
int preloadStoreKernel() { return kNoImage; }
int launchStore(void*, const void*, size_t, void*) { return kNoImage; }
int launchReduceCheck(collieDataType_t, collieRedOp_t, const void*, const void*, void*, size_t, int, void*) {
  return kNoImage;
}

int preloadExchangeFloor() { return kNoImage; }
int launchExchangeFloor(const FloorArgs&, int, void*) { return kNoImage; }

int preloadDirectKernels(int) { return kNoImage; }
int directResidentBlocks(DirectKind, collieDataType_t, int, int, int, int* blocks) {
  *blocks = 0;
  return kNoImage;
}
int launchDirect(const DirectArgs&, DirectKind, collieDataType_t, ReduceOp, int, int, void*) { return kNoImage; }
int launchDirectGroup(const DirectGroupArgs&, collieDataType_t, ReduceOp, int, void*) { return kNoImage; }

int ceilingBlocks(int, int, int, int* blocks) {
  *blocks = 0;
  return kNoImage;
}
int launchCeiling(const CeilingArgs&, int, int, void*) { return kNoImage; }

}  // namespace collie
