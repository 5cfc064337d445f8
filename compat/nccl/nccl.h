/*
 * nccl.h -- Collie's drop-in NCCL interface.
 *
 * Written for Collie from NCCL's documented names and numeric values; it is
 * not NVIDIA's header. A program written for NCCL 2.18 or 2.19 compiles
 * against it unchanged, links against Collie's libnccl.so.2 (built in
 * compat/nccl), and runs on Collie: every function of 2.19 forwards to the
 * collie* call of the same meaning (include/collie.h). Calls of later NCCL
 * versions are declared too, near the end; most of them return
 * ncclInvalidUsage. What is supported, and the error returned by what is not,
 * is in docs/nccl-compat.md.
 *
 * C99 and C++; the CUDA runtime headers give cudaStream_t and the fp16/bf16
 * types, as with NCCL. Every call returns ncclResult_t; after a failure
 * ncclGetLastError() gives a sentence naming the call and the argument.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The NCCL version this interface claims: 2.19.3. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 19
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""
/* Versions up to 2.8 were coded X*1000 + Y*100 + Z, later ones X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE 21903

/* Tells a program it is built against Collie's interface rather than NVIDIA's. */
#define NCCL_COLLIE 1

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- types */

/** Opaque communicator handle. */
typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

/** 128 opaque bytes naming a rendezvous; made by ncclGetUniqueId, passed to every rank. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/** Result codes. ncclInProgress is not an error (non-blocking calls still running). */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8, /* a bounded wait expired; ncclGetLastError names the rank waited on */
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/** ncclCommSplit's colour for a rank that joins no new communicator. */
#define NCCL_SPLIT_NOCOLOR -1
/** The magic number NCCL_CONFIG_INITIALIZER stores; a config without it is refused. */
#define NCCL_API_MAGIC 0xcafebeef

/**
 * Communicator options (the fields of NCCL 2.19). Always start from
 * NCCL_CONFIG_INITIALIZER: size, magic and version let the library read a
 * struct made by an older or newer header. Collie honours `blocking`; the
 * other fields are accepted and logged at INFO as having no effect.
 */
typedef struct ncclConfig_v21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;        /* 1 (default): init blocks; 0: may return ncclInProgress (Collie finishes at once) */
  int cgaClusterSize;  /* no effect in Collie */
  int minCTAs;         /* no effect in Collie */
  int maxCTAs;         /* no effect in Collie */
  const char* netName; /* no effect in Collie */
  int splitShare;      /* no effect in Collie */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                                    \
  {                                                                                                                \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,                \
        NCCL_CONFIG_UNDEF_INT                                                                                      \
  }

/* Keeps ncclRedOp_t the size of an int, whatever values are added. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

/**
 * Reduction operators. Values from ncclNumOps up are operators made at run time
 * by ncclRedOpCreatePreMulSum, valid on the communicator that made them.
 */
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

/** Element types. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/** Where a pre-multiplied sum's scalar lives, and so when it is read. */
typedef enum {
  ncclScalarDevice = 0,       /* read when the collective runs: the pointer must stay valid until then */
  ncclScalarHostImmediate = 1 /* read once, by ncclRedOpCreatePreMulSum */
} ncclScalarResidence_t;

/* ---------------------------------------------------------------- memory
 * Each function also exists as pnccl<Name> (same arguments), for profiling tools
 * that wrap the nccl* names.
 */

/** Device memory (cudaMalloc) when a GPU is usable; page-aligned host memory otherwise. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
/** Frees what ncclMemAlloc returned; NULL is accepted. */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---------------------------------------------------------------- version, ids, communicators */

/** Writes NCCL_VERSION_CODE of the library (21903) to *version. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/**
 * Makes a unique id and starts its rendezvous in this process. With
 * NCCL_COMM_ID=host:port set, every process gets the same id naming that
 * address, and rank 0's ncclCommInitRank serves it.
 */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/** As ncclCommInitRank, with options (config may be NULL). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);

/**
 * Joins rank `rank` (0 <= rank < nranks) to the communicator named by commId.
 * Blocks until every rank has joined, so one thread initialising several ranks
 * must do it between ncclGroupStart and ncclGroupEnd (they join at GroupEnd).
 */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/** ndev communicators of one clique in this process; rank i uses devlist[i] (devices may repeat). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/** Waits for the communicator's outstanding work; afterwards only destroy may follow. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/** Frees the communicator. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/** Stops the communicator's outstanding work and frees it. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/**
 * New communicators from comm, one per colour; ranks ordered by key, then by
 * their rank in comm. NCCL_SPLIT_NOCOLOR gives *newcomm = NULL. Collective over
 * comm. config NULL: the new communicator inherits comm's options.
 */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/** A static name for a result code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/** The sentence of the last failure (of comm, or of this thread when comm is NULL); "" when none. */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/** ncclSuccess while comm is healthy; the error that broke it otherwise. Cheap: may be polled. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);
/** The CUDA device of comm; -1 for a communicator on Collie's host backend. */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/** Registers a buffer with comm; *handle is passed to ncclCommDeregister. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* ---------------------------------------------------------------- operators */

