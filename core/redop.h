// Pre-multiplied-sum operators (collieRedOpCreatePreMulSum): each rank's input
// is multiplied by that rank's scalar, then summed. The operators live in
// their communicator's table (collieComm::redOps); a collective that names one
// copies what it needs at enqueue time (PreMulSum), so the operator may be
// destroyed before a group runs the call.
//
// The call runs as an ordinary sum over a scaled copy of the input (scaleBy
// of executor/reduce_ops.h, one rounding in the type): on the host backend a
// host copy made before the sum runs, on the CUDA backend a device copy made
// by a kernel on the call's stream (kernels/scale.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"
#include "collie.h"

namespace collie {

/// One operator: its type and scalar (the value for host-immediate, the
/// address for device residence, read when the call runs).
struct PreMulSum {
  bool live = false;
  collieDataType_t type = collieFloat32;
  collieScalarResidence_t residence = collieScalarHostImmediate;
  uint8_t value[8] = {0};         // host-immediate: the scalar, copied at create
  const void* address = nullptr;  // device residence: read at execution time
};

/// What a collective's operator needs beyond the built-in ones; `active` is
/// false for sum, prod, min, max and avg.
struct ScaleArgs {
  bool active = false;
  PreMulSum op;
};

/// Resolves `op` for a call of `type` on `comm`: a built-in operator gives an
/// inactive ScaleArgs; a run-time one must be live on comm and made for `type`.
Status captureRedOp(collieComm_t comm, collieRedOp_t op, collieDataType_t type, const char* call, ScaleArgs* out);

/// staging = input * scalar, element by element, for `count` elements of host
/// memory. Reads a device-resident scalar now (from device memory through the
/// CUDA runtime when it is device memory).
Status scaleInput(const ScaleArgs& scale, const void* input, size_t count, std::vector<uint8_t>* staging);

/// CUDA backend: where the kernel that scales takes the scalar from. A device-resident scalar the GPU can read
/// gives *deviceScalar (read when the kernel runs, so a graph replay sees the value of its time); a host-immediate
/// one, or one in plain host memory (read now), gives hostScalar's bytes and a null *deviceScalar.
Status resolveScalar(const ScaleArgs& scale, const void** deviceScalar, uint8_t hostScalar[8]);

/// CUDA backend, for executors that do not scale the input themselves (Executor::scalesInput; the staged path):
/// *staging = input * scalar for `count` elements of device
/// memory, in memory allocated and filled in order on `stream` (a
/// cudaStream_t); a device-resident scalar the GPU can read is read when the
/// kernel runs. The caller hands *staging back with releaseInputDevice on the
/// same stream after enqueueing the sum that reads it. count == 0: null. `pool`: the cudaMemPool_t to take it
/// from (Executor::devicePool), or null for the device's default pool.
Status scaleInputDevice(const ScaleArgs& scale, const void* input, size_t count, void* stream, void* pool,
                        void** staging);
Status releaseInputDevice(void* staging, void* stream);

}  // namespace collie
