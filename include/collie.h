/*
 * collie.h -- the public C API of Collie, a collective-communication library
 * for NVIDIA GPUs (and, on machines without one, for host memory).
 *
 * The API is shaped like NCCL's with its own prefix, and the numeric values of
 * results, data types and reduction operators are NCCL's, so a program can move
 * between the two by renaming. It is C99; every call returns collieResult_t,
 * and on failure collieGetLastError() gives a sentence naming the call and the
 * argument at fault.
 *
 * Streams are opaque (collieStream_t is a cudaStream_t passed as void*), so this
 * header compiles without the CUDA headers. On the host backend every call runs
 * to completion before it returns and the stream argument is ignored.
 *
 * A case whose implementation has not landed yet returns collieInvalidUsage and
 * collieGetLastError() says "... is not implemented yet"; README.md lists them.
 */
#ifndef COLLIE_H_
#define COLLIE_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLLIE_MAJOR 0
#define COLLIE_MINOR 1
#define COLLIE_PATCH 0
#define COLLIE_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define COLLIE_VERSION_CODE COLLIE_VERSION(COLLIE_MAJOR, COLLIE_MINOR, COLLIE_PATCH)

/** Result codes; the values are NCCL's. collieInProgress is not an error. */
typedef enum {
  collieSuccess = 0,
  collieUnhandledCudaError = 1,
  collieSystemError = 2,
  collieInternalError = 3,
  collieInvalidArgument = 4,
  collieInvalidUsage = 5,
  collieRemoteError = 6,
  collieInProgress = 7,
  collieTimeout = 8,
  collieNumResults = 9
} collieResult_t;

/** Element types; the values are NCCL's. */
typedef enum {
  collieInt8 = 0,
  collieChar = 0,
  collieUint8 = 1,
  collieInt32 = 2,
  collieInt = 2,
  collieUint32 = 3,
  collieInt64 = 4,
  collieUint64 = 5,
  collieFloat16 = 6,
  collieHalf = 6,
  collieFloat32 = 7,
  collieFloat = 7,
  collieFloat64 = 8,
  collieDouble = 8,
  collieBfloat16 = 9,
  collieFloat8e4m3 = 10,
  collieFloat8e5m2 = 11,
  collieNumTypes = 12
} collieDataType_t;

/**
 * Reduction operators; the values are NCCL's. Values from collieNumOps up are
 * operators made at run time by collieRedOpCreatePreMulSum. Every reduction
 * step rounds to the element type (fp16, bf16 and fp8 accumulate in their own
 * type, as NCCL does). collieAvg is a sum divided by the rank count once, at the
 * end (integer types truncate).
 */
typedef enum {
  collieSum = 0,
  collieProd = 1,
  collieMax = 2,
  collieMin = 3,
  collieAvg = 4,
  collieNumOps = 5,
  collieMaxRedOp = 0x7fffffff
} collieRedOp_t;

/** Where the scalar of a pre-multiplied sum lives. */
typedef enum { collieScalarDevice = 0, collieScalarHostImmediate = 1 } collieScalarResidence_t;

/** Which executor a communicator runs on. */
typedef enum { collieBackendAuto = 0, collieBackendHost = 1, collieBackendCuda = 2 } collieBackend_t;

/** 128 opaque bytes: the rendezvous address and a 128-bit random secret. */
#define COLLIE_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[COLLIE_UNIQUE_ID_BYTES];
} collieUniqueId;

/** Opaque communicator handle. */
typedef struct collieComm* collieComm_t;
#define COLLIE_COMM_NULL ((collieComm_t)0)

/** A cudaStream_t, passed opaquely. */
typedef void* collieStream_t;

#define COLLIE_CONFIG_UNDEF_INT (-2147483647 - 1)
#define COLLIE_CONFIG_MAGIC 0xc0111e01u

/**
 * Communicator options. Always start from COLLIE_CONFIG_INITIALIZER: fields are
 * only ever appended, and size/magic/version let an older caller's struct be
 * read safely. A field left at COLLIE_CONFIG_UNDEF_INT takes its default (or the
 * matching environment variable).
 */
