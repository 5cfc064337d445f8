/*
 * A C program written only against nccl.h, as a program for NCCL 2.19 is:
 * ncclCommInitAll makes N ranks in this process and one thread drives all of
 * them inside groups. Every collective (in place and out of place, several
 * types and operators), all-to-all-v from grouped send/recv with uneven sizes
 * including zero and self, pre-multiplied sums (operator destroyed right after
 * its call is queued), ncclCommSplit and non-blocking init inside a group,
 * ncclMemAlloc, registration, error reporting, abort. Inputs come from a seed
 * (printed; COLLIE_TEST_SEED repeats it); every result is checked against a
 * reference computed here. Usage: nccl_clique_test [nranks]
 */
#include <math.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXR 16

static int failures = 0;
static unsigned long long seed = 0;

#define NCCLCHECK(call)                                                                               \
  do {                                                                                                \
    ncclResult_t r_ = (call);                                                                         \
    if (r_ != ncclSuccess) {                                                                          \
      fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                                \
      exit(1);                                                                                        \
    }                                                                                                 \
  } while (0)

#define EXPECT(cond, ...)                                             \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, " (seed %llu)\n", seed);                        \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

/* ---------------------------------------------------------------- values */

static size_t typeSize(ncclDataType_t t) {
  switch (t) {
    case ncclUint8:
      return 1;
    case ncclInt32:
    case ncclFloat32:
      return 4;
    default:
      return 8;
  }
}

static const char* typeName(ncclDataType_t t) {
  return t == ncclUint8 ? "uint8" : t == ncclInt32 ? "int32" : t == ncclFloat32 ? "float" : "double";
}

static double getv(ncclDataType_t t, const void* b, size_t i) {
  switch (t) {
    case ncclUint8:
      return ((const uint8_t*)b)[i];
    case ncclInt32:
      return ((const int32_t*)b)[i];
    case ncclFloat32:
      return ((const float*)b)[i];
    default:
      return ((const double*)b)[i];
  }
}

static void setv(ncclDataType_t t, void* b, size_t i, double v) {
  switch (t) {
    case ncclUint8:
      ((uint8_t*)b)[i] = (uint8_t)v;
      break;
    case ncclInt32:
      ((int32_t*)b)[i] = (int32_t)v;
      break;
    case ncclFloat32:
      ((float*)b)[i] = (float)v;
      break;
    default:
      ((double*)b)[i] = v;
      break;
  }
}

/* Rank r's value at input position k: small integers, so every sum over 16 ranks is exact (uint8 too). */
static double input(ncclDataType_t t, int r, size_t k) {
  unsigned long long h = seed ^ (0x9e3779b97f4a7c15ull * (unsigned long long)(r + 1)) ^ (k * 0xbf58476d1ce4e5b9ull);
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  if (t == ncclUint8) return (double)(h % 16);
  return (double)(h % 201) - 100.0;
}

static double combine(ncclRedOp_t op, double a, double b) {
  switch (op) {
    case ncclProd:
      return a * b;
    case ncclMax:
      return a > b ? a : b;
    case ncclMin:
      return a < b ? a : b;
    default:
      return a + b;
  }
}

/* op over ranks of input(r, k), with avg's one division in the type (float for ncclFloat32). */
static double reduced(ncclDataType_t t, ncclRedOp_t op, int n, size_t k) {
  double acc = input(t, 0, k);
  int r;
  for (r = 1; r < n; ++r) acc = combine(op, acc, input(t, r, k));
  if (op == ncclAvg) acc = t == ncclFloat32 ? (double)((float)acc / (float)n) : acc / n;
  return acc;
}

static void* alloc(size_t elems, ncclDataType_t t) {
  void* p = malloc(elems * typeSize(t) + 1);
  memset(p, 0xa5, elems * typeSize(t) + 1); /* poison */
  return p;
}

/* ---------------------------------------------------------------- collectives */

typedef enum { kAllReduce, kBroadcast, kBcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kGather, kScatter } Coll;
static const char* const kCollNames[] = {"allreduce",     "broadcast", "bcast",  "reduce", "allgather",
                                         "reducescatter", "alltoall",  "gather", "scatter"};

/* Input and output sizes in elements of one rank for `count`. */
static size_t inElems(Coll c, int n, size_t count) {
  return (c == kReduceScatter || c == kAlltoAll || c == kScatter) ? count * (size_t)n : count;
}
static size_t outElems(Coll c, int n, size_t count) {
  return (c == kAllGather || c == kAlltoAll || c == kGather) ? count * (size_t)n : count;
}

