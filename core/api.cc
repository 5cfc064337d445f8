// The C API: argument checks with a sentence for every rejection, then a hand-off
// to the communicator's executor. Exceptions never leave this file.
//
// Public symbols get default visibility from the pragma around collie.h (the
// library is built with hidden visibility), so only the C API is exported.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "algorithms/registry.h"
#include "core/comm.h"
#include "core/env.h"
#include "core/errors.h"
#include "core/log.h"
#include "executor/host_executor.h"
#include "executor/reduce_ops.h"
#include "transport/bootstrap/bootstrap.h"

using collie::Status;

namespace {

// Runs body() and turns a Status, or an escaping exception, into a result code.
template <typename Body>
collieResult_t guarded(collieComm_t comm, Body body) {
  try {
    return collie::report(body(), comm);
  } catch (const std::bad_alloc&) {
    return collie::report(Status::error(collieSystemError, "out of host memory"), comm);
  } catch (const std::exception& e) {
    return collie::report(Status::error(collieInternalError, "internal error: %s", e.what()), comm);
  }
}

Status checkComm(collieComm_t comm, const char* call) {
  if (comm == nullptr) return Status::error(collieInvalidArgument, "%s: comm is NULL", call);
  if (!collie::commIsLive(comm))
    return Status::error(collieInvalidArgument, "%s: comm %p is not a live communicator (destroyed or never created)",
                         call, static_cast<void*>(comm));
  if (comm->aborted.load()) return Status::error(collieInvalidUsage, "%s: comm was aborted", call);
  if (comm->finalized)
    return Status::error(collieInvalidUsage, "%s: comm was finalized; only collieCommDestroy may follow", call);
  const int async = comm->asyncError.load();
  if (async != collieSuccess)
    return Status::error(static_cast<collieResult_t>(async),
                         "%s: comm is broken by an earlier failure (%s); destroy it and create a new one", call,
                         collieGetErrorString(static_cast<collieResult_t>(async)));
  return Status();
}

Status checkType(collieDataType_t type, const char* call) {
  if (collie::typeSize(type) == 0)
    return Status::error(collieInvalidArgument, "%s: datatype %d is not a collieDataType_t (0..%d)", call,
                         static_cast<int>(type), collieNumTypes - 1);
  return Status();
}

Status checkOp(collieRedOp_t op, const char* call) {
  if (op >= collieNumOps && op != collieMaxRedOp)
    return collie::notImplemented("pre-multiplied-sum operators", "collieRedOpCreatePreMulSum lands later")
        .withContext(call);
  collie::ReduceOp unused;
  if (!collie::toReduceOp(op, &unused))
    return Status::error(collieInvalidArgument, "%s: op %d is not a collieRedOp_t", call, static_cast<int>(op));
  return Status();
}

Status checkBuffer(const void* buf, size_t count, collieDataType_t type, const char* call, const char* name) {
  if (count > SIZE_MAX / collie::typeSize(type))
    return Status::error(collieInvalidArgument, "%s: count %zu of %s overflows size_t bytes", call, count,
                         collie::typeName(type));
  if (buf == nullptr && count > 0)
    return Status::error(collieInvalidArgument, "%s: %s is NULL with count %zu", call, name, count);
  return Status();
}

// A read-only query: works on any live communicator, even an aborted-in-flight or broken one,
// because programs ask for the async error and rank precisely after a failure.
template <typename T, typename Get>
collieResult_t query(collieComm_t comm, T* out, const char* call, const char* outName, Get get) {
  return guarded(comm, [&] {
    if (out == nullptr) return Status::error(collieInvalidArgument, "%s: %s is NULL", call, outName);
    if (comm == nullptr || !collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "%s: comm is not a live communicator", call);
    *out = get(comm);
    return Status();
  });
}

Status notYet(const char* call) { return collie::notImplemented(call, "see README.md for what works today"); }

// The program of `collective` for `count` elements, built once and kept: a
// call repeated with the same size (benchmarks, training loops) builds nothing.
const collie::Program& programFor(collieComm_t comm, collie::Collective collective, uint64_t count) {
  const std::pair<int, uint64_t> key(static_cast<int>(collective), count);
  auto it = comm->programs.find(key);
  if (it != comm->programs.end()) return it->second;
  if (comm->programs.size() >= 64) comm->programs.clear();  // bounded: sizes seen in one sweep
  const collie::AlgorithmInfo* algo = collie::defaultAlgorithm(collective);
  collie::ProgramArgs args;
  args.collective = collective;
  args.nranks = comm->nranks;
  args.rank = comm->rank;
  args.count = count;
  return comm->programs.emplace(key, algo->build(args)).first->second;
}

Status allReduce(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t type, collieRedOp_t op,
                 collieComm_t comm) {
  const char* call = "collieAllReduce";
  COLLIE_RETURN_IF_ERROR(checkComm(comm, call));
  COLLIE_RETURN_IF_ERROR(checkType(type, call));
  COLLIE_RETURN_IF_ERROR(checkOp(op, call));
  COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, count, type, call, "sendbuff"));
  COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, count, type, call, "recvbuff"));
  collie::ScopedLogRank logRank(comm->rank);

  collie::ExecArgs exec;
  exec.type = type;
  collie::toReduceOp(op, &exec.op);
  exec.divisor = op == collieAvg ? comm->nranks : 0;
  exec.seq = comm->seq++;
  COLLIE_TRACE("allreduce #%llu count %zu %s %s", static_cast<unsigned long long>(exec.seq), count,
               collie::typeName(type), collie::opName(op));

  // The buffer is reduced in rounds of nranks slots: each step of a round moves
  // at most one slice, so a ring step-0 send never needs more slots than the
  // receiver has free before it starts consuming (see docs/design.md).
  const size_t es = collie::typeSize(type);
  const uint64_t roundCount = static_cast<uint64_t>(comm->nranks) * (comm->executor->layout().slotBytes / es);
  for (uint64_t base = 0; base == 0 || base < count; base += roundCount) {
    const uint64_t n = std::min<uint64_t>(roundCount, count - base);
    exec.input = static_cast<const char*>(sendbuff) + base * es;
    exec.output = static_cast<char*>(recvbuff) + base * es;
    Status st = comm->executor->run(programFor(comm, collie::Collective::kAllReduce, n), exec);
    if (!st.ok()) {
      comm->asyncError.store(st.code());
      return st.withContext(call);
    }
    if (count == 0) break;
  }
  return Status();
}

}  // namespace