typedef struct {
  size_t size;          /* sizeof(collieConfig_t) of the caller */
  unsigned int magic;   /* COLLIE_CONFIG_MAGIC */
  unsigned int version; /* COLLIE_VERSION_CODE of the caller */
  int blocking;         /* 1 (default) or 0; init completes before returning either way */
  int backend;          /* a collieBackend_t; default COLLIE_DEVICE, then auto */
  int timeoutMs;        /* bound on every wait; default COLLIE_TIMEOUT */
  int initTimeoutMs;    /* bound on init; default COLLIE_INIT_TIMEOUT */
  /* Algorithms, in COLLIE_ALGO's syntax ("allreduce:ring;allgather:file:PATH"); its entries replace
     COLLIE_ALGO's for the same collective. NULL (default): COLLIE_ALGO's alone. Read during the call only. */
  const char* algo;
} collieConfig_t;

#define COLLIE_CONFIG_INITIALIZER                                                              \
  {                                                                                            \
    sizeof(collieConfig_t), COLLIE_CONFIG_MAGIC, COLLIE_VERSION_CODE, COLLIE_CONFIG_UNDEF_INT, \
        COLLIE_CONFIG_UNDEF_INT, COLLIE_CONFIG_UNDEF_INT, COLLIE_CONFIG_UNDEF_INT, NULL        \
  }

/* ---------------------------------------------------------------- version, errors */

/** Writes COLLIE_VERSION_CODE to *version. */
collieResult_t collieGetVersion(int* version);

/** A static, human-readable name for a result code; never NULL. */
const char* collieGetErrorString(collieResult_t result);

/**
 * The sentence describing the last failed call: of that communicator when comm
 * is not NULL, else of the calling thread. Empty string when nothing failed.
 * The text is copied into the calling thread's storage: the pointer stays
 * valid until this thread's next collieGetLastError or failing call, even when
 * another thread destroys comm meanwhile.
 */
const char* collieGetLastError(collieComm_t comm);

/* ---------------------------------------------------------------- communicators */

/**
 * Makes a new unique id and starts its rendezvous root (a thread of this
 * process listening on a TCP port; COLLIE_SOCKET_IFNAME picks the interface).
 * Pass the id to every rank out of band. One id serves one communicator.
 */
collieResult_t collieGetUniqueId(collieUniqueId* uniqueId);

/**
 * Joins rank `rank` of `nranks` to the communicator named by `commId`. Blocks
 * until all ranks have arrived, or returns collieTimeout after
 * COLLIE_INIT_TIMEOUT seconds naming the ranks that never came. Inside
 * collieGroupStart/End it only queues: the ranks queued by one thread join
 * together at collieGroupEnd, which sets *comm.
 */
collieResult_t collieCommInitRank(collieComm_t* comm, int nranks, collieUniqueId commId, int rank);

/** As collieCommInitRank, with options; config may be NULL. */
collieResult_t collieCommInitRankConfig(collieComm_t* comm, int nranks, collieUniqueId commId, int rank,
                                        collieConfig_t* config);

/**
 * Creates ndev communicators of one clique in this process (rank i uses
 * devlist[i], or device i modulo the device count when devlist is NULL;
 * devices may repeat). With a GPU, a devlist entry that is not a device of
 * this process is collieInvalidArgument; the host backend ignores devlist.
 */
collieResult_t collieCommInitAll(collieComm_t* comms, int ndev, const int* devlist);

/**
 * Extension: init from a launcher's environment. Rank and size come from
 * COLLIE_RANK/COLLIE_WORLD_SIZE, else OMPI_COMM_WORLD_RANK/SIZE, else
 * SLURM_PROCID/NTASKS; the rendezvous is COLLIE_ROOT=host:port, served by
 * rank 0. config may be NULL.
 */
collieResult_t collieCommInitFromEnv(collieComm_t* comm, collieConfig_t* config);

/**
 * New communicators from comm, one per color: ranks ordered by key, then by
 * their rank in comm; COLLIE_SPLIT_NOCOLOR gives *newcomm = NULL. Collective
 * over comm. config NULL: the new communicator inherits comm's options. Inside
 * a group it is queued on comm and *newcomm is set at collieGroupEnd.
 */
#define COLLIE_SPLIT_NOCOLOR (-1)
collieResult_t collieCommSplit(collieComm_t comm, int color, int key, collieComm_t* newcomm, collieConfig_t* config);

