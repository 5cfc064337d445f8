// Pre-multiplied-sum operators: the C API (create, destroy) and what a
// collective needs of one (captureRedOp, scaleInput). See core/redop.h.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <cuda_runtime_api.h>

#include <cstring>
#include <mutex>

#include "base/cuda_check.h"
#include "core/api_checks.h"
#include "core/comm.h"
#include "core/redop.h"
#include "executor/reduce_ops.h"
#include "kernels/scale.h"

using collie::Status;
using collie::api::checkComm;
using collie::api::checkType;
using collie::api::guarded;

namespace collie {

namespace {

// Reads a device-residence scalar of `bytes` at `address`: through the CUDA
// runtime when it is device memory (a program written for NCCL passes one),
// directly otherwise (host, managed or mapped memory).
Status readScalar(const void* address, size_t bytes, uint8_t* out) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, address) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver, or memory the runtime never saw: host memory
    attr.type = cudaMemoryTypeUnregistered;
  }
  if (attr.type == cudaMemoryTypeDevice) {
    const cudaError_t e = cudaMemcpy(out, address, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      return Status::error(collieUnhandledCudaError, "reading the pre-multiplied sum's scalar at %p: %s", address,
                           cudaGetErrorString(e));
    return Status();
  }
  memcpy(out, address, bytes);
  return Status();
}

}  // namespace

Status captureRedOp(collieComm_t comm, collieRedOp_t op, collieDataType_t type, const char* call, ScaleArgs* out) {
  *out = ScaleArgs();
  if (op < collieNumOps) return Status();  // built-in (negative values were refused by checkOp)
  std::lock_guard<std::mutex> lock(comm->resourceMu);
  const size_t slot = static_cast<size_t>(op) - collieNumOps;
  if (slot >= comm->redOps.size() || !comm->redOps[slot].live)
    return Status::error(collieInvalidArgument,
                         "%s: op %d is not an operator of this communicator (made by collieRedOpCreatePreMulSum on it "
                         "and not destroyed)",
                         call, static_cast<int>(op));
  const PreMulSum& p = comm->redOps[slot];
  if (p.type != type)
    return Status::error(collieInvalidArgument, "%s: op %d was made for %s, but the call's datatype is %s", call,
                         static_cast<int>(op), typeName(p.type), typeName(type));
  out->active = true;
  out->op = p;
  return Status();
}

Status scaleInput(const ScaleArgs& scale, const void* input, size_t count, std::vector<uint8_t>* staging) {
  const size_t es = typeSize(scale.op.type);
  uint8_t scalar[8];
  if (scale.op.residence == collieScalarDevice) {
    COLLIE_RETURN_IF_ERROR(readScalar(scale.op.address, es, scalar));
  } else {
    memcpy(scalar, scale.op.value, es);
  }
  staging->resize(count * es);
  visitType(scale.op.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T s;
    memcpy(&s, scalar, sizeof(T));
    const T* in = static_cast<const T*>(input);
    T* outp = reinterpret_cast<T*>(staging->data());
    for (size_t i = 0; i < count; ++i) outp[i] = scaleBy(in[i], s);
  });
  return Status();
}

Status resolveScalar(const ScaleArgs& scale, const void** deviceScalar, uint8_t hostScalar[8]) {
  *deviceScalar = nullptr;
  const size_t es = typeSize(scale.op.type);
  if (scale.op.residence != collieScalarDevice) {
    memcpy(hostScalar, scale.op.value, es);
    return Status();
  }
  // In memory the GPU can read, the kernel reads it when it runs; in plain host memory, which it cannot, now.
  // Never through cudaMemcpy: this runs in the enqueue, while peers' kernels may already wait for this rank's,
  // and a synchronous copy waits for them in turn. The query below may leave devicePointer null for device memory
  // (in a group's thread of the drop-in NCCL, for one), so device and managed memory count by their type: they
  // are readable at their own address (unified addressing, on every 64-bit platform CUDA supports).
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, scale.op.address) != cudaSuccess) {
    (void)cudaGetLastError();  // memory the runtime never saw: plain host memory
    attr.type = cudaMemoryTypeUnregistered;
    attr.devicePointer = nullptr;
  }
  const bool gpuMemory = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  if (attr.devicePointer != nullptr || gpuMemory) {
    *deviceScalar = attr.devicePointer != nullptr ? attr.devicePointer : scale.op.address;
    return Status();
  }
  memcpy(hostScalar, scale.op.address, es);
  return Status();
}

