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
// launch per exchange, a rank's next launch would wait in its stream's hardware
// queue for its previous one, and a peer's launch queued behind it (streams
// share queues) could not start: ranks sharing a GPU would wait for each other
// until COLLIE_TIMEOUT (docs/cuda-executor.md, "One launch per call"). An executor that stages
// buffers (executor/staged_executor.h) copies whatever a program's ranges span,
// so it still gets one exchange per run.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/program.h"
#include "base/log.h"
#include "core/api_checks.h"
#include "core/group.h"
#include "executor/executor.h"

using collie::Status;
using collie::api::checkBuffer;
using collie::api::checkComm;
using collie::api::checkType;
using collie::api::guarded;

namespace collie {
namespace group {

namespace {

// One exchange step of the schedule: bytes to `to` from `src`, bytes from `from` into `dst` (null: none).
struct Exchange {
  int to, from;
  const uint8_t* src;
  uint64_t sendBytes;
  const uint8_t* dst;
  uint64_t recvBytes;
};

// The lowest of the pointers, compared as addresses: the buffers are separate objects, which `<` on pointers
// does not order. Null ones are not moved from or into, and are left out.
const uint8_t* lowest(const uint8_t* a, const uint8_t* b) {
  if (a == nullptr) return b;
  if (b == nullptr) return a;
  return reinterpret_cast<uintptr_t>(a) < reinterpret_cast<uintptr_t>(b) ? a : b;
}

uint64_t offsetFrom(const uint8_t* base, const uint8_t* p) {
  return p != nullptr ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base)) : 0;
}

}  // namespace

Status runP2p(collieComm_t comm, const std::vector<P2pOp>& ops) {
  const int n = comm->nranks, r = comm->rank;
  ScopedLogRank logRank(r);
  Executor& executor = *comm->executor;
  const bool oneProgram = executor.addressesBuffersInPlace();
  ExecArgs exec;
  exec.type = collieUint8;
  exec.seq = comm->seq++;
  // A group's ops share one stream in practice; the first one's orders the exchange.
  exec.stream = ops.empty() ? nullptr : ops.front().stream;
  // Before anything of the group is queued (a copy to self, the launch): its kernel waits in its stream for our
  // work before it, and must not hold a peer's part of that back in a hardware queue; then, on every way out,
  // what the group held for each peer, whose later work waits for it likewise (executor/colocated_streams.h).
  struct CountQueued {
    Executor& executor;
    const std::vector<P2pOp>& ops;
    int n, rank;
    ~CountQueued() {
      std::vector<uint64_t> sends(static_cast<size_t>(n)), recvs(static_cast<size_t>(n));
      for (const P2pOp& op : ops) ++(op.send ? sends : recvs)[static_cast<size_t>(op.peer)];
      for (int p = 0; p < n; ++p)
        if (p != rank && (sends[static_cast<size_t>(p)] || recvs[static_cast<size_t>(p)]))
          executor.p2pQueued(p, sends[static_cast<size_t>(p)], recvs[static_cast<size_t>(p)]);
    }
  } countQueued{executor, ops, n, r};
  if (!ops.empty()) {
    Status st = executor.queueAfterPeers(exec.stream);
    if (!st.ok()) {
      comm->breakWith(st);
      return st;
    }
  }
  std::vector<Exchange> exchanges;
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
      exchanges.push_back({to, from, sendBytes ? static_cast<const uint8_t*>(s->buffer) : nullptr, sendBytes,
                           recvBytes ? static_cast<const uint8_t*>(v->buffer) : nullptr, recvBytes});
    }
  }
  Program program;
  program.collective = Collective::kSendRecv;
  program.algorithm = "pairwise";
  program.nranks = n;
  program.rank = r;
  // Exchanges [first, last) as one program, their offsets (bytes, the type being uint8) counted from the
  // lowest pointers they move from and into.
  const auto run = [&](size_t first, size_t last) {
    const uint8_t *inBase = nullptr, *outBase = nullptr;
    for (size_t e = first; e < last; ++e) {
      inBase = lowest(inBase, exchanges[e].src);
      outBase = lowest(outBase, exchanges[e].dst);
    }
    exec.input = inBase;
    exec.output = const_cast<uint8_t*>(outBase);
    program.steps.clear();
    for (size_t e = first; e < last; ++e) {
      const Exchange& x = exchanges[e];
      program.steps.push_back(exchangeStep(StepOp::kSendRecv, x.to, x.from,
                                           Range{Buffer::kInput, offsetFrom(inBase, x.src)}, x.sendBytes,
                                           Range{Buffer::kOutput, offsetFrom(outBase, x.dst)}, x.recvBytes));
    }
    Status st = executor.runSplit(program, exec);
    if (!st.ok()) comm->breakWith(st);
    return st;
  };
  if (exchanges.empty()) return Status();
  if (oneProgram) return run(0, exchanges.size());
  for (size_t e = 0; e < exchanges.size(); ++e) COLLIE_RETURN_IF_ERROR(run(e, e + 1));
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