/**
 * A new communicator of comm's ranks less the excludeRanksCount ranks in
 * excludeRanksList, as NCCL's ncclCommShrink. Only the ranks that stay call it,
 * each with the same list (in any order); the excluded ranks may be dead, which
 * is what it is for: going on after a rank failed. The ranks that stay keep
 * comm's order as ranks 0..m-1. COLLIE_SHRINK_ABORT first stops comm's work in
 * flight (kernels and waits) and leaves comm good only for collieCommDestroy;
 * COLLIE_SHRINK_DEFAULT leaves comm as it is. A comm broken by a failed
 * collective may be shrunk. config NULL: the new communicator inherits comm's
 * options. Inside a group it is queued on comm and *newcomm is set at
 * collieGroupEnd.
 */
#define COLLIE_SHRINK_DEFAULT 0x00
#define COLLIE_SHRINK_ABORT 0x01
collieResult_t collieCommShrink(collieComm_t comm, const int* excludeRanksList, int excludeRanksCount,
                                collieComm_t* newcomm, collieConfig_t* config, int shrinkFlags);

/** Waits for outstanding work; afterwards only destroy is allowed. */
collieResult_t collieCommFinalize(collieComm_t comm);

/** Frees every resource of comm. NULL is accepted and ignored. */
collieResult_t collieCommDestroy(collieComm_t comm);

/**
 * Stops comm's work in flight (kernels and waits, in this and other threads)
 * and returns once it has stopped, as NCCL's ncclCommRevoke (2.28). Afterwards
 * collieCommGetAsyncError reports success, and only collieCommDestroy,
 * collieCommSplit and collieCommShrink may follow. revokeFlags must be
 * COLLIE_REVOKE_DEFAULT.
 */
#define COLLIE_REVOKE_DEFAULT 0x00
collieResult_t collieCommRevoke(collieComm_t comm, int revokeFlags);

/** Stops outstanding work on comm and frees it. */
collieResult_t collieCommAbort(collieComm_t comm);

/** The asynchronous error state of comm (collieSuccess when healthy). */
collieResult_t collieCommGetAsyncError(collieComm_t comm, collieResult_t* asyncError);

collieResult_t collieCommCount(const collieComm_t comm, int* count);
/** The CUDA device of comm, or -1 for a host communicator. */
collieResult_t collieCommCuDevice(const collieComm_t comm, int* device);
collieResult_t collieCommUserRank(const collieComm_t comm, int* rank);
/** Extension: the backend comm runs on (collieBackendHost or collieBackendCuda). */
collieResult_t collieCommGetBackend(const collieComm_t comm, collieBackend_t* backend);

/* ---------------------------------------------------------------- memory */

/**
 * size bytes of device memory (cudaMalloc on the current device) when a GPU is
 * usable, else of page-aligned host memory. size 0 gives *ptr = NULL.
 */
collieResult_t collieMemAlloc(void** ptr, size_t size);
/** Frees what collieMemAlloc returned; NULL is accepted, anything else is collieInvalidArgument. */
collieResult_t collieMemFree(void* ptr);
/**
 * Registers a buffer (one comm can use) and returns a handle for
 * collieCommDeregister. Bookkeeping only on the host backend.
 */
collieResult_t collieCommRegister(const collieComm_t comm, void* buff, size_t size, void** handle);
collieResult_t collieCommDeregister(const collieComm_t comm, void* handle);

/** Window flags: COLLIE_WIN_COLL_SYMMETRIC says every rank's buffers of a call sit at the same offset of their
 * windows (NCCL's NCCL_WIN_COLL_SYMMETRIC); Collie does not need it and accepts it. */
#define COLLIE_WIN_DEFAULT 0x00
#define COLLIE_WIN_COLL_SYMMETRIC 0x01
typedef struct collieWindow* collieWindow_t;
/**
 * Collective: every rank of comm registers its own [buff, buff + size) as one window, in the same order as every
 * other rank's registrations. On the cuda backend, where the ranks are processes of one machine, each rank maps
 * every peer's window (cudaIpc handles, opened once, closed at deregistration or destroy), so the direct kernels
 * (COLLIE_ALGO direct algorithms) load and store buffers inside windows in place; a buffer outside every window is
 * first copied through a buffer of the communicator's own (COLLIE_DIRECT_STAGING). Across processes a window must
 * lie inside one allocation that cudaIpc can hand over: memory from collieMemAlloc or cudaMalloc (a caching
 * allocator's segment included), not from cudaMallocAsync. Elsewhere (ranks of one process, the host backend) it
 * is bookkeeping only.
 */