Status scaleInputDevice(const ScaleArgs& scale, const void* input, size_t count, void* stream, void* pool,
                        void** staging) {
  *staging = nullptr;
  if (count == 0) return Status();
  const size_t es = typeSize(scale.op.type);
  uint8_t scalar[8];
  const void* deviceScalar = nullptr;
  COLLIE_RETURN_IF_ERROR(resolveScalar(scale, &deviceScalar, scalar));
  // Stream-ordered: the staging lives from here to the sum that reads it, and
  // both allocation and free can be captured into a CUDA graph. From the
  // executor's own pool, which never makes an allocation wait for another
  // stream: from the default pool, a block another rank of this process freed
  // after its kernel could come with a wait for that kernel, which waits for ours.
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const size_t bytes = count * es;
  COLLIE_RETURN_IF_ERROR(cudaStatus(pool != nullptr
                                        ? cudaMallocFromPoolAsync(staging, bytes, static_cast<cudaMemPool_t>(pool), s)
                                        : cudaMallocAsync(staging, bytes, s),
                                    "cudaMallocAsync of the scaled input"));
  const cudaError_t e = static_cast<cudaError_t>(
      launchScale(scale.op.type, *staging, input, count, deviceScalar ? nullptr : scalar, deviceScalar, stream));
  if (e != cudaSuccess) {
    (void)cudaFreeAsync(*staging, s);
    *staging = nullptr;
    return cudaStatus(e, "the scaling kernel's launch");
  }
  return Status();
}

Status releaseInputDevice(void* staging, void* stream) {
  if (staging == nullptr) return Status();
  return cudaStatus(cudaFreeAsync(staging, static_cast<cudaStream_t>(stream)), "cudaFreeAsync of the scaled input");
}

}  // namespace collie

extern "C" {

collieResult_t collieRedOpCreatePreMulSum(collieRedOp_t* op, void* scalar, collieDataType_t datatype,
                                          collieScalarResidence_t residence, collieComm_t comm) {
  return guarded(comm, [&] {
    const char* call = "collieRedOpCreatePreMulSum";
    if (op == nullptr) return Status::error(collieInvalidArgument, "%s: op is NULL", call);
    COLLIE_RETURN_IF_ERROR(checkComm(comm, call));
    COLLIE_RETURN_IF_ERROR(checkType(datatype, call));
    if (scalar == nullptr) return Status::error(collieInvalidArgument, "%s: scalar is NULL", call);
    if (residence != collieScalarDevice && residence != collieScalarHostImmediate)
      return Status::error(collieInvalidArgument,
                           "%s: residence %d is neither collieScalarDevice nor collieScalarHostImmediate", call,
                           static_cast<int>(residence));
    collie::PreMulSum p;
    p.live = true;
    p.type = datatype;
    p.residence = residence;
    if (residence == collieScalarHostImmediate) {
      memcpy(p.value, scalar, collie::typeSize(datatype));
    } else {
      p.address = scalar;
    }
    std::lock_guard<std::mutex> lock(comm->resourceMu);
    // Reuse the lowest free slot, so a loop that creates and destroys one op per step stays small.
    size_t slot = 0;
    while (slot < comm->redOps.size() && comm->redOps[slot].live) ++slot;
    if (slot >= static_cast<size_t>(collieMaxRedOp - collieNumOps))
      return Status::error(collieInvalidUsage, "%s: too many live operators on this communicator", call);
    if (slot == comm->redOps.size()) comm->redOps.emplace_back();
    comm->redOps[slot] = p;
    *op = static_cast<collieRedOp_t>(collieNumOps + static_cast<int>(slot));
    return Status();
  });
}

collieResult_t collieRedOpDestroy(collieRedOp_t op, collieComm_t comm) {
  return guarded(comm, [&] {
    const char* call = "collieRedOpDestroy";
    if (comm == nullptr || !collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "%s: comm is not a live communicator", call);
    if (op < collieNumOps)
      return Status::error(collieInvalidArgument,
                           "%s: op %d is not an operator made by collieRedOpCreatePreMulSum (built-in operators "
                           "cannot be destroyed)",
                           call, static_cast<int>(op));
    std::lock_guard<std::mutex> lock(comm->resourceMu);
    const size_t slot = static_cast<size_t>(op) - collieNumOps;
    if (slot >= comm->redOps.size() || !comm->redOps[slot].live)
      return Status::error(collieInvalidArgument, "%s: op %d is not a live operator of this communicator", call,
                           static_cast<int>(op));
    // Calls already queued carry their own copy (ScaleArgs): nothing waits for them.
    comm->redOps[slot].live = false;
    return Status();
  });
}

}  // extern "C"
