#include "common/collective_case.h"

#include <cstring>

#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace test {

std::string runCollectiveCase(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count,
                              bool inPlace, int root, uint64_t seed) {
  const int n = comms.size();
  const size_t es = collie::typeSize(type), block = count * es;
  const size_t inCount = collie::test::collInputCount(coll, n, count);
  const size_t outCount = collie::test::collOutputCount(coll, n, count);
  std::vector<std::vector<char>> in(n, std::vector<char>(inCount * es + 1)),
      out(n, std::vector<char>(outCount * es + 1));
  std::vector<const void*> inputs;
  for (int r = 0; r < n; ++r) {
    collie::test::fillInput(type, op, r, seed, in[r].data(), inCount);
    inputs.push_back(in[r].data());
  }
  std::vector<std::vector<char>> want(n, std::vector<char>(outCount * es + 1));
  for (int r = 0; r < n; ++r) collie::test::referenceCollective(coll, type, op, inputs, count, root, r, want[r].data());
  // In place: the input lives inside the output where the API says so.
  std::vector<char*> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    collie::test::poison(out[r].data(), out[r].size());
    recv[r] = out[r].data();
    send[r] = in[r].data();
    if (!inPlace) continue;
    if (coll == Coll::kReduceScatter) {
      out[r] = in[r];  // recvbuff = sendbuff + r * recvcount
      recv[r] = out[r].data() + r * block;
      send[r] = out[r].data();
    } else if (coll == Coll::kAllGather) {
      memcpy(out[r].data() + r * block, in[r].data(), block);  // sendbuff = recvbuff + r * sendcount
      send[r] = out[r].data() + r * block;
    } else {
      memcpy(out[r].data(), in[r].data(), block);
      send[r] = out[r].data();
    }
  }
  const std::vector<std::vector<char>> inCopy = in;  // out-of-place must leave sendbuff alone
  std::vector<collieResult_t> rc(n);
  onRanks(n, [&](int r) {
    void* s = count ? send[r] : nullptr;
    void* d = count ? recv[r] : nullptr;
    rc[r] = collie::test::callCollective(coll, s, d, count, type, op, root, comms[r]);
  });
  for (int r = 0; r < n; ++r) {
    if (rc[r] != collieSuccess) return "rank " + std::to_string(r) + ": " + collieGetLastError(comms[r]);
    if (!inPlace && out[r].back() != 0x7b) return "rank " + std::to_string(r) + " wrote past the end of recvbuff";
    if (!inPlace && in[r] != inCopy[r]) return "rank " + std::to_string(r) + " modified sendbuff";
    if (coll == Coll::kReduce && r != root) continue;  // recvbuff is the root's only
    std::string first;
    const size_t wrong = collie::test::countWrong(type, recv[r], want[r].data(),
                                                  coll == Coll::kReduceScatter ? count : outCount, &first);
    if (wrong) return "rank " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong, " + first;
  }
  return "";
}

}  // namespace test
}  // namespace collie
