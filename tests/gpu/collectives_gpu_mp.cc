// The CUDA backend with ranks as processes (peers' windows through cudaIpc),
// all on the GPUs of one machine, started by collie-run. Every rank makes
// every rank's input from the shared seed, so it computes its own reference.
// Calls alternate between a stream of ours and the legacy default stream.
//   collectives_gpu_mp --probe   exit 77 (skip), saying why, when no GPU is usable
//   collectives_gpu_mp           the cases; exit 0 when all are exact on this rank
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_usable.h"

using collie::test::Coll;

int main(int argc, char** argv) {
  const int probe = collie::test::gpuProbeAndPickLocal(argc, argv);
  if (probe >= 0) return probe;
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.backend = collieBackendCuda;
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm, &config) != collieSuccess) {
    fprintf(stderr, "FAIL init: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 1;
  collieCommUserRank(comm, &rank);
  collieCommCount(comm, &n);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  // Rank 0's seed reaches everyone through a broadcast (itself on the GPU).
  uint64_t seed = rank == 0 ? collie::test::testSeed() : 0;
  uint64_t* dSeed = nullptr;
  cudaMalloc(&dSeed, sizeof(seed));
  cudaMemcpy(dSeed, &seed, sizeof(seed), cudaMemcpyHostToDevice);
  if (collieBroadcast(dSeed, dSeed, 1, collieUint64, 0, comm, stream) != collieSuccess ||
      cudaStreamSynchronize(stream) != cudaSuccess) {
    fprintf(stderr, "FAIL seed broadcast: %s\n", collieGetLastError(comm));
    return 1;
  }
  cudaMemcpy(&seed, dSeed, sizeof(seed), cudaMemcpyDeviceToHost);
  cudaFree(dSeed);
  int failures = 0, cases = 0;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce,
                    Coll::kAllToAll, Coll::kGather, Coll::kScatter}) {
    for (collieDataType_t type : {collieFloat32, collieBfloat16, collieInt32}) {
      for (size_t count : {size_t{0}, size_t{1001}, size_t{1} << 20}) {
        const collieRedOp_t op = collieSum;
        const int root = n - 1;
        const size_t es = collie::typeSize(type);
        const size_t inCount = collie::test::collInputCount(coll, n, count);
        const size_t outCount = collie::test::collOutputCount(coll, n, count);
        std::vector<std::vector<char>> inputs(n, std::vector<char>(inCount * es + 1));
        std::vector<const void*> ptrs;
        for (int r = 0; r < n; ++r) {
          collie::test::fillInput(type, op, r, seed, inputs[r].data(), inCount);
          ptrs.push_back(inputs[r].data());
        }
        std::vector<char> want(outCount * es + 1), got(outCount * es + 1);
        collie::test::referenceCollective(coll, type, op, ptrs, count, root, rank, want.data());
        char *dIn = nullptr, *dOut = nullptr;
        cudaMalloc(&dIn, inCount * es + 1);
        cudaMalloc(&dOut, outCount * es + 1);
        cudaMemcpy(dIn, inputs[rank].data(), inCount * es, cudaMemcpyHostToDevice);
        ++cases;
        // bf16 calls go to the legacy default stream, as PyTorch's do (its current stream), the others to ours.
        cudaStream_t s = type == collieBfloat16 ? nullptr : stream;
        collieResult_t rc = collie::test::callCollective(coll, count ? dIn : nullptr, count ? dOut : nullptr, count,
                                                         type, op, root, comm, s);
        if (rc == collieSuccess) rc = cudaStreamSynchronize(s) == cudaSuccess ? rc : collieUnhandledCudaError;
        collieResult_t async = collieSuccess;
        collieCommGetAsyncError(comm, &async);
        if (rc != collieSuccess || async != collieSuccess) {
          fprintf(stderr, "FAIL rank %d/%d %s %s count %zu: %s\n", rank, n, collie::test::collName(coll),
                  collie::typeName(type), count, collieGetLastError(comm));
          return 1;  // the communicator is broken now
        }
        const bool rootOnly = collie::test::collRootOutputOnly(coll);
        if (!rootOnly || rank == root) {
          cudaMemcpy(got.data(), dOut, outCount * es, cudaMemcpyDeviceToHost);
          const bool oneBlock = coll == Coll::kReduceScatter || coll == Coll::kScatter;
          std::string first;
          const size_t wrong =
              collie::test::countWrong(type, got.data(), want.data(), oneBlock ? count : outCount, &first);
          if (wrong) {
            fprintf(stderr, "FAIL rank %d/%d %s %s count %zu: %zu wrong, %s (seed %llu)\n", rank, n,
                    collie::test::collName(coll), collie::typeName(type), count, wrong, first.c_str(),
                    static_cast<unsigned long long>(seed));
            ++failures;
          }
        }
        cudaFree(dIn);
        cudaFree(dOut);
      }
    }
  }
  cudaStreamDestroy(stream);
  collieCommDestroy(comm);
  printf("rank %d/%d: %d GPU cases across processes, %d failed (seed %llu)\n", rank, n, cases, failures,
         static_cast<unsigned long long>(seed));
  return failures ? 1 : 0;
}