/* What rank `rank` must hold at output position j. */
static double expected(Coll c, ncclDataType_t t, ncclRedOp_t op, int n, int root, int rank, size_t count, size_t j) {
  switch (c) {
    case kAllReduce:
    case kReduce:
      return reduced(t, op, n, j);
    case kBroadcast:
    case kBcast:
      return input(t, root, j);
    case kAllGather:
    case kGather:
      return input(t, (int)(j / count), j % count);
    case kReduceScatter:
      return reduced(t, op, n, (size_t)rank * count + j);
    case kAlltoAll:
      return input(t, (int)(j / count), (size_t)rank * count + j % count);
    default: /* scatter */
      return input(t, root, (size_t)rank * count + j);
  }
}

static void runColl(Coll c, ncclComm_t* comms, int n, ncclDataType_t t, ncclRedOp_t op, size_t count, int inPlace,
                    int root) {
  void* send[MAXR];
  void* recv[MAXR];
  void* base[MAXR];
  const size_t in = inElems(c, n, count), out = outElems(c, n, count), es = typeSize(t);
  int r;
  size_t j;
  for (r = 0; r < n; ++r) {
    if (inPlace) {
      /* One buffer per rank, the input placed where the API's in-place rule puts it. */
      base[r] = alloc(in > out ? in : out, t);
      send[r] = recv[r] = base[r];
      if (c == kAllGather) send[r] = (char*)base[r] + (size_t)r * count * es;
      if (c == kGather && r == root) send[r] = (char*)base[r] + (size_t)root * count * es;
      if (c == kReduceScatter) recv[r] = (char*)base[r] + (size_t)r * count * es;
      if (c == kScatter && r == root) recv[r] = (char*)base[r] + (size_t)root * count * es;
    } else {
      base[r] = NULL;
      send[r] = alloc(in, t);
      recv[r] = alloc(out, t);
    }
    for (j = 0; j < in; ++j) setv(t, send[r], j, input(t, r, j));
  }
  NCCLCHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) {
    ncclComm_t m = comms[r];
    switch (c) {
      case kAllReduce:
        NCCLCHECK(ncclAllReduce(send[r], recv[r], count, t, op, m, 0));
        break;
      case kBroadcast:
        NCCLCHECK(ncclBroadcast(send[r], recv[r], count, t, root, m, 0));
        break;
      case kBcast:
        if (!inPlace && r != root) memset(send[r], 0xa5, count * typeSize(t));
        NCCLCHECK(ncclBcast(send[r], count, t, root, m, 0));
        break;
      case kReduce:
        NCCLCHECK(ncclReduce(send[r], recv[r], count, t, op, root, m, 0));
        break;
      case kAllGather:
        NCCLCHECK(ncclAllGather(send[r], recv[r], count, t, m, 0));
        break;
      case kReduceScatter:
        NCCLCHECK(ncclReduceScatter(send[r], recv[r], count, t, op, m, 0));
        break;
      case kAlltoAll:
        NCCLCHECK(ncclAlltoAll(send[r], recv[r], count, t, m, 0));
        break;
      case kGather:
        NCCLCHECK(ncclGather(send[r], recv[r], count, t, root, m, 0));
        break;
      case kScatter:
        NCCLCHECK(ncclScatter(send[r], recv[r], count, t, root, m, 0));
        break;
    }
  }
  NCCLCHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) {
    const void* got = c == kBcast ? send[r] : recv[r];
    size_t wrong = 0, first = 0;
    if ((c == kReduce || c == kGather) && r != root) continue;
    for (j = 0; j < out; ++j) {
      if (getv(t, got, j) != expected(c, t, op, n, root, r, count, j)) {
        if (wrong++ == 0) first = j;
      }
    }
    EXPECT(wrong == 0, "%s %s op %d count %zu root %d%s: rank %d has %zu wrong, first at %zu: %g, expected %g",
           kCollNames[c], typeName(t), (int)op, count, root, inPlace ? " in place" : "", r, wrong, first,
           getv(t, got, first), expected(c, t, op, n, root, r, count, first));
  }
  for (r = 0; r < n; ++r) {
    if (inPlace) {
      free(base[r]);
    } else {
      free(send[r]);
      free(recv[r]);
    }
  }
}

