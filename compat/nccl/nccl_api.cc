// libnccl.so.2: the functions of NCCL 2.19 (compat/nccl/nccl.h), forwarding to
// the collie* call of the same meaning; the calls of later releases are in
// nccl_later.cc. The enums share NCCL's values (checked
// below), so arguments and results pass through unchanged; handles are the
// same pointers under another name. What is NCCL's own here: the config
// struct, NCCL_COMM_ID, the environment (nccl_env.cc) and the pnccl* aliases.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "collie.h"
#include "compat/nccl/nccl.h"
#include "compat/nccl/nccl_env.h"
#include "compat/nccl/nccl_shim.h"
#include "core/embedding.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"

using collie::Status;
using collie::nccl::fail;
using collie::nccl::unsupported;

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(collieUniqueId), "unique ids differ in size");
static_assert(sizeof(ncclResult_t) == sizeof(collieResult_t) && sizeof(ncclRedOp_t) == sizeof(collieRedOp_t),
              "results and operators are written through each other's pointers");
static_assert(ncclInProgress == static_cast<int>(collieInProgress) && ncclTimeout == static_cast<int>(collieTimeout),
              "result codes differ");
static_assert(ncclBfloat16 == static_cast<int>(collieBfloat16) && ncclFloat8e5m2 == static_cast<int>(collieFloat8e5m2),
              "data types differ");
static_assert(ncclAvg == static_cast<int>(collieAvg) && ncclNumOps == static_cast<int>(collieNumOps),
              "operators differ");
static_assert(ncclScalarHostImmediate == static_cast<int>(collieScalarHostImmediate), "scalar residences differ");
static_assert(NCCL_SPLIT_NOCOLOR == COLLIE_SPLIT_NOCOLOR, "split colours differ");
static_assert(NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), "version code");

// Short names for the casts every forwarding call makes; the first two are the shim's own (nccl_shim.h).
constexpr auto& R = collie::nccl::toNccl;
constexpr auto& C = collie::nccl::toCollie;
collieComm_t* CP(ncclComm_t* c) { return reinterpret_cast<collieComm_t*>(c); }
collieDataType_t T(ncclDataType_t t) { return static_cast<collieDataType_t>(t); }
collieRedOp_t O(ncclRedOp_t op) { return static_cast<collieRedOp_t>(op); }
collieStream_t S(cudaStream_t s) { return static_cast<collieStream_t>(s); }

collieUniqueId toCollie(const ncclUniqueId& id) {
  collieUniqueId out;
  memcpy(&out, &id, sizeof(out));
  return out;
}

// Reads int field `offset` of a caller's ncclConfig_t only when its size covers it.
bool configInt(const ncclConfig_t* c, size_t offset, int* out) {
  if (c->size < offset + sizeof(int)) return false;
  memcpy(out, reinterpret_cast<const char*>(c) + offset, sizeof(int));
  return *out != NCCL_CONFIG_UNDEF_INT;
}

