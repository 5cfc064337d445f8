// The LL protocol's program kernels (see kernels/device_prims_ll.cuh).
#include "kernels/program_kernel.cuh"

namespace collie {

int preloadLL() { return preloadProtocol<true>(); }
int launchLL(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream) {
  return launchProtocol<true>(args, type, op, stream);
}

}  // namespace collie
