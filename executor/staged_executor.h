// The staged path: a GPU communicator whose ranks span hosts runs its
// collectives on the host executor (shared memory to its own host, UCX to the
// others) over pinned host copies of the user's device buffers. Each call
// copies the ranges its program touches to the host, waits for them, runs
// the program on the host and copies the output back on the caller's stream.
// Correct for every collective and algorithm the host executor runs; not
// pipelined (a whole round crosses PCIe before and after the network), and it
// blocks the calling thread, so it cannot be captured into a CUDA graph. The
// copies go through a Mover, so the CPU suite runs this very code with memcpy
// (COLLIE_TEST_STAGE_HOST=1) and only the CUDA Mover needs a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "executor/executor.h"

namespace collie {

class HostExecutor;

class StagedExecutor final : public Executor {
 public:
  /// How bytes move between the user's (device) buffers and host staging.
  class Mover {
   public:
    virtual ~Mover() = default;
    /// Whether a call on `stream` can be staged at all (checked before anything
    /// is enqueued or waited for); a stream being captured cannot.
    virtual Status usable(collieStream_t) { return Status(); }
    /// Host memory for staging, at least `bytes` long (pinned on a GPU); *allocated: how long it is, so that a
    /// later call that fits takes no new one. Freed by release.
    virtual Status allocate(size_t bytes, void** out, size_t* allocated) = 0;
    virtual void release(void* p) = 0;
    /// Enqueues a copy from the user's memory to staging on `stream`.
    virtual Status toHost(void* dst, const void* src, size_t bytes, collieStream_t stream) = 0;
    /// Returns once everything enqueued on `stream` so far has finished.
    virtual Status wait(collieStream_t stream) = 0;
    /// Enqueues a copy from staging back to the user's memory on `stream`.
    virtual Status toDevice(void* dst, const void* src, size_t bytes, collieStream_t stream) = 0;
    /// Returns once the last toDevice has finished (staging may be reused).
    virtual Status drained() = 0;
    /// dst = src, both the user's memory, on `stream`.
    virtual Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t stream) = 0;
  };

  StagedExecutor(std::unique_ptr<HostExecutor> host, std::unique_ptr<Mover> mover);
  ~StagedExecutor() override;

  Status run(const std::vector<ChannelWork>& work, const ExecArgs& args) override;
  int channels() const override;
  uint64_t roundElems(size_t typeSize) const override;
  void setTimeout(double seconds) override;
  Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t stream) override {
    return mover_->localCopy(dst, src, bytes, stream);
  }
  Status synchronize() override { return mover_->drained(); }
  bool addressesBuffersInPlace() const override { return false; }

 private:
  std::unique_ptr<HostExecutor> host_;
  std::unique_ptr<Mover> mover_;
  void* staging_ = nullptr;
  size_t stagingBytes_ = 0;
};

/// Elements of the input and output buffers that `program`'s steps read or
/// write, from each buffer's start (0: untouched).
void touchedElements(const Program& program, uint64_t* input, uint64_t* output);

/// A Mover over host memory (memcpy): what COLLIE_TEST_STAGE_HOST=1 gives a host
/// communicator, to test the staged path on the CPU.
std::unique_ptr<StagedExecutor::Mover> hostMover();

/// A Mover over CUDA (cudaMemcpyAsync, pinned staging) for `device`.
std::unique_ptr<StagedExecutor::Mover> cudaMover(int device);

}  // namespace collie