// ncclConfig_t -> collieConfig_t: blocking is honoured; the other fields are
// GPU launch and network choices Collie makes itself, so they are logged and left.
Status toCollieConfig(const ncclConfig_t* in, collieConfig_t* out, const char* call) {
  const collieConfig_t init = COLLIE_CONFIG_INITIALIZER;
  *out = init;
  if (in->magic != NCCL_API_MAGIC)
    return Status::error(collieInvalidArgument,
                         "%s: config.magic is 0x%x, not 0x%x: start the config from NCCL_CONFIG_INITIALIZER", call,
                         in->magic, NCCL_API_MAGIC);
  if (in->version < static_cast<unsigned>(NCCL_VERSION(2, 14, 0)))
    return Status::error(collieInvalidArgument, "%s: config.version %u is older than the first with a config (21400)",
                         call, in->version);
  if (in->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return Status::error(collieInvalidArgument, "%s: config.size %zu is too small", call, in->size);
  int v = 0;
  if (configInt(in, offsetof(ncclConfig_t, blocking), &v)) {
    if (v != 0 && v != 1) return Status::error(collieInvalidArgument, "%s: config.blocking %d must be 0 or 1", call, v);
    out->blocking = v;
  }
  static const struct {
    size_t offset;
    const char* name;
  } kIgnored[] = {{offsetof(ncclConfig_t, cgaClusterSize), "cgaClusterSize"},
                  {offsetof(ncclConfig_t, minCTAs), "minCTAs"},
                  {offsetof(ncclConfig_t, maxCTAs), "maxCTAs"},
                  {offsetof(ncclConfig_t, splitShare), "splitShare"}};
  for (const auto& f : kIgnored)
    if (configInt(in, f.offset, &v)) COLLIE_INFO("%s: config.%s = %d has no effect in Collie", call, f.name, v);
  if (in->size >= offsetof(ncclConfig_t, netName) + sizeof(const char*) && in->netName != NCCL_CONFIG_UNDEF_PTR)
    COLLIE_INFO("%s: config.netName = %s has no effect in Collie", call, in->netName);
  return Status();
}

// NCCL_COMM_ID=host:port: the id every process derives alike, so ranks need not
// pass it around; the secret is COLLIE_SECRET when set, else derived from the
// address (as environment init does without COLLIE_SECRET).
bool commIdFromEnv(collie::UniqueIdInfo* info, Status* st) {
  const char* value = getenv("NCCL_COMM_ID");
  if (value == nullptr || *value == '\0') return false;
  const std::string text(value);
  std::string host;
  int port = 0;
  if (!collie::parseHostPort(text, &host, &port)) {
    *st = Status::error(collieInvalidArgument, "NCCL_COMM_ID=%s: expected host:port", value);
    return true;
  }
  collie::SockAddr addr;
  *st = collie::resolveAddress(host, port, &addr).withContext("NCCL_COMM_ID");
  if (!st->ok()) return true;
  info->host = addr.host();
  info->port = port;
  if (std::optional<std::string> hex = collie::env::get("COLLIE_SECRET")) {
    if (!collie::parseSecretHex(*hex, &info->secret))
      *st = Status::error(collieInvalidArgument, "COLLIE_SECRET must be 32 hexadecimal digits");
    return true;
  }
  const std::string seed = text;
  const uint64_t h1 = collie::fnv1a(seed.data(), seed.size());
  const uint64_t h2 = collie::fnv1a(seed.data(), seed.size(), 7809847782465536322ull);
  memcpy(info->secret.bytes, &h1, 8);
  memcpy(info->secret.bytes + 8, &h2, 8);
  return true;
}

// Rank 0 serves the NCCL_COMM_ID rendezvous when the id it joins is that one.
Status serveCommId(const ncclUniqueId& id, int rank) {
  collie::UniqueIdInfo want;
  Status st;
  if (rank != 0 || !commIdFromEnv(&want, &st)) return Status();
  COLLIE_RETURN_IF_ERROR(st);
  collie::UniqueIdInfo got;
  if (!collie::decodeUniqueId(toCollie(id), &got).ok() || got.host != want.host || got.port != want.port ||
      memcmp(got.secret.bytes, want.secret.bytes, sizeof(want.secret.bytes)) != 0)
    return Status();  // an id made without NCCL_COMM_ID: its maker serves it
  double initTimeoutSec = 0;
  COLLIE_RETURN_IF_ERROR(collie::embedding::initTimeoutSec(&initTimeoutSec));
  collieUniqueId served;
  return collie::startRendezvousRoot(want.host, want.port, want.secret, initTimeoutSec, &served)
      .withContext("NCCL_COMM_ID rendezvous");
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- memory

ncclResult_t ncclMemAlloc(void** ptr, size_t size) { return R(collieMemAlloc(ptr, size)); }
ncclResult_t ncclMemFree(void* ptr) { return R(collieMemFree(ptr)); }

// ---------------------------------------------------------------- version, ids, communicators

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return fail(Status::error(collieInvalidArgument, "ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  collie::nccl::announce();
  if (uniqueId == nullptr) return fail(Status::error(collieInvalidArgument, "ncclGetUniqueId: uniqueId is NULL"));
  collie::UniqueIdInfo info;
  Status st;
  if (commIdFromEnv(&info, &st)) {
    if (!st.ok()) return fail(st.withContext("ncclGetUniqueId"));
    collieUniqueId id;
    collie::encodeUniqueId(info, &id);
    memcpy(uniqueId, &id, sizeof(id));
    return ncclSuccess;
  }
  return R(collieGetUniqueId(reinterpret_cast<collieUniqueId*>(uniqueId)));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  collie::nccl::announce();
  const char* call = "ncclCommInitRank";
  if (comm != nullptr) *comm = nullptr;
  collieConfig_t cc;
  if (config != nullptr) {
    Status st = toCollieConfig(config, &cc, call);
    if (!st.ok()) return fail(st);
  }
  if (comm != nullptr && nranks >= 1 && rank >= 0 && rank < nranks) {
    Status st = serveCommId(commId, rank);
    if (!st.ok()) return fail(st.withContext(call));
  }
  return R(collieCommInitRankConfig(CP(comm), nranks, toCollie(commId), rank, config != nullptr ? &cc : nullptr));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  collie::nccl::announce();
  return R(collieCommInitAll(CP(comm), ndev, devlist));
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return R(collieCommFinalize(C(comm))); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return R(collieCommDestroy(C(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return R(collieCommAbort(C(comm))); }

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  collieConfig_t cc;
  if (config != nullptr) {
    Status st = toCollieConfig(config, &cc, "ncclCommSplit");
    if (!st.ok()) return fail(st, comm);
  }
  return R(collieCommSplit(C(comm), color, key, CP(newcomm), config != nullptr ? &cc : nullptr));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  if (newcomm != nullptr) *newcomm = nullptr;
  collieConfig_t cc;
  if (config != nullptr) {
    Status st = toCollieConfig(config, &cc, "ncclCommShrink");  // shrinkShare: nothing is shared in any case
    if (!st.ok()) return fail(st, comm);
  }
  // NCCL_SHRINK_DEFAULT and NCCL_SHRINK_ABORT are COLLIE_SHRINK_DEFAULT and COLLIE_SHRINK_ABORT.
  return R(collieCommShrink(C(comm), excludeRanksList, excludeRanksCount, CP(newcomm),
                            config != nullptr ? &cc : nullptr, shrinkFlags));
}

// NCCL_REVOKE_DEFAULT is COLLIE_REVOKE_DEFAULT. A blocking call: it returns once the work has stopped, so the
// communicator never shows ncclInProgress.
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) { return R(collieCommRevoke(C(comm), revokeFlags)); }

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the Collie developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details, or see ncclGetLastError)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details, or see ncclGetLastError)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "timed out (ncclGetLastError names the rank that was waited on)";
    default:
      return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) { return collieGetLastError(C(comm)); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return R(collieCommGetAsyncError(C(comm), reinterpret_cast<collieResult_t*>(asyncError)));
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return R(collieCommCount(C(comm), count)); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) { return R(collieCommCuDevice(C(comm), device)); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return R(collieCommUserRank(C(comm), rank)); }

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return R(collieCommRegister(C(comm), buff, size, handle));
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return R(collieCommDeregister(C(comm), handle));
}