extern "C" {

collieResult_t collieGetVersion(int* version) {
  return guarded(nullptr, [&] {
    if (version == nullptr) return Status::error(collieInvalidArgument, "collieGetVersion: version is NULL");
    *version = COLLIE_VERSION_CODE;
    return Status();
  });
}

const char* collieGetErrorString(collieResult_t result) {
  switch (result) {
    case collieSuccess:
      return "no error";
    case collieUnhandledCudaError:
      return "unhandled cuda error (run with COLLIE_DEBUG=INFO for details)";
    case collieSystemError:
      return "unhandled system error (run with COLLIE_DEBUG=INFO for details)";
    case collieInternalError:
      return "internal error - please report this issue to the Collie developers";
    case collieInvalidArgument:
      return "invalid argument (see collieGetLastError)";
    case collieInvalidUsage:
      return "invalid usage (see collieGetLastError)";
    case collieRemoteError:
      return "remote process exited or there was a network error";
    case collieInProgress:
      return "Collie operation in progress";
    case collieTimeout:
      return "timed out (see collieGetLastError for the rank that was waited on)";
    default:
      return "unknown result code";
  }
}

const char* collieGetLastError(collieComm_t comm) { return collie::lastErrorText(comm); }

collieResult_t collieGetUniqueId(collieUniqueId* uniqueId) {
  return guarded(nullptr, [&] {
    if (uniqueId == nullptr) return Status::error(collieInvalidArgument, "collieGetUniqueId: uniqueId is NULL");
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(nullptr, &options));
    collie::Secret secret;
    COLLIE_RETURN_IF_ERROR(collie::randomSecret(&secret));
    return collie::startRendezvousRoot("", 0, secret, options.initTimeoutSec, uniqueId)
        .withContext("collieGetUniqueId");
  });
}

