// Multi-process check of every collective, one process per rank,
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

// counts[i][j], elements rank i sends to rank j: the same on every rank, from the seed; a quarter zero.
size_t splitCount(uint64_t seed, int i, int j) {
  uint64_t h = seed ^ (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull) ^ (static_cast<uint64_t>(j) << 32);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h % 4 == 0 ? 0 : static_cast<size_t>(h % 20000);
}

// All-to-all-v with uneven splits, then the same exchange as grouped send/recv
// (as torch.distributed.all_to_all_single does over NCCL). Returns the failures.
int allToAllvAndSendRecv(collieComm_t comm, int rank, int n, uint64_t seed, int* cases) {
  std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
  size_t inTotal = 0, outTotal = 0;
  for (int j = 0; j < n; ++j) {
    sc[j] = splitCount(seed, rank, j);
    sd[j] = inTotal;
    inTotal += sc[j];
    rc[j] = splitCount(seed, j, rank);
    rd[j] = outTotal;
    outTotal += rc[j];
  }
  // Element e of rank i's block for j is i * 1e6 + j * 1e3 + e mod 1000, exact in int32.
  auto value = [](int i, int j, size_t e) { return static_cast<int32_t>(i * 1000000 + j * 1000 + e % 1000); };
  std::vector<int32_t> in(inTotal + 1), out(outTotal + 1, -1), out2(outTotal + 1, -1);
  for (int j = 0; j < n; ++j)
    for (size_t e = 0; e < sc[j]; ++e) in[sd[j] + e] = value(rank, j, e);
  int failures = 0;
  auto check = [&](const std::vector<int32_t>& got, const char* what) {
    ++*cases;
    for (int j = 0; j < n; ++j)
      for (size_t e = 0; e < rc[j]; ++e)
        if (got[rd[j] + e] != value(j, rank, e)) {
          fprintf(stderr, "FAIL rank %d/%d %s: element %zu from rank %d is %d, want %d (seed %llu)\n", rank, n, what, e,
                  j, got[rd[j] + e], value(j, rank, e), static_cast<unsigned long long>(seed));
          ++failures;
          return;
        }
  };
  if (collieAllToAllv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), collieInt32, comm, nullptr) !=
      collieSuccess) {
    fprintf(stderr, "FAIL rank %d/%d alltoallv: %s\n", rank, n, collieGetLastError(comm));
    return 1;
  }
  check(out, "alltoallv");
  collieGroupStart();
  for (int j = 0; j < n; ++j) {
    collieSend(in.data() + sd[j], sc[j], collieInt32, j, comm, nullptr);
    collieRecv(out2.data() + rd[j], rc[j], collieInt32, j, comm, nullptr);
  }
  if (collieGroupEnd() != collieSuccess) {
    fprintf(stderr, "FAIL rank %d/%d grouped send/recv: %s\n", rank, n, collieGetLastError(comm));
    return 1;
  }
  check(out2, "grouped send/recv");
  if (collieBarrier(comm, nullptr) != collieSuccess) {
    fprintf(stderr, "FAIL rank %d/%d barrier: %s\n", rank, n, collieGetLastError(comm));
    return 1;
  }
  return failures;
}

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
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce,
                    Coll::kAllToAll, Coll::kGather, Coll::kScatter}) {
    for (collieDataType_t type : collie::test::sweepTypes()) {
      for (collieRedOp_t op : collie::test::allOps()) {
        if (!collie::test::collHasOp(coll) && op != collieSum) continue;
        for (size_t count : counts) {
          // Operators rotated but for float32 and int32, as in the in-process sweeps (test_util.h).
          if (collie::test::collHasOp(coll) && !collie::test::sweepTakesOp(type, op, count + static_cast<size_t>(coll)))
            continue;
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
          if (collie::test::collRootOutputOnly(coll) && rank != root) continue;
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
  failures += allToAllvAndSendRecv(comm, rank, n, seed, &cases);
  collieCommDestroy(comm);
  if (rank == 0 || failures)
    printf("rank %d: %d/%d collective cases exact on %d ranks (%s)\n", rank, cases - failures, cases, n,
           collie::test::sweepTypesLabel().c_str());
  return failures ? 1 : 0;
}
