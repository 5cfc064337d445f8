// Multi-process allreduce check, one process per rank, started by collie-run,
// mpirun or srun (environment init). Every rank generates every rank's input
// from a shared seed, so each can compute the reference on its own.
// Exit code 0 when every case on this rank is exact.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

int main(int argc, char** argv) {
  const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm, nullptr) != collieSuccess) {
    fprintf(stderr, "init failed: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  collieCommUserRank(comm, &rank);
  collieCommCount(comm, &n);

  // Rank 0's seed reaches everyone through an allreduce in which the others add zero.
  uint64_t seed = rank == 0 ? collie::test::testSeed() : 0;
  if (collieAllReduce(&seed, &seed, 1, collieUint64, collieSum, comm, nullptr) != collieSuccess) {
    fprintf(stderr, "seed allreduce failed: %s\n", collieGetLastError(comm));
    return 1;
  }

  std::vector<size_t> counts = {0, 1, 1009, 100003};
  if (quick) counts = {1, 1009};
  int failures = 0, cases = 0;
  for (collieDataType_t type : collie::test::allTypes()) {
    for (collieRedOp_t op : collie::test::allOps()) {
      for (size_t count : counts) {
        const size_t bytes = count * collie::typeSize(type);
        std::vector<std::vector<char>> inputs(static_cast<size_t>(n), std::vector<char>(bytes + 1));
        std::vector<const void*> ptrs;
        for (int r = 0; r < n; ++r) {
          collie::test::fillInput(type, op, r, seed, inputs[static_cast<size_t>(r)].data(), count);
          ptrs.push_back(inputs[static_cast<size_t>(r)].data());
        }
        std::vector<char> expected(bytes + 1);
        collie::test::referenceAllReduce(type, op, ptrs, count, expected.data());
        for (bool inPlace : {false, true}) {
          std::vector<char> send = inputs[static_cast<size_t>(rank)];
          std::vector<char> recv(bytes + 1);
          if (inPlace)
            recv = send;
          else
            collie::test::poison(recv.data(), bytes + 1);
          collieResult_t rc =
              collieAllReduce(inPlace ? recv.data() : send.data(), recv.data(), count, type, op, comm, nullptr);
          ++cases;
          std::string first;
          size_t wrong = rc == collieSuccess
                             ? collie::test::countWrong(type, recv.data(), expected.data(), count, &first)
                             : count + 1;
          if (rc != collieSuccess) first = collieGetLastError(comm);
          if (wrong != 0) {
            ++failures;
            fprintf(stderr, "FAIL rank %d/%d %s %s count %zu %s: %zu wrong, %s (seed %llu)\n", rank, n,
                    collie::typeName(type), collie::opName(op), count, inPlace ? "in-place" : "out-of-place", wrong,
                    first.c_str(), static_cast<unsigned long long>(seed));
            if (rc != collieSuccess) return 1;  // the communicator is broken; stop here
          }
        }
      }
    }
  }
  collieCommDestroy(comm);
  if (rank == 0 || failures)
    printf("rank %d: %d/%d allreduce cases exact on %d ranks\n", rank, cases - failures, cases, n);
  return failures ? 1 : 0;
}
