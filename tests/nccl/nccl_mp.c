/*
 * A C program written only against nccl.h, one rank per process, as a
 * program started by mpirun or a job script is. Rank and size come from the
 * launcher's variables (COLLIE_RANK/COLLIE_WORLD_SIZE from collie-run, or
 * OpenMPI's). The unique id travels one of the two ways NCCL programs use:
 *   --id-file PATH   rank 0 calls ncclGetUniqueId and writes the id to PATH,
 *                    the others wait for the file (as with a shared filesystem);
 *   (no option)      NCCL_COMM_ID=host:port is set, every rank calls
 *                    ncclGetUniqueId and gets the same id; rank 0 serves it.
 * Then: allreduce, broadcast, allgather, a pre-multiplied sum and an
 * all-to-all-v from grouped send/recv with uneven sizes (zero and self too),
 * each checked.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep in strict C99 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NCCLCHECK(call)                                                                                             \
  do {                                                                                                              \
    ncclResult_t r_ = (call);                                                                                       \
    if (r_ != ncclSuccess) {                                                                                        \
      fprintf(stderr, "FAIL rank %d %s:%d: %s: %s (%s)\n", rank, __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                                              \
      return 1;                                                                                                     \
    }                                                                                                               \
  } while (0)

static int envInt(const char* a, const char* b) {
  const char* v = getenv(a);
  if (v == NULL) v = getenv(b);
  return v ? atoi(v) : -1;
}

static int exchangeId(int rank, const char* path, ncclUniqueId* id) {
  char tmp[4096];
  FILE* f;
  int i;
  if (rank == 0) {
    if (ncclGetUniqueId(id) != ncclSuccess) return -1;
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, sizeof(*id), 1, f) != 1) return -1;
    fclose(f);
    return rename(tmp, path); /* appears whole */
  }
  for (i = 0; i < 30000; ++i) { /* 30 s */
    f = fopen(path, "rb");
    if (f != NULL) {
      const size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      return got == 1 ? 0 : -1;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return -1;
}

/* Elements rank s sends to rank d in the all-to-all-v: uneven, some zero. */
static size_t pairCount(int s, int d) { return (size_t)(((s * 5 + d * 3) % 4) * 1000); }

int main(int argc, char** argv) {
  const int rank = envInt("COLLIE_RANK", "OMPI_COMM_WORLD_RANK");
  const int n = envInt("COLLIE_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  const char* idFile = argc > 2 && strcmp(argv[1], "--id-file") == 0 ? argv[2] : NULL;
  ncclUniqueId id;
  ncclComm_t comm;
  ncclRedOp_t op;
  float scalar;
  int wrong = 0, p;
  size_t i, sendTotal = 0, recvTotal = 0, soff, roff;
  enum { kCount = 100003 };
  static float a[kCount], b[kCount];
  float* gathered;
  int* sbuf;
  int* rbuf;
  if (rank < 0 || n < 1 || rank >= n) {
    fprintf(stderr, "FAIL: start with collie-run or mpirun (no rank in the environment)\n");
    return 2;
  }
  if (idFile != NULL) {
    if (exchangeId(rank, idFile, &id) != 0) {
      fprintf(stderr, "FAIL rank %d: no unique id through %s\n", rank, idFile);
      return 1;
    }
  } else {
    if (getenv("NCCL_COMM_ID") == NULL) {
      fprintf(stderr, "FAIL: give --id-file PATH or set NCCL_COMM_ID\n");
      return 2;
    }
    NCCLCHECK(ncclGetUniqueId(&id));
  }
  NCCLCHECK(ncclCommInitRank(&comm, n, id, rank));

  /* allreduce: rank r contributes r + i % 7 */
  for (i = 0; i < kCount; ++i) a[i] = (float)(rank + (int)(i % 7));
  NCCLCHECK(ncclAllReduce(a, b, kCount, ncclFloat32, ncclSum, comm, NULL));
  for (i = 0; i < kCount; ++i)
    if (b[i] != (float)(n * (n - 1) / 2 + n * (int)(i % 7))) ++wrong;

  /* broadcast from the last rank, in place */
  for (i = 0; i < kCount; ++i) a[i] = rank == n - 1 ? (float)i : -1.0f;
  NCCLCHECK(ncclBroadcast(a, a, kCount, ncclFloat32, n - 1, comm, NULL));
  for (i = 0; i < kCount; ++i)
    if (a[i] != (float)i) ++wrong;

  /* allgather of 1000 elements per rank */
  gathered = (float*)malloc(sizeof(float) * 1000 * (size_t)n);
  for (i = 0; i < 1000; ++i) a[i] = (float)(rank * 1000 + (int)i);
  NCCLCHECK(ncclAllGather(a, gathered, 1000, ncclFloat32, comm, NULL));
  for (i = 0; i < 1000 * (size_t)n; ++i)
    if (gathered[i] != (float)i) ++wrong;
  free(gathered);

  /* pre-multiplied sum: rank r scales by r + 1 */
  scalar = (float)(rank + 1);
  NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  for (i = 0; i < 1000; ++i) a[i] = 1.0f;
  NCCLCHECK(ncclAllReduce(a, a, 1000, ncclFloat32, op, comm, NULL));
  NCCLCHECK(ncclRedOpDestroy(op, comm));
  for (i = 0; i < 1000; ++i)
    if (a[i] != (float)(n * (n + 1) / 2)) ++wrong;

  /* all-to-all-v from grouped send/recv */
  for (p = 0; p < n; ++p) {
    sendTotal += pairCount(rank, p);
    recvTotal += pairCount(p, rank);
  }
  sbuf = (int*)malloc(sizeof(int) * (sendTotal + 1));
  rbuf = (int*)malloc(sizeof(int) * (recvTotal + 1));
  for (soff = 0, p = 0; p < n; soff += pairCount(rank, p), ++p)
    for (i = 0; i < pairCount(rank, p); ++i) sbuf[soff + i] = rank * 1000000 + p * 10000 + (int)i;
  NCCLCHECK(ncclGroupStart());
  for (soff = 0, roff = 0, p = 0; p < n; soff += pairCount(rank, p), roff += pairCount(p, rank), ++p) {
    NCCLCHECK(ncclSend(sbuf + soff, pairCount(rank, p), ncclInt32, p, comm, NULL));
    NCCLCHECK(ncclRecv(rbuf + roff, pairCount(p, rank), ncclInt32, p, comm, NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  for (roff = 0, p = 0; p < n; roff += pairCount(p, rank), ++p)
    for (i = 0; i < pairCount(p, rank); ++i)
      if (rbuf[roff + i] != p * 1000000 + rank * 10000 + (int)i) ++wrong;
  free(sbuf);
  free(rbuf);

  NCCLCHECK(ncclCommFinalize(comm));
  NCCLCHECK(ncclCommDestroy(comm));
  if (wrong != 0) {
    fprintf(stderr, "FAIL rank %d: %d wrong elements\n", rank, wrong);
    return 1;
  }
  printf("PASS: rank %d of %d (%s)\n", rank, n, idFile ? "id file" : "NCCL_COMM_ID");
  return 0;
}
