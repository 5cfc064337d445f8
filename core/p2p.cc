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
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

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
  ExecArgs exec;
  exec.type = collieUint8;
  exec.seq = comm->seq++;
  Program program;
  program.collective = Collective::kSendRecv;
  program.algorithm = "pairwise";
  program.nranks = n;
  program.rank = r;
  program.steps.resize(1);
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
          Status st = comm->executor->localCopy(v->buffer, s->buffer, s->bytes, v->stream);
          if (!st.ok()) return st;
        }
        continue;
      }
      program.steps[0] = exchangeStep(StepOp::kSendRecv, to, from, Range{Buffer::kInput, 0}, s ? s->bytes : 0,
                                      Range{Buffer::kOutput, 0}, v ? v->bytes : 0);
      exec.input = s ? s->buffer : nullptr;
      exec.output = v ? v->buffer : nullptr;
      // A group's ops share one stream in practice; the first one's orders the exchange.
      exec.stream = s ? s->stream : v->stream;
      Status st = comm->executor->runSplit(program, exec);
      if (!st.ok()) {
        comm->asyncError.store(st.code());
        return st;
      }
    }
  }
  return Status();
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