static void everyCollective(ncclComm_t* comms, int n) {
  static const ncclDataType_t kTypes[] = {ncclUint8, ncclInt32, ncclFloat32, ncclFloat64};
  static const size_t kCounts[] = {0, 1, 1009, 70001};
  int c, ti, ci, inPlace;
  for (c = kAllReduce; c <= kScatter; ++c) {
    for (ti = 0; ti < 4; ++ti) {
      for (ci = 0; ci < 4; ++ci) {
        for (inPlace = 0; inPlace < 2; ++inPlace) {
          const ncclDataType_t t = kTypes[ti];
          const int hasOp = c == kAllReduce || c == kReduce || c == kReduceScatter;
          ncclRedOp_t op = ncclSum;
          if (hasOp) op = (ncclRedOp_t)((ci + ti + inPlace) % 5);
          if (op == ncclProd || (op == ncclAvg && t != ncclFloat32 && t != ncclFloat64)) op = ncclMax;
          if (c == kAlltoAll && inPlace) continue; /* no in-place form */
          runColl((Coll)c, comms, n, t, op, kCounts[ci], inPlace, (ci + ti) % n);
        }
      }
    }
  }
}

/* ---------------------------------------------------------------- all-to-all-v from send/recv */

static void allToAllV(ncclComm_t* comms, int n) {
  size_t counts[MAXR][MAXR], sdispl[MAXR][MAXR], rdispl[MAXR][MAXR], stotal[MAXR], rtotal[MAXR];
  int32_t* sbuf[MAXR];
  int32_t* rbuf[MAXR];
  int s, d;
  size_t i;
  for (s = 0; s < n; ++s)
    for (d = 0; d < n; ++d) counts[s][d] = (size_t)(((s * 7 + d * 3 + (int)(seed % 5)) % 5) * 131); /* zeros too */
  for (s = 0; s < n; ++s) {
    stotal[s] = rtotal[s] = 0;
    for (d = 0; d < n; ++d) {
      sdispl[s][d] = stotal[s];
      stotal[s] += counts[s][d] + 3; /* gaps between blocks stay untouched */
      rdispl[s][d] = rtotal[s];
      rtotal[s] += counts[d][s] + 3;
    }
    sbuf[s] = (int32_t*)alloc(stotal[s], ncclInt32);
    rbuf[s] = (int32_t*)alloc(rtotal[s], ncclInt32);
    for (i = 0; i < stotal[s]; ++i) sbuf[s][i] = (int32_t)input(ncclInt32, s, i);
  }
  NCCLCHECK(ncclGroupStart());
  for (s = 0; s < n; ++s) {
    for (d = 0; d < n; ++d) {
      NCCLCHECK(ncclSend(sbuf[s] + sdispl[s][d], counts[s][d], ncclInt32, d, comms[s], 0));
      NCCLCHECK(ncclRecv(rbuf[s] + rdispl[s][d], counts[d][s], ncclInt32, d, comms[s], 0));
    }
  }
  NCCLCHECK(ncclGroupEnd());
  for (d = 0; d < n; ++d) {
    for (s = 0; s < n; ++s) {
      size_t wrong = 0;
      for (i = 0; i < counts[s][d]; ++i)
        if (rbuf[d][rdispl[d][s] + i] != (int32_t)input(ncclInt32, s, sdispl[s][d] + i)) ++wrong;
      for (i = 0; i < 3; ++i) /* the gap after the block */
        if ((uint32_t)rbuf[d][rdispl[d][s] + counts[s][d] + i] != 0xa5a5a5a5u) ++wrong;
      EXPECT(wrong == 0, "alltoallv: rank %d's block from %d (%zu elements) has %zu wrong", d, s, counts[s][d], wrong);
    }
    free(sbuf[d]);
    free(rbuf[d]);
  }
}

/* ---------------------------------------------------------------- pre-multiplied sum */

