// Host-only launcher for the store kernel (kernels/store.cu): bytes written
// into device memory by a kernel that carries them in its parameters. The CUDA
// executor uploads long programs this way (executor/cuda_executor.cc,
// program()): a copy from host memory needs the bytes in pinned memory for as
// long as the copy is queued, and allocating pinned memory while a peer's
// kernel waits for this rank may wait for that kernel (docs/cuda-executor.md,
// "No allocation in an enqueue"). Parameters are copied at launch, so the
// caller's bytes may go at once, and a captured launch becomes a kernel node
// that stores them again at every replay.
#pragma once

#include <cstddef>

namespace collie {

/// Bytes one launch carries; longer stores take several launches.
constexpr size_t kStoreChunkBytes = 4080;

/// Loads the store kernel on the current device (see preloadProgramKernels in
/// launch.h for why). Returns a cudaError_t as an int.
int preloadStoreKernel();

/// Stores `bytes` bytes from host memory `src` at device address `dst`,
/// asynchronously on `stream` (a cudaStream_t), in launches of at most
/// kStoreChunkBytes. Returns the first failing launch's cudaError_t as an int.
int launchStore(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace collie
