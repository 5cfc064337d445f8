// Point to point: collieSend / collieRecv and the schedule that runs a group's
// batch of them.
//
// Schedule: for k = 0 .. n-1, rank r exchanges with (r+k, r-k): the i-th send
// it queued for r+k goes together with the i-th receive it queued from r-k,
// as one exchange step (both directions progress at once). Every rank walks
// the same k order and a peer's i-th receive from us is our i-th send to it,
// so the batch cannot deadlock whatever the sizes, and messages between a
// pair arrive in the order they were issued, as NCCL promises. k = 0 is send
// to self: a local copy, checked against its receive.
//
// The whole batch is one program, so one kernel launch per group on a GPU: its
// steps address every buffer from the lowest send and receive pointers. With a
// launch per exchange, a rank's next launch waited in its stream's hardware
// queue for its previous one, and a peer's launch queued behind it (streams
// share queues) could not start: ranks sharing a GPU timed out (H200,
// 2026-11-26; docs/design.md, "One launch per call"). An executor that stages
// buffers (executor/staged_executor.h) copies whatever a program's ranges span,
// so it still gets one exchange per run.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/program.h"
#include "core/api_checks.h"
#include "core/group.h"
#include "core/log.h"
#include "executor/executor.h"

using collie::Status;
using collie::api::checkBuffer;
using collie::api::checkComm;
using collie::api::checkType;
using collie::api::guarded;

namespace collie {
namespace group {

Status runP2p(collieComm_t comm, const std::vector<P2pOp>& ops) {
  const int n = comm->nranks, r = comm->rank;
  ScopedLogRank logRank(r);
  Executor& executor = *comm->executor;
  const bool oneProgram = executor.addressesBuffersInPlace();
  // The bases the steps' offsets count from (bytes, the type being uint8): the lowest pointers moved.
  const uint8_t *inBase = nullptr, *outBase = nullptr;
  for (const P2pOp& op : ops) {
    if (op.bytes == 0 || op.peer == r || !oneProgram) continue;
    const uint8_t*& base = op.send ? inBase : outBase;
    const uint8_t* p = static_cast<const uint8_t*>(op.buffer);
    // Compared as addresses: the buffers are separate objects, which `<` on pointers does not order.
    if (base == nullptr || reinterpret_cast<uintptr_t>(p) < reinterpret_cast<uintptr_t>(base)) base = p;
  }
  ExecArgs exec;
  exec.type = collieUint8;
  exec.seq = comm->seq++;
  // A group's ops share one stream in practice; the first one's orders the exchange.
  exec.stream = ops.empty() ? nullptr : ops.front().stream;
  exec.input = inBase;
  exec.output = const_cast<uint8_t*>(outBase);
  Program program;
  program.collective = Collective::kSendRecv;
  program.algorithm = "pairwise";
  program.nranks = n;
  program.rank = r;
  const auto run = [&]() {
    Status st = executor.runSplit(program, exec);
    if (!st.ok()) comm->asyncError.store(st.code());
    program.steps.clear();
    return st;
  };
  for (int k = 0; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    std::vector<const P2pOp*> sends, recvs;
    for (const P2pOp& op : ops) {
      if (op.send && op.peer == to) sends.push_back(&op);
      if (!op.send && op.peer == from) recvs.push_back(&op);
    }
    const size_t steps = std::max(sends.size(), recvs.size());
    for (size_t i = 0; i < steps; ++i) {
      const P2pOp* s = i < sends.size() ? sends[i] : nullptr;
      const P2pOp* v = i < recvs.size() ? recvs[i] : nullptr;
      if (k == 0) {
        if (s == nullptr || v == nullptr || s->bytes != v->bytes)
          return Status::error(collieInvalidUsage,
                               "rank %d: send to self #%zu of %llu bytes has no matching receive from self (%llu "
                               "bytes); a group must pair them",
                               r, i, static_cast<unsigned long long>(s ? s->bytes : 0),
                               static_cast<unsigned long long>(v ? v->bytes : 0));
        if (s->bytes) {
          Status st = executor.localCopy(v->buffer, s->buffer, s->bytes, v->stream);
          if (!st.ok()) return st;
        }
        continue;
      }
      const uint64_t sendBytes = s ? s->bytes : 0, recvBytes = v ? v->bytes : 0;
      if (oneProgram && sendBytes == 0 && recvBytes == 0) continue;
      const uint8_t* src = sendBytes ? static_cast<const uint8_t*>(s->buffer) : nullptr;
      const uint8_t* dst = recvBytes ? static_cast<const uint8_t*>(v->buffer) : nullptr;
      if (!oneProgram) {
        exec.input = src;
        exec.output = const_cast<uint8_t*>(dst);
        inBase = src;
        outBase = dst;
      }
      const auto offset = [](const uint8_t* p, const uint8_t* base) {
        return p ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base)) : 0;
      };
      program.steps.push_back(exchangeStep(StepOp::kSendRecv, to, from, Range{Buffer::kInput, offset(src, inBase)},
                                           sendBytes, Range{Buffer::kOutput, offset(dst, outBase)}, recvBytes));
      if (!oneProgram) COLLIE_RETURN_IF_ERROR(run());
    }
  }
  return program.steps.empty() ? Status() : run();
}

}  // namespace group
}  // namespace collie

namespace {

Status queueP2p(bool send, void* buf, size_t count, collieDataType_t type, int peer, collieComm_t comm,
                collieStream_t stream, const char* name) {
  COLLIE_RETURN_IF_ERROR(checkComm(comm, name));
  COLLIE_RETURN_IF_ERROR(checkType(type, name));
  COLLIE_RETURN_IF_ERROR(checkBuffer(buf, count, type, name, send ? "sendbuff" : "recvbuff"));
  if (peer < 0 || peer >= comm->nranks)
    return Status::error(collieInvalidArgument, "%s: peer %d is not a rank of this %d-rank communicator", name, peer,
                         comm->nranks);
  COLLIE_RETURN_IF_ERROR(collie::api::checkPlacement(comm, buf, name, send ? "sendbuff" : "recvbuff"));
  COLLIE_RETURN_IF_ERROR(collie::api::checkStream(comm, stream, name));
  const collie::group::P2pOp op{send, buf, count * collie::typeSize(type), peer, stream};
  if (collie::group::active()) {
    collie::group::enqueueP2p(comm, op);
    return Status();
  }
  return collie::group::runP2p(comm, {op}).withContext(name);
}

}  // namespace

extern "C" {

collieResult_t collieSend(const void* sendbuff, size_t count, collieDataType_t datatype, int peer, collieComm_t comm,
                          collieStream_t stream) {
  return guarded(comm, [&] {
    return queueP2p(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream, "collieSend");
  });
}

collieResult_t collieRecv(void* recvbuff, size_t count, collieDataType_t datatype, int peer, collieComm_t comm,
                          collieStream_t stream) {
  return guarded(comm, [&] { return queueP2p(false, recvbuff, count, datatype, peer, comm, stream, "collieRecv"); });
}

collieResult_t collieGroupStart(void) {
  return guarded(nullptr, [] { return collie::group::start(); });
}

collieResult_t collieGroupEnd(void) {
  return guarded(nullptr, [] { return collie::group::end(); });
}

}  // extern "C"