collieResult_t collieCommInitRankConfig(collieComm_t* comm, int nranks, collieUniqueId commId, int rank,
                                        collieConfig_t* config) {
  return guarded(nullptr, [&] {
    const char* call = "collieCommInitRank";
    if (comm == nullptr) return Status::error(collieInvalidArgument, "%s: comm is NULL", call);
    *comm = nullptr;
    if (nranks < 1) return Status::error(collieInvalidArgument, "%s: nranks %d must be at least 1", call, nranks);
    if (rank < 0 || rank >= nranks)
      return Status::error(collieInvalidArgument, "%s: rank %d is not in [0, %d)", call, rank, nranks);
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(config, &options).withContext(call));
    return collie::commInit(commId, nranks, rank, options, comm).withContext(call);
  });
}

collieResult_t collieCommInitRank(collieComm_t* comm, int nranks, collieUniqueId commId, int rank) {
  return collieCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

collieResult_t collieCommInitAll(collieComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, [&] {
    const char* call = "collieCommInitAll";
    if (comms == nullptr) return Status::error(collieInvalidArgument, "%s: comms is NULL", call);
    if (ndev < 1) return Status::error(collieInvalidArgument, "%s: ndev %d must be at least 1", call, ndev);
    for (int i = 0; i < ndev; ++i) {
      comms[i] = nullptr;
      if (devlist != nullptr && devlist[i] < 0)
        return Status::error(collieInvalidArgument, "%s: devlist[%d] = %d is not a device", call, i, devlist[i]);
    }
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(nullptr, &options).withContext(call));
    collieUniqueId id;
    collie::Secret secret;
    COLLIE_RETURN_IF_ERROR(collie::randomSecret(&secret));
    COLLIE_RETURN_IF_ERROR(collie::startRendezvousRoot("127.0.0.1", 0, secret, options.initTimeoutSec, &id));
    // Every rank's init blocks until all have joined, so each needs its own thread.
    std::vector<Status> results(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(ndev));
    for (int r = 0; r < ndev; ++r)
      threads.emplace_back(
          [&, r] { results[static_cast<size_t>(r)] = collie::commInit(id, ndev, r, options, &comms[r]); });
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[static_cast<size_t>(r)].ok()) continue;
      for (int i = 0; i < ndev; ++i) {
        if (comms[i] != nullptr) collieCommDestroy(comms[i]);
        comms[i] = nullptr;
      }
      return results[static_cast<size_t>(r)].withContext(call);
    }
    return Status();
  });
}

collieResult_t collieCommInitFromEnv(collieComm_t* comm, collieConfig_t* config) {
  return guarded(nullptr, [&] {
    const char* call = "collieCommInitFromEnv";
    if (comm == nullptr) return Status::error(collieInvalidArgument, "%s: comm is NULL", call);
    *comm = nullptr;
    collie::InitOptions options;
    COLLIE_RETURN_IF_ERROR(collie::resolveConfig(config, &options).withContext(call));
    return collie::commInitFromEnv(options, comm).withContext(call);
  });
}

collieResult_t collieCommSplit(collieComm_t comm, int, int, collieComm_t* newcomm, collieConfig_t*) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return collie::report(notYet("collieCommSplit"), comm);
}

collieResult_t collieCommFinalize(collieComm_t comm) {
  return guarded(comm, [&] {
    COLLIE_RETURN_IF_ERROR(checkComm(comm, "collieCommFinalize"));
    // The host backend finishes every call before returning: nothing is outstanding.
    comm->finalized = true;
    return Status();
  });
}

collieResult_t collieCommDestroy(collieComm_t comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return Status();
    if (!collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "collieCommDestroy: comm %p is not a live communicator",
                           static_cast<void*>(comm));
    collie::unregisterComm(comm);
    delete comm;
    return Status();
  });
}

collieResult_t collieCommAbort(collieComm_t comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return Status();
    if (!collie::commIsLive(comm))
      return Status::error(collieInvalidArgument, "collieCommAbort: comm %p is not a live communicator",
                           static_cast<void*>(comm));
    comm->aborted.store(true);
    if (comm->bootstrap) comm->bootstrap->abort();
    collie::unregisterComm(comm);
    delete comm;
    return Status();
  });
}