/**
 * An operator for comm and datatype: each rank's input multiplied by its own
 * *scalar (of datatype), then summed. Rounds once in the type per product.
 */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/** Destroys op; allowed as soon as the last call naming it has returned (even inside a group). */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---------------------------------------------------------------- collectives
 * Every rank calls each collective in the same order with matching arguments;
 * counts are in elements. The call is ordered on `stream` (ignored by the host
 * backend, which completes the call before returning).
 */

/** recvbuff on root = op over ranks of sendbuff. In place when sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);

/** Deprecated in-place broadcast: ncclBroadcast(buff, buff, ...). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/** root's sendbuff to every rank's recvbuff. In place when sendbuff == recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

/** recvbuff = op over ranks of sendbuff, on every rank. In place when sendbuff == recvbuff. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream);

/** recvbuff = block `rank` (recvcount elements) of op over ranks of sendbuff. In place when recvbuff == sendbuff + rank
 * * recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/** Block r of recvbuff = rank r's sendbuff (sendcount elements). In place when sendbuff == recvbuff + rank * sendcount.
 */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/** Block j of sendbuff (count elements) goes to rank j, arriving as block `rank` of its recvbuff. Not in place. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);

/** Block r of root's recvbuff = rank r's sendbuff (count elements). In place when sendbuff == recvbuff + root * count.
 */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/** Rank r's recvbuff = block r of root's sendbuff (count elements). In place when recvbuff == sendbuff + root * count.
 */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* ---------------------------------------------------------------- point to point
 * Matched in order per pair of ranks. Several sends and receives inside one
 * group (including to self, and of zero elements) progress together, which is
 * how all-to-all-v is built.
 */

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---------------------------------------------------------------- calls of later NCCL versions
 * Declared so that programs and binaries made for a later NCCL build and link;
 * docs/nccl-compat.md says which of them work.
 */

/** (2.23) As ncclCommInitRankConfig; of the nId ids (same on every rank) Collie's rendezvous uses commIds[0]. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

/** (2.27) Symmetric memory windows: not supported; ncclInvalidUsage, *win = NULL. The flags are declared so that
 * calls naming them compile. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096
typedef struct ncclWindow_vidmem* ncclWindow_t;
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/** (2.27) A communicator of comm's ranks less excludeRanksList, called by the ranks that stay (those left out
 * may be dead); they are renumbered in comm's order. NCCL_SHRINK_ABORT first stops comm's work in flight and
 * leaves comm only for ncclCommDestroy. config NULL: the new communicator inherits comm's options. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/** (2.28) Stops comm's work in flight and returns once it has stopped (so never ncclInProgress); afterwards
 * ncclCommGetAsyncError reports ncclSuccess, and only destroy, split and shrink may follow. */
#define NCCL_REVOKE_DEFAULT 0x00
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/** (2.29 and later) Growing a communicator: not supported; ncclInvalidUsage, *newcomm = NULL. */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                           ncclConfig_t* config);

/** (2.29 and later) Suspending a communicator: not supported; ncclInvalidUsage. */
#define NCCL_SUSPEND_MEM 0x01
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/**
 * (2.29 and later) Device memory of comm, in bytes: Collie allocates it all at init and none of it can be
 * suspended, so Persist and Total are that footprint, Suspend and Suspended 0 (all 0 on the host backend).
 */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/** (2.29 and later) Windows and one-sided calls: not supported; ncclInvalidUsage, nothing handed out. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                            ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

/** (deprecated in NCCL) Has no effect: Collie reads its log settings (COLLIE_DEBUG, NCCL_DEBUG) once. */
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);

/* ---------------------------------------------------------------- groups
 * Calls between ncclGroupStart and the matching ncclGroupEnd are queued, and
 * nothing blocks before ncclGroupEnd: one thread may drive every rank of a
 * clique (collectives, send/recv, ncclCommInitRank, ncclCommSplit) in one group.
 */

ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/**
 * (2.22) NCCL models the group's calls instead of running them. Collie has no model to offer: it closes the
 * group, runs none of its collectives or sends/receives (communicator inits in it still run), sets
 * estimatedTime to NCCL_UNDEF_FLOAT and returns ncclInvalidUsage. A simInfo not set from
 * NCCL_SIM_INFO_INITIALIZER is ncclInvalidArgument, and the group stays open.
 */
#define NCCL_UNDEF_FLOAT -1.0f
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