static void preMulSum(ncclComm_t* comms, int n) {
  const size_t count = 4099;
  int32_t* ibuf[MAXR];
  double* dbuf[MAXR];
  int32_t iscalar[MAXR];
  double dscalar[MAXR];
  ncclRedOp_t iop[MAXR], dop[MAXR];
  int r;
  size_t i;
  for (r = 0; r < n; ++r) {
    ibuf[r] = (int32_t*)alloc(count, ncclInt32);
    dbuf[r] = (double*)alloc(count, ncclFloat64);
    for (i = 0; i < count; ++i) {
      ibuf[r][i] = (int32_t)input(ncclInt32, r, i);
      dbuf[r][i] = input(ncclFloat64, r, i);
    }
    iscalar[r] = r + 2;
    dscalar[r] = r % 2 ? 0.5 : 4.0;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&iop[r], &iscalar[r], ncclInt32, ncclScalarHostImmediate, comms[r]));
    NCCLCHECK(ncclRedOpCreatePreMulSum(&dop[r], &dscalar[r], ncclFloat64, ncclScalarDevice, comms[r]));
    EXPECT(iop[r] >= ncclNumOps && dop[r] >= ncclNumOps, "run-time operators start at ncclNumOps");
  }
  NCCLCHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) {
    NCCLCHECK(ncclAllReduce(ibuf[r], ibuf[r], count, ncclInt32, iop[r], comms[r], 0));
    NCCLCHECK(ncclRedOpDestroy(iop[r], comms[r])); /* right after enqueueing, before GroupEnd */
    NCCLCHECK(ncclAllReduce(dbuf[r], dbuf[r], count, ncclFloat64, dop[r], comms[r], 0));
    NCCLCHECK(ncclRedOpDestroy(dop[r], comms[r]));
  }
  NCCLCHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) {
    size_t wrong = 0;
    for (i = 0; i < count; ++i) {
      double iwant = 0, dwant = 0;
      int q;
      for (q = 0; q < n; ++q) {
        iwant += (q + 2) * input(ncclInt32, q, i);
        dwant += (q % 2 ? 0.5 : 4.0) * input(ncclFloat64, q, i);
      }
      if (ibuf[r][i] != (int32_t)iwant || dbuf[r][i] != dwant) ++wrong;
    }
    EXPECT(wrong == 0, "pre-multiplied sum: rank %d has %zu wrong", r, wrong);
    free(ibuf[r]);
    free(dbuf[r]);
  }
}

/* ---------------------------------------------------------------- split, non-blocking init */

static void splitInAGroup(ncclComm_t* comms, int n) {
  ncclComm_t child[MAXR];
  int v[MAXR], r;
  NCCLCHECK(ncclGroupStart());
  for (r = 0; r < n; ++r)
    NCCLCHECK(ncclCommSplit(comms[r], r == 0 && n > 2 ? NCCL_SPLIT_NOCOLOR : r % 2, -r, &child[r], NULL));
  NCCLCHECK(ncclGroupEnd());
  NCCLCHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) {
    v[r] = r;
    if (child[r] != NULL) NCCLCHECK(ncclAllReduce(&v[r], &v[r], 1, ncclInt32, ncclSum, child[r], 0));
  }
  NCCLCHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) {
    int want = 0, size = 0, got = -1, rank = -1, ahead = 0, q;
    if (r == 0 && n > 2) {
      EXPECT(child[r] == NULL, "NCCL_SPLIT_NOCOLOR gives NULL");
      continue;
    }
    for (q = 0; q < n; ++q) {
      if (q % 2 != r % 2 || (q == 0 && n > 2)) continue;
      want += q;
      ++size;
      if (q > r) ++ahead; /* keys are -rank: higher ranks come first */
    }
    NCCLCHECK(ncclCommCount(child[r], &got));
    EXPECT(got == size, "split: rank %d's child has %d ranks, expected %d", r, got, size);
    NCCLCHECK(ncclCommUserRank(child[r], &rank));
    EXPECT(rank == ahead, "split: rank %d became %d, expected %d", r, rank, ahead);
    EXPECT(v[r] == want, "split: allreduce gave %d, expected %d", v[r], want);
    NCCLCHECK(ncclCommDestroy(child[r]));
  }
}

static void nonBlockingInitInAGroup(int n) {
  ncclUniqueId id;
  ncclComm_t comms[MAXR];
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  int r;
  config.blocking = 0;
  NCCLCHECK(ncclGetUniqueId(&id));
  NCCLCHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) {
    ncclResult_t rc = ncclCommInitRankConfig(&comms[r], n, id, r, &config);
    EXPECT(rc == ncclSuccess || rc == ncclInProgress, "non-blocking init returned %s", ncclGetErrorString(rc));
  }
  NCCLCHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) {
    ncclResult_t state = ncclInProgress;
    long polls = 0;
    do {
      NCCLCHECK(ncclCommGetAsyncError(comms[r], &state));
    } while (state == ncclInProgress && ++polls < 100000000L);
    EXPECT(state == ncclSuccess, "rank %d's init ended with %s", r, ncclGetErrorString(state));
  }
  for (r = 0; r < n; ++r) NCCLCHECK(ncclCommDestroy(comms[r]));
}

/* ---------------------------------------------------------------- memory, errors, abort */

