#include "executor/staged_executor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "executor/host_executor.h"

namespace collie {

void touchedElements(const Program& program, uint64_t* input, uint64_t* output) {
  *input = *output = 0;
  const auto touch = [&](const Range& r, uint64_t n) {
    if (n == 0) return;
    if (r.buffer == Buffer::kInput) *input = std::max(*input, r.offset + n);
    if (r.buffer == Buffer::kOutput) *output = std::max(*output, r.offset + n);
  };
  for (const Step& s : program.steps) {
    // What executor/step_runner.h reads and writes for each op.
    const bool readsSrc = s.op != StepOp::kRecv && s.op != StepOp::kRecvCopySend;
    const bool usesDst = s.op != StepOp::kSend && s.op != StepOp::kRecvReduceSend;
    if (readsSrc) touch(s.src, s.count);
    if (usesDst) touch(s.dst, stepIsExchange(s.op) ? s.recvCount : s.count);
  }
}

StagedExecutor::StagedExecutor(std::unique_ptr<HostExecutor> host, std::unique_ptr<Mover> mover)
    : host_(std::move(host)), mover_(std::move(mover)) {}

StagedExecutor::~StagedExecutor() {
  if (staging_ != nullptr) {
    (void)mover_->drained();
    mover_->release(staging_);
  }
}

int StagedExecutor::channels() const { return host_->channels(); }
uint64_t StagedExecutor::roundElems(size_t typeSize) const { return host_->roundElems(typeSize); }
void StagedExecutor::setTimeout(double seconds) { host_->setTimeout(seconds); }

Status StagedExecutor::run(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  COLLIE_RETURN_IF_ERROR(refuseDirectSteps(work, "cuda"));
  COLLIE_RETURN_IF_ERROR(mover_->usable(args.stream));
  const size_t es = typeSize(args.type);
  uint64_t inElems = 0, outElems = 0;
  for (const ChannelWork& w : work) {
    uint64_t in = 0, out = 0;
    touchedElements(*w.program, &in, &out);
    if (in > 0) inElems = std::max(inElems, w.offset + in);
    if (out > 0) outElems = std::max(outElems, w.offset + out);
  }
  const uint8_t* in = static_cast<const uint8_t*>(args.input);
  uint8_t* out = static_cast<uint8_t*>(args.output);
  const size_t inBytes = in != nullptr ? inElems * es : 0, outBytes = out != nullptr ? outElems * es : 0;
  // Buffers that overlap (in place, or allgather's input inside its output)
  // are staged as one range: one copy each way instead of two. (Two copies
  // would be right too: the host then runs the call out of place.)
  const bool joint = inBytes > 0 && outBytes > 0 && in < out + outBytes && out < in + inBytes;
  const uint8_t* lo = joint ? std::min<const uint8_t*>(in, out) : nullptr;
  const size_t jointBytes =
      joint ? static_cast<size_t>(std::max<const uint8_t*>(in + inBytes, out + outBytes) - lo) : 0;
  const size_t inRoom = (inBytes + 63) & ~size_t{63};
  const size_t need = std::max<size_t>(64, joint ? jointBytes : inRoom + outBytes);

  // The previous call's copies back must be done before staging is reused.
  COLLIE_RETURN_IF_ERROR(mover_->drained());
  if (need > stagingBytes_) {
    if (staging_ != nullptr) mover_->release(staging_);
    staging_ = nullptr;
    stagingBytes_ = 0;
    size_t allocated = 0;
    COLLIE_RETURN_IF_ERROR(mover_->allocate(need, &staging_, &allocated));
    stagingBytes_ = allocated;
  }
  uint8_t* const base = static_cast<uint8_t*>(staging_);
  uint8_t* const hIn = joint ? base + (in - lo) : base;
  uint8_t* const hOut = joint ? base + (out - lo) : base + inRoom;
  // The output goes over too: a program need not write every element up to
  // the last it touches, and the copy back must not replace those with garbage.
  if (joint) {
    COLLIE_RETURN_IF_ERROR(mover_->toHost(base, lo, jointBytes, args.stream));
  } else {
    if (inBytes > 0) COLLIE_RETURN_IF_ERROR(mover_->toHost(hIn, in, inBytes, args.stream));
    if (outBytes > 0) COLLIE_RETURN_IF_ERROR(mover_->toHost(hOut, out, outBytes, args.stream));
  }
  COLLIE_RETURN_IF_ERROR(mover_->wait(args.stream));

  ExecArgs host = args;
  host.input = in != nullptr ? hIn : nullptr;
  host.output = out != nullptr ? hOut : nullptr;
  COLLIE_RETURN_IF_ERROR(host_->run(work, host));
  if (outBytes > 0) COLLIE_RETURN_IF_ERROR(mover_->toDevice(out, hOut, outBytes, args.stream));
  return Status();
}

namespace {

class HostMover final : public StagedExecutor::Mover {
 public:
  Status allocate(size_t bytes, void** out, size_t* allocated) override {
    *allocated = (bytes + 4095) & ~size_t{4095};
    *out = aligned_alloc(4096, *allocated);
    if (*out == nullptr) return Status::error(collieSystemError, "cannot allocate %zu bytes of staging", bytes);
    return Status();
  }
  void release(void* p) override { free(p); }
  Status toHost(void* dst, const void* src, size_t bytes, collieStream_t) override {
    memcpy(dst, src, bytes);
    return Status();
  }
  Status wait(collieStream_t) override { return Status(); }
  Status toDevice(void* dst, const void* src, size_t bytes, collieStream_t) override {
    memcpy(dst, src, bytes);
    return Status();
  }
  Status drained() override { return Status(); }
  Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t) override {
    if (dst != src) memmove(dst, src, bytes);
    return Status();
  }
};

}  // namespace

std::unique_ptr<StagedExecutor::Mover> hostMover() { return std::make_unique<HostMover>(); }

}  // namespace collie