// ---------------------------------------------------------------- operators

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return R(collieRedOpCreatePreMulSum(reinterpret_cast<collieRedOp_t*>(op), scalar, T(datatype),
                                      static_cast<collieScalarResidence_t>(residence), C(comm)));
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) { return R(collieRedOpDestroy(O(op), C(comm))); }

// ---------------------------------------------------------------- collectives

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return R(collieReduce(sendbuff, recvbuff, count, T(datatype), O(op), root, C(comm), S(stream)));
}
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return R(collieBroadcast(buff, buff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return R(collieBroadcast(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return R(collieAllReduce(sendbuff, recvbuff, count, T(datatype), O(op), C(comm), S(stream)));
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return R(collieReduceScatter(sendbuff, recvbuff, recvcount, T(datatype), O(op), C(comm), S(stream)));
}
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return R(collieAllGather(sendbuff, recvbuff, sendcount, T(datatype), C(comm), S(stream)));
}
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  return R(collieAllToAll(sendbuff, recvbuff, count, T(datatype), C(comm), S(stream)));
}
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return R(collieGather(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return R(collieScatter(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream)));
}

// ---------------------------------------------------------------- point to point, groups

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return R(collieSend(sendbuff, count, T(datatype), peer, C(comm), S(stream)));
}
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return R(collieRecv(recvbuff, count, T(datatype), peer, C(comm), S(stream)));
}
ncclResult_t ncclGroupStart(void) { return R(collieGroupStart()); }
ncclResult_t ncclGroupEnd(void) { return R(collieGroupEnd()); }

}  // extern "C"

// ---------------------------------------------------------------- pnccl* aliases

COLLIE_NCCL_ALIAS(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclMemFree, (void* ptr));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGetVersion, (int* version));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommInitRankConfig,
                  (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommSplit,
                  (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommShrink,
                  (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                   ncclConfig_t* config, int shrinkFlags));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
COLLIE_NCCL_ALIAS(const char*, ncclGetErrorString, (ncclResult_t result));
COLLIE_NCCL_ALIAS(const char*, ncclGetLastError, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclRedOpCreatePreMulSum,
                  (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                   ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                   int root, ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclBcast,
                  (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclBroadcast,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclAllReduce,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclReduceScatter,
                  (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                   ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclAllGather,
                  (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                   cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclAlltoAll,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                   cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGather,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclScatter,
                  (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                   ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclSend,
                  (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclRecv,
                  (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                   cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGroupStart, (void));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGroupEnd, (void));
