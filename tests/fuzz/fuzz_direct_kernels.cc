// Fuzz target direct_kernels: a differential check of the direct kernels' bodies (kernels/direct_kernels.h) under
// the CPU emulation against the host reference of tests/unit/direct_kernels_case.h (the reduction in rank order
// with the shared operators). Not a parser: the input chooses a short sequence of calls on one set of ranks.
//
//   byte 0   ranks 2..8 (mod 7)             byte 1   blocks 1..3, threads per block 1..3; its top bit also: the
//                                           peers count as other processes (World::mapAsProcesses)
//   then per call, 6 bytes (up to 4 calls):
//     kernel (mod 7), type (mod 12), operator (mod 6; premulsum is one-shot only, else sum),
//     count (two bytes, little-endian, mod 1200), placement (bit 0 in place, bit 1 different offsets per rank; bit 2:
//     a one-shot runs in one launch serving every rank, World::runGrouped)
//   the bytes after the last call seed the inputs and offsets
//
// Checks: every byte of every rank's buffers after each call is the reference's output where the output lies, and
// what was there before elsewhere; no call fails or is refused.
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"
#include "tests/unit/direct_kernels_case.h"

namespace collie {
namespace fuzz {

int directKernels(const uint8_t* data, size_t size) {
  using test::direct::Call;
  using test::direct::TestOp;
  if (size < 2 + 6) return 0;
  const int n = 2 + data[0] % 7;
  const int blocks = 1 + data[1] % 3, threads = 1 + (data[1] / 3) % 3;
  size_t at = 2;
  struct Shape {
    DirectKind kind;
    collieDataType_t type;
    TestOp op;
    uint64_t count;
    bool inPlace, sameOffsets, grouped;
  };
  std::vector<Shape> shapes;
  while (shapes.size() < 4 && at + 6 <= size) {
    const uint8_t* b = data + at;
    Shape s;
    s.kind = static_cast<DirectKind>(b[0] % kDirectKinds);
    s.type = static_cast<collieDataType_t>(b[1] % collieNumTypes);
    s.op = static_cast<TestOp>(b[2] % test::direct::kTestOps);
    if (s.op == TestOp::kPreMulSum && s.kind != DirectKind::kOneShotAllReduce) s.op = TestOp::kSum;
    if (directMovesWords(s.kind)) s.op = TestOp::kSum;
    s.count = (static_cast<uint64_t>(b[3]) | static_cast<uint64_t>(b[4]) << 8) % 1200;
    s.inPlace = (b[5] & 1) != 0;
    s.sameOffsets = (b[5] & 2) == 0;
    s.grouped = (b[5] & 4) != 0 && s.kind == DirectKind::kOneShotAllReduce;
    shapes.push_back(s);
    at += 6;
  }
  std::seed_seq seeds(data + at, data + size);
  std::mt19937_64 rng(seeds);
  std::vector<Call> calls;
  for (const Shape& s : shapes)
    calls.push_back(test::direct::makeCall(s.kind, s.type, s.op, s.count, s.inPlace, n, &rng, s.sameOffsets));
  // (An all-to-all-v's blocks may reach 1202 elements each: gaps and 16-byte rounding.)
  test::direct::World world(n, blocks, threads, 1210 * 8 * static_cast<uint64_t>(n) + 256,
                            static_cast<uint32_t>(directLines(1200 * 8)), 10ull * 1000 * 1000 * 1000);
  // The second byte's top bit: the peers count as other processes (their buffers through the windows' table).
  if ((data[1] & 0x80) != 0) world.mapAsProcesses();
  // Consecutive calls of one form run together: launches per rank with no join between calls, grouped ones each
  // in one launch.
  std::vector<std::string> wrong;
  for (size_t i = 0; i < calls.size() && wrong.empty();) {
    size_t j = i + 1;
    while (j < calls.size() && shapes[j].grouped == shapes[i].grouped) ++j;
    const std::vector<Call> part(calls.begin() + static_cast<std::ptrdiff_t>(i),
                                 calls.begin() + static_cast<std::ptrdiff_t>(j));
    wrong = shapes[i].grouped ? world.runGrouped(part) : world.run(part);
    i = j;
  }
  std::string all;
  for (const std::string& w : wrong) all += w + "\n";
  COLLIE_FUZZ_CHECK(wrong.empty(), all);
  return 0;
}

}  // namespace fuzz
}  // namespace collie