collieResult_t collieCommGetAsyncError(collieComm_t comm, collieResult_t* asyncError) {
  return query(comm, asyncError, "collieCommGetAsyncError", "asyncError",
               [](collieComm_t c) { return static_cast<collieResult_t>(c->asyncError.load()); });
}

collieResult_t collieCommCount(const collieComm_t comm, int* count) {
  return query(comm, count, "collieCommCount", "count", [](collieComm_t c) { return c->nranks; });
}

collieResult_t collieCommCuDevice(const collieComm_t comm, int* device) {
  return query(comm, device, "collieCommCuDevice", "device", [](collieComm_t c) { return c->cudaDevice; });
}

collieResult_t collieCommUserRank(const collieComm_t comm, int* rank) {
  return query(comm, rank, "collieCommUserRank", "rank", [](collieComm_t c) { return c->rank; });
}

collieResult_t collieCommGetBackend(const collieComm_t comm, collieBackend_t* backend) {
  return query(comm, backend, "collieCommGetBackend", "backend", [](collieComm_t c) { return c->backend; });
}

collieResult_t collieMemAlloc(void** ptr, size_t) {
  if (ptr != nullptr) *ptr = nullptr;
  return collie::report(notYet("collieMemAlloc"));
}
collieResult_t collieMemFree(void*) { return collie::report(notYet("collieMemFree")); }
collieResult_t collieCommRegister(const collieComm_t comm, void*, size_t, void** handle) {
  if (handle != nullptr) *handle = nullptr;
  return collie::report(notYet("collieCommRegister"), comm);
}
collieResult_t collieCommDeregister(const collieComm_t comm, void*) {
  return collie::report(notYet("collieCommDeregister"), comm);
}

collieResult_t collieRedOpCreatePreMulSum(collieRedOp_t* op, void*, collieDataType_t, collieScalarResidence_t,
                                          collieComm_t comm) {
  if (op != nullptr) *op = collieMaxRedOp;
  return collie::report(notYet("collieRedOpCreatePreMulSum"), comm);
}
collieResult_t collieRedOpDestroy(collieRedOp_t, collieComm_t comm) {
  return collie::report(notYet("collieRedOpDestroy"), comm);
}

collieResult_t collieAllReduce(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                               collieRedOp_t op, collieComm_t comm, collieStream_t) {
  return guarded(comm, [&] { return allReduce(sendbuff, recvbuff, count, datatype, op, comm); });
}

collieResult_t collieBroadcast(const void*, void*, size_t, collieDataType_t, int, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieBroadcast"), comm);
}
collieResult_t collieReduce(const void*, void*, size_t, collieDataType_t, collieRedOp_t, int, collieComm_t comm,
                            collieStream_t) {
  return collie::report(notYet("collieReduce"), comm);
}
collieResult_t collieAllGather(const void*, void*, size_t, collieDataType_t, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieAllGather"), comm);
}
collieResult_t collieReduceScatter(const void*, void*, size_t, collieDataType_t, collieRedOp_t, collieComm_t comm,
                                   collieStream_t) {
  return collie::report(notYet("collieReduceScatter"), comm);
}
collieResult_t collieAllToAll(const void*, void*, size_t, collieDataType_t, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieAllToAll"), comm);
}
collieResult_t collieAllToAllv(const void*, const size_t*, const size_t*, void*, const size_t*, const size_t*,
                               collieDataType_t, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieAllToAllv"), comm);
}
collieResult_t collieGather(const void*, void*, size_t, collieDataType_t, int, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieGather"), comm);
}
collieResult_t collieScatter(const void*, void*, size_t, collieDataType_t, int, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieScatter"), comm);
}
collieResult_t collieBarrier(collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieBarrier"), comm);
}
collieResult_t collieSend(const void*, size_t, collieDataType_t, int, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieSend"), comm);
}
collieResult_t collieRecv(void*, size_t, collieDataType_t, int, collieComm_t comm, collieStream_t) {
  return collie::report(notYet("collieRecv"), comm);
}
collieResult_t collieGroupStart(void) { return collie::report(notYet("collieGroupStart")); }
collieResult_t collieGroupEnd(void) { return collie::report(notYet("collieGroupEnd")); }

}  // extern "C"
