// The Simple protocol's program kernels, and the launcher that picks a protocol.
#include "kernels/program_kernel.cuh"
#include "kernels/scale.h"

namespace collie {

int preloadSimple() { return preloadProtocol<false>(); }
int launchSimple(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream) {
  return launchProtocol<false>(args, type, op, stream);
}

int preloadProgramKernels() {
  // Lazy module loading (CUDA's default) loads a kernel at its first launch,
  // and loading can wait for the running kernels of the context: a rank whose
  // first launch of some (type, op) comes while a peer's kernel spins waiting
  // for it would deadlock. Querying every instantiation loads them all now,
  // the scaling kernel's too (a pre-multiplied sum's first call may come
  // while another rank's program kernel waits).
  int rc = preloadSimple();
  if (rc == 0) rc = preloadLL();
  return rc != 0 ? rc : preloadScaleKernels();
}

int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream) {
  return args.lowLatency ? launchLL(args, type, op, stream) : launchSimple(args, type, op, stream);
}

}  // namespace collie