collieResult_t collieCommWindowRegister(collieComm_t comm, void* buff, size_t size, collieWindow_t* win, int flags);
/** Collective, as collieCommWindowRegister: every rank gives back its window of the same registration. */
collieResult_t collieCommWindowDeregister(collieComm_t comm, collieWindow_t win);
/** The buffer this rank registered as win (NCCL's ncclWinGetUserPtr). */
collieResult_t collieWinGetUserPtr(collieComm_t comm, collieWindow_t win, void** ptr);

/* ---------------------------------------------------------------- operators */

/**
 * An operator for collectives of comm and datatype: each rank's input times its
 * own *scalar (of datatype, rounded once in the type), then summed. Host-immediate:
 * *scalar is read now; device: it is read when each call runs. The operator
 * (>= collieNumOps) is valid on comm only. On the CUDA backend a device scalar
 * is read by a scaling kernel on the call's stream (one in plain host memory, which
 * a kernel cannot read, is read at enqueue).
 */
collieResult_t collieRedOpCreatePreMulSum(collieRedOp_t* op, void* scalar, collieDataType_t datatype,
                                          collieScalarResidence_t residence, collieComm_t comm);
/** Destroys op; allowed as soon as the calls naming it have returned, even inside a group. */
collieResult_t collieRedOpDestroy(collieRedOp_t op, collieComm_t comm);

/* ---------------------------------------------------------------- collectives
 * Every rank calls a collective in the same order with matching arguments.
 * `count` is in elements. A buffer may be NULL only when its count is 0.
 * In-place: pass the same pointer where the text says so.
 */

/**
 * recvbuff[i] = op over ranks of sendbuff[i], on every rank, for i < count.
 * In-place when sendbuff == recvbuff.
 */
collieResult_t collieAllReduce(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                               collieRedOp_t op, collieComm_t comm, collieStream_t stream);

/** root's sendbuff (count elements) copied to every rank's recvbuff. */
collieResult_t collieBroadcast(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype, int root,
                               collieComm_t comm, collieStream_t stream);

/** recvbuff on root = op over ranks of sendbuff; recvbuff is ignored elsewhere. */
collieResult_t collieReduce(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                            collieRedOp_t op, int root, collieComm_t comm, collieStream_t stream);

/** recvbuff[r*sendcount ...] = sendbuff of rank r. In-place when sendbuff == recvbuff + rank*sendcount. */
collieResult_t collieAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collieDataType_t datatype,
                               collieComm_t comm, collieStream_t stream);

/** recvbuff = op over ranks of sendbuff[rank*recvcount ...]. In-place when recvbuff == sendbuff + rank*recvcount. */
collieResult_t collieReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collieDataType_t datatype,
                                   collieRedOp_t op, collieComm_t comm, collieStream_t stream);

/** Block p of sendbuff (count elements) goes to rank p, arriving as block `rank` of its recvbuff. */
collieResult_t collieAllToAll(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                              collieComm_t comm, collieStream_t stream);

/**
 * All-to-all with per-peer counts and displacements (in elements, host arrays
 * of nranks entries), as torch.distributed.all_to_all_single with split sizes.
 * sendcounts[p] on this rank must equal recvcounts[me] on rank p.
 */
collieResult_t collieAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                               const size_t* recvcounts, const size_t* rdispls, collieDataType_t datatype,
                               collieComm_t comm, collieStream_t stream);

/** recvbuff on root gets each rank's sendbuff (count elements) in rank order. */
collieResult_t collieGather(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype, int root,
                            collieComm_t comm, collieStream_t stream);

/** Block r of root's sendbuff (count elements) goes to rank r's recvbuff. */
collieResult_t collieScatter(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype, int root,
                             collieComm_t comm, collieStream_t stream);

/** Extension: returns on every rank once all ranks have called it. */
collieResult_t collieBarrier(collieComm_t comm, collieStream_t stream);

/* ---------------------------------------------------------------- point to point */

collieResult_t collieSend(const void* sendbuff, size_t count, collieDataType_t datatype, int peer, collieComm_t comm,
                          collieStream_t stream);
collieResult_t collieRecv(void* recvbuff, size_t count, collieDataType_t datatype, int peer, collieComm_t comm,
                          collieStream_t stream);

/* ---------------------------------------------------------------- groups */

/** Calls between GroupStart and GroupEnd are queued and issued together at GroupEnd. */
collieResult_t collieGroupStart(void);
collieResult_t collieGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLIE_H_ */
