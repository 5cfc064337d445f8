// Multi-process check of every implemented collective, one process per rank,
// started by collie-run, mpirun or srun (environment init). Every rank
// generates every rank's input from a shared seed, so each computes its own
// reference. Exit code 0 when every case on this rank is exact.
//   collectives_mp [--quick]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

using collie::test::Coll;

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

  // Rank 0's seed reaches everyone through a broadcast.
  uint64_t seed = rank == 0 ? collie::test::testSeed() : 0;
  if (collieBroadcast(&seed, &seed, 1, collieUint64, 0, comm, nullptr) != collieSuccess) {
    fprintf(stderr, "seed broadcast failed: %s\n", collieGetLastError(comm));
    return 1;
  }

  const std::vector<size_t> counts = quick ? std::vector<size_t>{1, 1009} : std::vector<size_t>{0, 1, 1009, 100003};
  int failures = 0, cases = 0;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce}) {
    for (collieDataType_t type : collie::test::allTypes()) {
      for (collieRedOp_t op : collie::test::allOps()) {
        if (!collie::test::collHasOp(coll) && op != collieSum) continue;
        for (size_t count : counts) {
          const size_t es = collie::typeSize(type);
          const size_t inCount = collie::test::collInputCount(coll, n, count);
          const size_t outCount = collie::test::collOutputCount(coll, n, count);
          const int root = static_cast<int>((count + static_cast<size_t>(type)) % static_cast<size_t>(n));
          std::vector<std::vector<char>> inputs(static_cast<size_t>(n), std::vector<char>(inCount * es + 1));
          std::vector<const void*> ptrs;
          for (int r = 0; r < n; ++r) {
            collie::test::fillInput(type, op, r, seed, inputs[static_cast<size_t>(r)].data(), inCount);
            ptrs.push_back(inputs[static_cast<size_t>(r)].data());
          }
          std::vector<char> expected(outCount * es + 1);
          collie::test::referenceCollective(coll, type, op, ptrs, count, root, rank, expected.data());
          std::vector<char> send = inputs[static_cast<size_t>(rank)];
          std::vector<char> recv(outCount * es + 1);
          collie::test::poison(recv.data(), recv.size());
          // Out-of-place only here; in-place is covered with ranks as threads (tests/unit).
          const collieResult_t rc =
              collie::test::callCollective(coll, send.data(), recv.data(), count, type, op, root, comm);
          ++cases;
          if (rc != collieSuccess) {
            fprintf(stderr, "FAIL rank %d/%d %s: %s\n", rank, n, collie::test::collName(coll),
                    collieGetLastError(comm));
            return 1;  // the communicator is broken; stop here
          }
          if (coll == Coll::kReduce && rank != root) continue;
          std::string first;
          const size_t wrong = collie::test::countWrong(type, recv.data(), expected.data(), outCount, &first);
          if (wrong != 0) {
            ++failures;
            fprintf(stderr, "FAIL rank %d/%d %s %s %s count %zu root %d: %zu wrong, %s (seed %llu)\n", rank, n,
                    collie::test::collName(coll), collie::typeName(type), collie::opName(op), count, root, wrong,
                    first.c_str(), static_cast<unsigned long long>(seed));
          }
        }
      }
    }
  }
  collieCommDestroy(comm);
  if (rank == 0 || failures)
    printf("rank %d: %d/%d collective cases exact on %d ranks\n", rank, cases - failures, cases, n);
  return failures ? 1 : 0;
}