static void memoryAndRegistration(ncclComm_t* comms, int n) {
  void* p[MAXR];
  void* handle[MAXR];
  int r;
  size_t i;
  const size_t count = 1000;
  for (r = 0; r < n; ++r) {
    NCCLCHECK(ncclMemAlloc(&p[r], count * sizeof(float)));
    NCCLCHECK(ncclCommRegister(comms[r], p[r], count * sizeof(float), &handle[r]));
    for (i = 0; i < count; ++i) ((float*)p[r])[i] = (float)(r + 1);
  }
  NCCLCHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) NCCLCHECK(ncclAllReduce(p[r], p[r], count, ncclFloat32, ncclSum, comms[r], 0));
  NCCLCHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) {
    EXPECT(((float*)p[r])[count - 1] == (float)(n * (n + 1) / 2), "allreduce on ncclMemAlloc memory");
    NCCLCHECK(ncclCommDeregister(comms[r], handle[r]));
    NCCLCHECK(ncclMemFree(p[r]));
  }
  EXPECT(ncclMemFree(p[0]) == ncclInvalidArgument, "freeing twice is refused");
}

static void errors(ncclComm_t comm) {
  float x = 1;
  ncclResult_t async = ncclInternalError;
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  ncclComm_t never = NULL;
  ncclUniqueId id;
  int i;
  EXPECT(ncclAllReduce(&x, &x, 1, (ncclDataType_t)42, ncclSum, comm, 0) == ncclInvalidArgument, "bad datatype");
  EXPECT(strstr(ncclGetLastError(comm), "datatype 42") != NULL, "the sentence names the datatype: %s",
         ncclGetLastError(comm));
  EXPECT(ncclAllReduce(&x, &x, 1, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 7), comm, 0) == ncclInvalidArgument,
         "an operator never made");
  EXPECT(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess, "rejected calls break nothing");
  for (i = 0; i < 100000; ++i) NCCLCHECK(ncclCommGetAsyncError(comm, &async)); /* a watchdog's tight loop */
  bad.magic = 0;
  NCCLCHECK(ncclGetUniqueId(&id));
  EXPECT(ncclCommInitRankConfig(&never, 1, id, 0, &bad) == ncclInvalidArgument, "a config without its magic");
  EXPECT(strstr(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER") != NULL, "%s", ncclGetLastError(NULL));
  EXPECT(strcmp(ncclGetErrorString(ncclInProgress), ncclGetErrorString(ncclSuccess)) != 0, "distinct strings");
  EXPECT(ncclCommCount(comm, NULL) == ncclInvalidArgument, "NULL count");
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 4, version = 0, r, device = 0;
  ncclComm_t comms[MAXR];
  int devlist[MAXR];
  const char* fixed = getenv("COLLIE_TEST_SEED");
  if (n < 1 || n > MAXR) n = 4;
  seed = fixed ? strtoull(fixed, NULL, 0) : (unsigned long long)time(NULL) * 2654435761ull;
  printf("nccl_clique_test: %d ranks, seed %llu (rerun with COLLIE_TEST_SEED=%llu)\n", n, seed, seed);

  NCCLCHECK(ncclGetVersion(&version));
  EXPECT(version == 21903, "library version %d", version);
#ifdef NCCL_COLLIE
  EXPECT(NCCL_VERSION_CODE == 21903, "header version %d", NCCL_VERSION_CODE);
#else
  printf("nccl_clique_test: built against NCCL's own nccl.h %d.%d.%d, running on the library of version %d\n",
         NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, version);
#endif
  EXPECT(NCCL_VERSION(2, 19, 3) == 21903 && NCCL_VERSION(2, 8, 4) == 2804, "the two version codings");
  EXPECT(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128, "unique id size");

  for (r = 0; r < n; ++r) devlist[r] = 0; /* every rank on "device 0": the host backend accepts repeats */
  NCCLCHECK(ncclCommInitAll(comms, n, devlist));
  NCCLCHECK(ncclCommCuDevice(comms[0], &device));
  for (r = 0; r < n; ++r) {
    int rank = -1, count = -1;
    NCCLCHECK(ncclCommUserRank(comms[r], &rank));
    NCCLCHECK(ncclCommCount(comms[r], &count));
    EXPECT(rank == r && count == n, "rank %d of %d", rank, count);
  }
  everyCollective(comms, n);
  allToAllV(comms, n);
  preMulSum(comms, n);
  splitInAGroup(comms, n);
  memoryAndRegistration(comms, n);
  errors(comms[0]);
  nonBlockingInitInAGroup(n);
  for (r = 0; r < n; ++r) NCCLCHECK(r % 2 ? ncclCommAbort(comms[r]) : ncclCommFinalize(comms[r]));
  for (r = 0; r < n; r += 2) NCCLCHECK(ncclCommDestroy(comms[r]));
  if (failures) {
    printf("nccl_clique_test: %d failures\n", failures);
    return 1;
  }
  printf("PASS: nccl_clique_test, %d ranks\n", n);
  return 0;
}
