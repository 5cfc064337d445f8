// The direct kernels' launch checks, and their CPU emulation (kernels/direct_kernels.h): the bodies of
// direct_allreduce_block.cuh compiled by g++ over kernels/device_ops.cuh's host operations, each block a group of
// the emulator's host threads. The same for the ceiling kernels (kernels/ceiling_kernels.h), whose move is theirs.
// Built in every configuration, like emulator.cc: tests/unit/direct_kernels_test.cc and the fake-CUDA launchers run it.
#include <cstdint>

#include "kernels/ceiling_block.cuh"
#include "kernels/direct_allreduce_block.cuh"
#include "kernels/direct_kernels.h"
#include "kernels/emulator.h"

namespace collie {

int checkDirectLaunch(const DirectArgs& a, DirectKind kind, collieDataType_t type, ReduceOp op, int blocks, int threads,
                      const char** why) {
  auto refuse = [&](const char* reason) {
    *why = reason;
    return static_cast<int>(collieInvalidArgument);
  };
  const size_t size = typeSize(type);
  if (size == 0) return refuse("unknown data type");
  if (a.nranks < 2 || a.nranks > kDirectMaxRanks) return refuse("nranks outside 2..8");
  if (a.rank < 0 || a.rank >= a.nranks) return refuse("rank outside 0..nranks-1");
  if (a.counter == nullptr) return refuse("no call counter");
  if (blocks < 1 || blocks > kDirectMaxBlocks) return refuse("blocks outside 1..kDirectMaxBlocks");
  if (threads < 1 || threads > kDirectMaxThreads) return refuse("threads outside 1..kDirectMaxThreads");
  if (a.error == nullptr) return refuse("no error record");
  if (a.count > directMaxCount(kind, size, a.nranks)) return refuse("count over kDirectMaxBytes");
  if (a.premul != 0 && (kind != DirectKind::kOneShotAllReduce || op != ReduceOp::kSum))
    return refuse("a pre-multiplied sum is a one-shot allreduce's only");
  if (a.divisor < 0) return refuse("negative divisor");
  if (kind == DirectKind::kBroadcast && (a.root < 0 || a.root >= a.nranks)) return refuse("root outside 0..nranks-1");
  if (kind == DirectKind::kAllToAllv) {
    // Every block inside the extent (an empty one may carry any displacement); a side that moves nothing may be
    // null.
    uint64_t sent = 0, received = 0;
    for (int p = 0; p < a.nranks; ++p) {
      if ((a.sendCount[p] > 0 && uint64_t{a.sendDispl[p]} + a.sendCount[p] > a.count) ||
          (a.recvCount[p] > 0 && uint64_t{a.recvDispl[p]} + a.recvCount[p] > a.count))
        return refuse("an all-to-all-v block past the count (its extent)");
      sent += a.sendCount[p];
      received += a.recvCount[p];
    }
    if ((sent > 0 && a.input == nullptr) || (received > 0 && a.output == nullptr))
      return refuse("input or output missing");
  } else if (a.count > 0 && (a.input == nullptr || a.output == nullptr)) {
    // (A call of count 0 touches neither: NCCL's callers may pass null then.)
    return refuse("input or output missing");
  }
  for (int p = 0; p < a.nranks; ++p) {
    if (kind == DirectKind::kOneShotAllReduce && a.scratch[p] == nullptr) return refuse("a rank's scratch is missing");
    if (kind != DirectKind::kOneShotAllReduce && a.barriers[p] == nullptr)
      return refuse("a rank's barrier flags are missing");
  }
  if (kind == DirectKind::kOneShotAllReduce && directLines(a.count * size) > a.slotLines)
    return refuse("a one-shot call larger than its scratch slots");
  if (!hasDirectKernel(kind, type, op, a.nranks)) return refuse("no kernel for this type, operator and rank count");
  return 0;
}

int checkDirectGroupLaunch(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, int threads,
                           const char** why) {
  if (g.nranks < 2 || g.nranks > kDirectMaxRanks) {
    *why = "nranks outside 2..8";
    return static_cast<int>(collieInvalidArgument);
  }
  for (int r = 0; r < g.nranks; ++r) {
    const DirectArgs& a = g.args[r];
    if (a.rank != r || a.nranks != g.nranks) {
      *why = "an entry whose rank or rank count is not its place's";
      return static_cast<int>(collieInvalidArgument);
    }
    const int rc = checkDirectLaunch(a, DirectKind::kOneShotAllReduce, type, op, g.blocks, threads, why);
    if (rc != 0) return rc;
  }
  return 0;
}

const char* ceilingRefusal(const CeilingArgs& a, int blocks, int threads) {
  if (a.nsrc < 1 || a.nsrc > kCeilingMaxSources) return "sources outside 1..8";
  if (a.ndst < 1 || a.ndst > a.nsrc) return "destinations outside 1..sources";
  if (a.count > kDirectMaxBytes / sizeof(float)) return "count over kDirectMaxBytes";
  if (blocks < 1) return "no block";
  if (threads < 1 || threads > kDirectMaxThreads) return "threads outside 1..kDirectMaxThreads";
  for (int p = 0; p < a.nsrc && a.count > 0; ++p)
    if (a.src[p] == nullptr || (p < a.ndst && a.dst[p] == nullptr)) return "a source or destination is missing";
  return nullptr;
}

namespace emu {

int launchCeiling(const CeilingArgs& args, Launcher* launcher) {
  if (ceilingRefusal(args, launcher->blocks(), launcher->threadsPerBlock()) != nullptr) return collieInvalidArgument;
  const int blocks = launcher->blocks();
  direct::visitCeilingSources(args.nsrc, [&](auto nc) {
    launcher->run([&](int b) { direct::ceilingMove<decltype(nc)::value>(args, b, blocks); });
  });
  return 0;
}

int launchDirect(const DirectArgs& args, DirectKind kind, collieDataType_t type, ReduceOp op, Launcher* launcher) {
  const char* why = nullptr;
  const int blocks = launcher->blocks();
  if (checkDirectLaunch(args, kind, type, op, blocks, launcher->threadsPerBlock(), &why) != 0)
    return collieInvalidArgument;
  if (directMovesWords(kind)) {
    visitType(type, [&](auto tag) {
      using W = direct::WordOf<typename decltype(tag)::type>;
      visitDirectRanks(args.nranks, [&](auto nc) {
        launcher->run([&](int b) { direct::moveWords<W, decltype(nc)::value>(args, kind, b, blocks); });
      });
    });
    return 0;
  }
  // One instantiation per type and operator, the rank count at run time (visitDirect): the GPU's kernels for an
  // exact rank count run the same text with that bound folded.
  visitDirect<false>(type, op, args.nranks, [&](auto tag, auto opc, auto nc, auto exact) {
    using T = typename decltype(tag)::type;
    constexpr ReduceOp kOp = decltype(opc)::value;
    constexpr int kN = decltype(nc)::value;
    constexpr bool kExact = decltype(exact)::value;
    if (kind == DirectKind::kOneShotAllReduce)
      launcher->run([&](int b) { direct::oneShotAllReduce<T, kOp, kN, kExact>(args, b, blocks); });
    else
      launcher->run(
          [&](int b) { direct::reduceStore<T, kOp, kN, kExact>(args, kind == DirectKind::kReduceScatter, b, blocks); });
  });
  return 0;
}

int launchDirectGroup(const DirectGroupArgs& g, collieDataType_t type, ReduceOp op, Launcher* launcher) {
  const char* why = nullptr;
  if (launcher->blocks() != g.nranks * g.blocks ||
      checkDirectGroupLaunch(g, type, op, launcher->threadsPerBlock(), &why) != 0)
    return collieInvalidArgument;
  visitDirect<false>(type, op, g.nranks, [&](auto tag, auto opc, auto nc, auto exact) {
    using T = typename decltype(tag)::type;
    launcher->run([&](int b) {
      const int r = b / g.blocks;
      direct::oneShotAllReduce<T, decltype(opc)::value, decltype(nc)::value, decltype(exact)::value>(
          g.args[r], b - r * g.blocks, g.blocks);
    });
  });
  return 0;
}

}  // namespace emu
}  // namespace collie
