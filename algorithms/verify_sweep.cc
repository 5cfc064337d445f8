#include "algorithms/verify_sweep.h"

#include <algorithm>

#include "algorithms/verifier.h"

namespace collie {

namespace {

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

// One entry of SweepOptions::counts at n ranks.
bool resolveCount(const std::string& token, int n, uint64_t* count) {
  const uint64_t un = static_cast<uint64_t>(n);
  if (token == "n") {
    *count = un;
  } else if (token == "n-1") {
    *count = n > 1 ? un - 1 : 2;
  } else if (token == "n+1") {
    *count = un + 1;
  } else {
    if (token.empty() || token.size() > 18 || token.find_first_not_of("0123456789") != std::string::npos) return false;
    *count = std::stoull(token);
  }
  return true;
}

// Every rank's arguments for one call; all-to-all-v: `count` to every peer, packed in peer order.
std::vector<ProgramArgs> callArgs(const AlgorithmInfo& algo, int n, uint64_t count, uint64_t stride, int root) {
  std::vector<ProgramArgs> args(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ProgramArgs& a = args[static_cast<size_t>(r)];
    a.collective = algo.collective;
    a.nranks = n;
    a.rank = r;
    a.count = count;
    a.stride = stride;
    a.root = root;
    if (algo.collective == Collective::kAllToAllv) {
      a.sendCounts.assign(static_cast<size_t>(n), count);
      a.recvCounts = a.sendCounts;
      for (int j = 0; j < n; ++j) a.sendDispls.push_back(static_cast<uint64_t>(j) * count);
      a.recvDispls = a.sendDispls;
    }
  }
  return args;
}

// The node sizes a call on n ranks is proved with: every divisor of n for a
// node-aware algorithm (1 and n included), else only "no nodes".
std::vector<int> nodeSizes(const AlgorithmInfo& algo, int n) {
  if (!algo.nodeAware) return {0};
  std::vector<int> sizes;
  for (int l = 1; l <= n; ++l)
    if (n % l == 0) sizes.push_back(l);
  return sizes;
}

std::vector<Program> buildAll(const AlgorithmInfo& algo, const std::vector<ProgramArgs>& args) {
  std::vector<Program> programs;
  programs.reserve(args.size());
  for (const ProgramArgs& a : args) programs.push_back(buildProgram(algo, a));
  return programs;
}

}  // namespace

std::vector<Program> buildPrograms(const AlgorithmInfo& algo, int n, uint64_t count, uint64_t stride, int root,
                                   int ranksPerNode) {
  std::vector<ProgramArgs> args = callArgs(algo, n, count, stride, root);
  for (ProgramArgs& a : args) a.ranksPerNode = ranksPerNode;
  return buildAll(algo, args);
}

void randomSplits(int n, uint64_t maxCount, std::mt19937_64& rng, std::vector<ProgramArgs>* args) {
  const size_t un = static_cast<size_t>(n);
  std::vector<std::vector<uint64_t>> counts(un, std::vector<uint64_t>(un));
  for (auto& row : counts)
    for (auto& c : row) c = rng() % 3 == 0 ? 0 : rng() % (maxCount + 1);
  auto displs = [&](const std::vector<uint64_t>& sizes) {
    std::vector<size_t> order(sizes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<uint64_t> d(sizes.size());
    uint64_t at = 0;
    for (size_t i : order) {
      d[i] = at;
      at += sizes[i] + rng() % 2;
    }
    return d;
  };
  for (size_t r = 0; r < un; ++r) {
    ProgramArgs& a = (*args)[r];
    a.sendCounts = counts[r];
    a.recvCounts.resize(un);
    for (size_t j = 0; j < un; ++j) a.recvCounts[j] = counts[j][r];
    a.sendDispls = displs(a.sendCounts);
    a.recvDispls = displs(a.recvCounts);
  }
}

uint64_t tightestSlice(const AlgorithmInfo& algo, int n, uint64_t count, int ranksPerNode) {
  // The step moving the most elements of a round of `count` moves count / parts.
  const auto part = [count](int parts) {
    return std::max<uint64_t>((count + static_cast<uint64_t>(parts) - 1) / static_cast<uint64_t>(parts), 1);
  };
  switch (algo.rounds) {
    case RoundRule::kOneSlot:
      return std::max<uint64_t>(count, 1);
    case RoundRule::kRankSlots:
      return part(n);
    case RoundRule::kNodeSlots:
      return part(nodeSize(n, ranksPerNode));
    case RoundRule::kFile:  // verifyFileSlots proves a file's rounds
    case RoundRule::kNone:
      break;
  }
  return 1;
}

Status verifyAlgorithm(const AlgorithmInfo& algo, const SweepOptions& options, long* proved) {
  *proved = 0;
  if (options.maxRanks < 1 || options.maxRanks > 64)
    return Status::error(collieInvalidArgument, "%s %s: maxRanks %d is not in 1..64 (the verifier's limit)",
                         collectiveName(algo.collective), algo.name, options.maxRanks);
  std::mt19937_64 rng(options.seed);
  for (int n = 1; n <= options.maxRanks; ++n) {
    std::vector<int> roots = rooted(algo.collective) ? std::vector<int>{0, n / 2, n - 1} : std::vector<int>{0};
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    for (int root : roots) {
      for (const std::string& token : options.counts) {
        uint64_t count = 0;
        if (!resolveCount(token, n, &count))
          return Status::error(collieInvalidArgument, "%s %s: count '%s' is not a number or n, n-1, n+1",
                               collectiveName(algo.collective), algo.name, token.c_str());
        for (uint64_t stride : {count, count + 3}) {
          for (int perNode : nodeSizes(algo, n)) {
            std::vector<ProgramArgs> args = callArgs(algo, n, count, stride, root);
            for (ProgramArgs& a : args) a.ranksPerNode = perNode;
            if (algo.collective == Collective::kAllToAllv) randomSplits(n, count, rng, &args);
            const std::vector<Program> programs = buildAll(algo, args);
            // Joined steps (program.h) run as one or one after another, by the executor's primitives: both.
            bool joins = false;
            for (const Program& p : programs)
              for (const Step& st : p.steps) joins = joins || st.joined;
            // Exchanges that may run as a batch (program.h, exchangeGroupEnd) run so or one after another: both.
            bool groups = false;
            for (const Program& p : programs)
              for (int t = 0; t < static_cast<int>(p.steps.size()) && !groups; ++t)
                groups = exchangeGroupEnd(p.steps.data(), static_cast<int>(p.steps.size()), t) > t + 1;
            for (int mode = 0; mode < (joins ? 4 : 2); ++mode) {
              const bool inPlace = (mode & 1) != 0;
              uint64_t in = 0, out = 0;
              if (inPlace && !inPlaceBases(programs[0], &in, &out)) continue;
              for (int variant = 0; variant < (groups ? 4 : 2); ++variant) {
                const bool tight = (variant & 1) != 0;
                VerifyOptions vo;
                vo.inPlace = inPlace;
                vo.joinReceives = mode < 2;
                vo.batchExchanges = variant < 2;
                if (tight) {
                  vo.nslots = 2;
                  vo.sliceElems = tightestSlice(algo, n, count, perNode);
                }
                const Status s = verifyPrograms(programs, vo);
                if (!s.ok()) {
                  const std::string slots =
                      (tight ? "two slots of " + std::to_string(vo.sliceElems) : "unbounded slots") +
                      (vo.joinReceives ? "" : ", joined steps one after another") +
                      (vo.batchExchanges ? "" : ", exchanges one after another");
                  return s.withContext(std::string(collectiveName(algo.collective)) + " " + algo.name + ", n " +
                                       std::to_string(n) +
                                       (perNode > 0 ? " in nodes of " + std::to_string(perNode) : "") + ", root " +
                                       std::to_string(root) + ", count " + std::to_string(count) + ", stride " +
                                       std::to_string(stride) + ", " + (inPlace ? "in place" : "out of place") + ", " +
                                       slots + " (seed " + std::to_string(options.seed) + ")");
                }
                ++*proved;
              }
            }
          }
        }
      }
    }
  }
  return Status();
}

}  // namespace collie
