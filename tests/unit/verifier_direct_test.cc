// Direct programs (algorithms/program.h, "Direct steps"): the algorithms built of them, and the verifier's checks
// of them, each shown to catch a program broken on purpose: a write-write race, a read of what a peer writes in the
// same epoch (a one-shot that reduces into its output in place), a put out of bounds, a missing contribution,
// unmatched barriers, a peer reached outside the barriers. Then what the simulator and collie-sim make of them,
// and the host backend refusing them with a sentence rather than running them wrong. That every direct algorithm
// verifies for 1..64 ranks, every count and placement of the sweep, is verifier_test's EveryAlgorithm.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/memory_traffic.h"
#include "algorithms/registry.h"
#include "algorithms/simulator.h"
#include "algorithms/topology.h"
#include "algorithms/tuner.h"
#include "algorithms/verifier.h"
#include "algorithms/verify_sweep.h"
#include "collie.h"
#include "common/rank_threads.h"

namespace {

using collie::Buffer;
using collie::Collective;
using collie::Program;
using collie::Range;
using collie::Step;
using collie::StepOp;

const collie::AlgorithmInfo& algo(Collective c, const char* name) {
  const collie::AlgorithmInfo* a = collie::findAlgorithm(c, name);
  EXPECT_NE(a, nullptr) << name;
  return *a;
}

std::vector<Program> programs(Collective c, const char* name, int n, uint64_t count, int root = 0) {
  return collie::buildPrograms(algo(c, name), n, count, count, root);
}

// The verifier's message for `p`, which must be refused, and whose message must hold `want`.
void expectRefused(const std::vector<Program>& p, const std::string& want, bool inPlace = false) {
  collie::VerifyOptions o;
  o.inPlace = inPlace;
  const collie::Status s = collie::verifyPrograms(p, o);
  ASSERT_FALSE(s.ok()) << "expected: " << want;
  EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
}

// The index of rank r's step of kind `op` number `k` (0: the first).
size_t stepOf(const Program& p, StepOp op, int k = 0) {
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (p.steps[i].op == op && k-- == 0) return i;
  ADD_FAILURE() << "no such step";
  return 0;
}

struct Direct {
  Collective collective;
  const char* name;
};
const Direct kDirect[] = {{Collective::kAllReduce, "direct_oneshot"}, {Collective::kAllReduce, "direct_twoshot"},
                          {Collective::kReduceScatter, "direct"},     {Collective::kAllGather, "direct"},
                          {Collective::kAllToAll, "direct"},          {Collective::kBroadcast, "direct"},
                          {Collective::kAllToAllv, "direct"}};

TEST(DirectAlgorithms, AreRegisteredAsNeedingMappedPeersAndTunedOnlyWhereMapped) {
  for (const Direct& d : kDirect) {
    const collie::AlgorithmInfo& a = algo(d.collective, d.name);
    EXPECT_TRUE(a.mapsPeers) << d.name;
    EXPECT_NE(collie::defaultAlgorithm(d.collective), &a);
    for (const collie::Topology& t : collie::builtinTopologies())
      for (uint64_t bytes : {uint64_t{8}, uint64_t{1} << 16, uint64_t{64} << 20})
        EXPECT_FALSE(collie::tunedAlgorithm(d.collective, bytes, 8, t)->mapsPeers) << t.name << " " << bytes;
    // COLLIE_ALGO takes the name as registered, and with '-' or capitals as for every name.
    std::map<Collective, const collie::AlgorithmInfo*> chosen;
    const std::string spec = std::string(collie::collectiveName(d.collective)) + ":" + d.name;
    ASSERT_TRUE(collie::parseAlgorithmOverrides(spec, &chosen).ok()) << spec;
    EXPECT_EQ(chosen[d.collective], &a);
  }
  std::map<Collective, const collie::AlgorithmInfo*> chosen;
  ASSERT_TRUE(collie::parseAlgorithmOverrides("allreduce:Direct-TwoShot", &chosen).ok());
  EXPECT_EQ(chosen[Collective::kAllReduce], &algo(Collective::kAllReduce, "direct_twoshot"));
}

// direct_ce (allgather, alltoall(v), broadcast) is the direct program under its own name, which the CUDA executor
// moves by the copy engine: step for step the same on every rank, so the verifier's proof of one is the other's,
// and named only: the tuner never answers with it, mapped peers or not.
TEST(DirectAlgorithms, CopyEngineFormsAreTheDirectProgramsNamedOnly) {
  const collie::Topology* shared = collie::findTopology("h200-shared");
  ASSERT_NE(shared, nullptr);
  for (Collective c : {Collective::kAllGather, Collective::kAllToAll, Collective::kBroadcast, Collective::kAllToAllv}) {
    const collie::AlgorithmInfo& ce = algo(c, "direct_ce");
    EXPECT_TRUE(ce.mapsPeers);
    EXPECT_TRUE(ce.namedOnly);
    EXPECT_EQ(algo(c, "direct").namedOnly, c == Collective::kAllToAllv);
    for (int n : {2, 3, 8}) {
      const std::vector<Program> mine = programs(c, "direct_ce", n, 1001, n - 1);
      const std::vector<Program> theirs = programs(c, "direct", n, 1001, n - 1);
      ASSERT_EQ(mine.size(), theirs.size());
      for (size_t r = 0; r < mine.size(); ++r) {
        EXPECT_EQ(mine[r].algorithm, "direct_ce");
        ASSERT_EQ(mine[r].steps.size(), theirs[r].steps.size()) << collie::collectiveName(c) << " rank " << r;
        for (size_t i = 0; i < mine[r].steps.size(); ++i) {
          const Step &a = mine[r].steps[i], &b = theirs[r].steps[i];
          EXPECT_TRUE(a.op == b.op && a.sendPeer == b.sendPeer && a.recvPeer == b.recvPeer &&
                      a.src.buffer == b.src.buffer && a.src.offset == b.src.offset && a.dst.buffer == b.dst.buffer &&
                      a.dst.offset == b.dst.offset && a.count == b.count)
              << collie::collectiveName(c) << " on " << n << " ranks, rank " << r << " step " << i;
        }
      }
      collie::Topology t = *shared;
      t.nranks = n;
      for (uint64_t bytes : {uint64_t{8}, uint64_t{1} << 16, uint64_t{64} << 20, uint64_t{1} << 30}) {
        EXPECT_FALSE(collie::tunedAlgorithm(c, bytes, n, t, true)->namedOnly) << bytes;
        EXPECT_FALSE(collie::tunedAlgorithm(c, bytes, n, t, false)->namedOnly) << bytes;
      }
    }
  }
}

// Where the ranks map each other's buffers (COLLIE_DIRECT_TUNE, core/comm.h), the tuner weighs the direct
// algorithms beside the others: on a GPU the ranks share, a large call of each collective that has one goes direct
// (each moves the least bytes through the memory, algorithms/memory_traffic.h), and every answer is one the
// simulator ranks first. The same question without them, asked after, is answered without them: the cache keeps
// the two apart.
TEST(DirectAlgorithms, TheTunerWeighsThemWhereAsked) {
  const collie::Topology* shared = collie::findTopology("h200-shared");
  ASSERT_NE(shared, nullptr);
  for (int n : {2, 4, 8}) {
    collie::Topology t = *shared;
    t.nranks = n;
    for (const Direct& d : kDirect) {
      if (d.collective == Collective::kAllReduce && std::string(d.name) == "direct_oneshot") continue;
      if (algo(d.collective, d.name).namedOnly) continue;  // all-to-all-v: never weighed (registry.h)
      const uint64_t bytes = uint64_t{64} << 20;
      const collie::AlgorithmInfo* weighed = collie::tunedAlgorithm(d.collective, bytes, n, t, true);
      EXPECT_TRUE(weighed->mapsPeers) << collie::collectiveName(d.collective) << " on " << n << ": " << weighed->name;
      EXPECT_FALSE(collie::tunedAlgorithm(d.collective, bytes, n, t, false)->mapsPeers);
      // The winner's predicted time is the least of all (ties to the first registered).
      collie::ProgramArgs call;
      call.collective = d.collective;
      call.nranks = n;
      call.count = bytes / 4;
      collie::Prediction best;
      ASSERT_TRUE(collie::predict(*weighed, call, 4, t, &best).ok());
      for (const collie::AlgorithmInfo& a : collie::algorithms()) {
        collie::Prediction p;
        if (a.collective != d.collective || !collie::predict(a, call, 4, t, &p).ok()) continue;
        EXPECT_LE(best.seconds, p.seconds) << a.name << " beats " << weighed->name << " on " << n << " ranks";
      }
    }
  }
}

// Shapes the sweep covers too, here by name: ranks that do not divide the count, count 0, one rank, both
// placements; every program holds only direct steps and local ones, with as many barriers on every rank.
TEST(DirectAlgorithms, VerifyForUnevenCountsCountZeroAndBothPlacements) {
  for (const Direct& d : kDirect) {
    for (int n : {1, 2, 3, 5, 8}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{13}, static_cast<uint64_t>(n) + 1}) {
        const std::vector<Program> p = programs(d.collective, d.name, n, count, n - 1);
        for (const Program& q : p) {
          EXPECT_TRUE(collie::hasDirectSteps(q));
          for (const Step& s : q.steps)
            EXPECT_TRUE(collie::stepIsDirect(s.op) || s.op == StepOp::kCopy) << collie::stepOpName(s.op);
          EXPECT_FALSE(collie::stepSends(StepOp::kPutPeer) || collie::stepReceives(StepOp::kPutPeer));
        }
        for (bool inPlace : {false, true}) {
          uint64_t in = 0, out = 0;
          if (inPlace && !collie::inPlaceBases(p[0], &in, &out)) continue;
          collie::VerifyOptions o;
          o.inPlace = inPlace;
          const collie::Status s = collie::verifyPrograms(p, o);
          EXPECT_TRUE(s.ok()) << d.name << " n " << n << " count " << count << ": " << s.message();
        }
      }
    }
  }
}

// Every rank's all-to-all-v arguments on n ranks: `count` elements to every peer, blocks packed in peer order.
std::vector<collie::ProgramArgs> vArgs(int n, uint64_t count) {
  std::vector<collie::ProgramArgs> args(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    collie::ProgramArgs& a = args[static_cast<size_t>(r)];
    a.collective = Collective::kAllToAllv;
    a.nranks = n;
    a.rank = r;
    a.sendCounts.assign(static_cast<size_t>(n), count);
    a.recvCounts = a.sendCounts;
    for (int j = 0; j < n; ++j) a.sendDispls.push_back(static_cast<uint64_t>(j) * count);
    a.recvDispls = a.sendDispls;
  }
  return args;
}

// All-to-all-v's direct programs with uneven counts, zeros and shuffled displacements (randomSplits); a rank's puts
// name no offset in the peer's output, which the verifier takes from the peer's program.
TEST(DirectAlgorithms, AllToAllvVerifiesForRandomSplits) {
  std::mt19937_64 rng(5);
  for (int n : {2, 3, 5, 8})
    for (uint64_t most : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{40}}) {
      std::vector<collie::ProgramArgs> args = vArgs(n, most);
      collie::randomSplits(n, most, rng, &args);
      std::vector<Program> p;
      for (const collie::ProgramArgs& a : args) p.push_back(collie::buildAllToAllvDirect(a));
      const collie::Status s = collie::verifyPrograms(p);
      EXPECT_TRUE(s.ok()) << "n " << n << " counts up to " << most << ": " << s.message();
    }
}

// A block put whose count is more than its peer receives from it, or one that names its own offset in the peer's
// output instead of the peer's displacement: both caught.
TEST(DirectVerifier, CatchesAnAllToAllvBlockPutWrong) {
  std::vector<collie::ProgramArgs> args = vArgs(3, 4);
  args[2].recvCounts[0] = 3;  // rank 0 still sends 4
  args[2].recvDispls = {4, 0, 8};
  std::vector<Program> p;
  for (const collie::ProgramArgs& a : args) p.push_back(collie::buildAllToAllvDirect(a));
  const Step& put = p[0].steps[stepOf(p[0], StepOp::kPutPeer, 1)];
  ASSERT_EQ(put.sendPeer, 2);
  ASSERT_TRUE(put.peerDispl);
  expectRefused(p,
                "rank 0 step 3 (putPeer), epoch 1: puts [0, 4) of its block into rank 2's output, which receives "
                "3 elements from it");
  args[2].recvCounts[0] = 4;
  p.clear();
  for (const collie::ProgramArgs& a : args) p.push_back(collie::buildAllToAllvDirect(a));
  EXPECT_TRUE(collie::verifyPrograms(p).ok());
  p[0].steps[stepOf(p[0], StepOp::kPutPeer, 1)].peerDispl = false;  // lands at rank 2's element 0, rank 1's block
  expectRefused(p,
                "rank 1 step 2 (putPeer), epoch 1: race: writes element 0 of rank 2's output, which rank 0 writes "
                "in the same epoch (its step 3)");
}

TEST(DirectVerifier, CatchesTwoRanksWritingOneElement) {
  // Two-shot on 3 ranks: rank 1 stores its chunk into chunk 0 of rank 2's output, which rank 0 stores there.
  std::vector<Program> p = programs(Collective::kAllReduce, "direct_twoshot", 3, 6);
  Step& put = p[1].steps[stepOf(p[1], StepOp::kPutPeer)];
  ASSERT_EQ(put.sendPeer, 2);
  put.dst.offset = 0;
  expectRefused(p,
                "rank 1 step 2 (putPeer), epoch 1: race: writes element 0 of rank 2's output, which rank 0 writes in "
                "the same epoch (its step 3)");
}

TEST(DirectVerifier, CatchesAReadOfWhatAPeerWritesInTheSameEpoch) {
  // A one-shot that reduces straight into the output, no scratch: out of place it is right; in place each rank
  // overwrites its input while the others still read it.
  std::vector<Program> p = programs(Collective::kAllReduce, "direct_oneshot", 3, 4);
  for (Program& q : p) {
    q.steps[stepOf(q, StepOp::kReducePeers)].dst = Range{Buffer::kOutput, 0};
    q.steps.pop_back();  // the copy out of scratch
  }
  EXPECT_TRUE(collie::verifyPrograms(p).ok());
  expectRefused(p,
                "rank 0 step 1 (reducePeers), epoch 1: race: reads element 0 of rank 2's input, which rank 2 writes "
                "in the same epoch (its step 1)",
                true);
  // And the other way round: a write of what a peer has read in the epoch. Rank 2, the last to reach the first
  // barrier, runs on first and reads block 2 of every input; rank 0 then stores into block 2 of rank 1's.
  std::vector<Program> q = programs(Collective::kReduceScatter, "direct", 3, 2);
  q[0].steps.insert(q[0].steps.begin() + 2,
                    collie::putPeerStep(1, Range{Buffer::kOutput, 0}, Range{Buffer::kInput, 4}, 1));
  expectRefused(q,
                "rank 0 step 2 (putPeer), epoch 1: race: writes element 4 of rank 1's input, which rank 2 reads in "
                "the same epoch (its step 1)");
}

TEST(DirectVerifier, CatchesAPutOutOfBounds) {
  // Allgather on 4 ranks of 3 elements: rank 3's block moved one element on, past the end of rank 1's output.
  std::vector<Program> p = programs(Collective::kAllGather, "direct", 4, 3);
  Step& put = p[3].steps[stepOf(p[3], StepOp::kPutPeer, 1)];
  ASSERT_EQ(put.sendPeer, 1);
  put.dst.offset += 1;
  expectRefused(p, "rank 3 step 3 (putPeer), epoch 1: puts into rank 1's output [10, 13), outside its 12 elements");
  // A reduce that reads a rank the communicator does not have.
  std::vector<Program> q = programs(Collective::kReduceScatter, "direct", 3, 2);
  q[0].steps[1].peerCount = 4;
  expectRefused(q, "rank 0 step 1 (reducePeers), epoch 1: reads ranks 0..3, which are not ranks of the 3");
  // And a broadcast rank that reads its own input, which only the root has.
  std::vector<Program> b = programs(Collective::kBroadcast, "direct", 3, 5, 0);
  b[2].steps[1].recvPeer = 2;
  expectRefused(b, "rank 2 step 1 (reducePeers), epoch 1: reads rank 2's input [0, 5), outside its 0 elements");
}

TEST(DirectVerifier, CatchesAMissingContribution) {
  // Two-shot on 4 ranks: rank 2 reduces its chunk from ranks 1..3 only; the chunk it then stores everywhere
  // lacks rank 0's input.
  std::vector<Program> p = programs(Collective::kAllReduce, "direct_twoshot", 4, 8);
  Step& reduce = p[2].steps[stepOf(p[2], StepOp::kReducePeers)];
  reduce.recvPeer = 1;
  reduce.peerCount = 3;
  expectRefused(p, "rank 0 step 6 (end): output holds the wrong set of contributions at element 4");
}

TEST(DirectVerifier, CatchesUnmatchedBarriers) {
  // Rank 2 of a reduce-scatter leaves out its last barrier: rank 0 would wait in it forever.
  std::vector<Program> p = programs(Collective::kReduceScatter, "direct", 3, 2);
  p[2].steps.pop_back();
  expectRefused(p,
                "rank 0 step 2 (barrier), epoch 1: deadlock: waits forever in barrier 1, which rank 2 does not have "
                "(it has 1 barriers, this rank 2)");
}

TEST(DirectVerifier, CatchesAPeerReachedOutsideTheBarriers) {
  // Without the first barrier a rank may read a peer's input before the peer has entered the call.
  std::vector<Program> p = programs(Collective::kReduceScatter, "direct", 3, 2);
  for (Program& q : p) q.steps.erase(q.steps.begin());
  expectRefused(p,
                "rank 0 step 0 (reducePeers), epoch 0: reaches rank 1's input before the first barrier, where rank 1 "
                "may not have entered the call yet");
  // A store after the last barrier may land after the peer has returned.
  std::vector<Program> q = programs(Collective::kAllGather, "direct", 3, 2);
  std::swap(q[1].steps[q[1].steps.size() - 1], q[1].steps[q[1].steps.size() - 2]);
  expectRefused(q,
                "rank 1 step 4 (putPeer), epoch 2: reaches rank 0's output after the last barrier, where rank 0 may "
                "have returned from the call");
}

TEST(DirectVerifier, CatchesShapesADirectProgramMustNotHave) {
  // A send through slots in a direct program.
  std::vector<Program> p = programs(Collective::kReduceScatter, "direct", 2, 2);
  p[0].steps.insert(p[0].steps.begin() + 1,
                    collie::makeStep(StepOp::kSend, 1, -1, Range{Buffer::kInput, 0}, Range{}, 1));
  expectRefused(p, "rank 0 step 1 (send), epoch 1: sends or receives through slots in a direct program");
  // A copy whose source and destination overlap shifted: element by element at once it reads what it overwrote.
  std::vector<Program> q = programs(Collective::kAllReduce, "direct_oneshot", 2, 4);
  q[1].steps.back() =
      collie::makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kScratch, 0}, Range{Buffer::kScratch, 1}, 3);
  expectRefused(q, "rank 1 step 3 (copy), epoch 2: reads scratch [0, 3) and writes scratch [1, 4) of its own memory");
  // A barrier that finalizes.
  std::vector<Program> b = programs(Collective::kAllGather, "direct", 2, 2);
  b[1].steps.back().finalize = true;
  expectRefused(b, "rank 1 step 3 (barrier), epoch 1: finalizes a value it does not write");
}

TEST(DirectPrograms, DescribeAndTrafficCountThePeersMemory) {
  const std::vector<Program> p = programs(Collective::kAllReduce, "direct_twoshot", 3, 6);
  const std::string text = p[1].describe();
  EXPECT_NE(text.find("reducePeers     ranks 0..2 in[2] -> out[2] n=2 final"), std::string::npos) << text;
  EXPECT_NE(text.find("putPeer         out[2] -> rank 2 out[2] n=2"), std::string::npos) << text;
  EXPECT_NE(text.find("---- end of epoch 1 ----"), std::string::npos) << text;
  // Chunks of 2: three read and one written by the reduce, two puts each reading and writing one.
  EXPECT_EQ(collie::memoryTrafficElems(p[1]), 4 * 2 + 2 * 2 * 2u);
}

TEST(DirectSimulator, AnEpochCostsItsBusiestPortAndABarrierOneAlpha) {
  const collie::Topology& t = *collie::findTopology("h100-nvlink");
  const double alpha = t.link(collie::LinkClass::kNvlink).alpha, beta = t.link(collie::LinkClass::kNvlink).beta;
  collie::ProgramArgs call;
  call.collective = Collective::kAllReduce;
  call.nranks = 8;
  collie::Prediction p;
  // A few bytes: the epoch's first-byte latency and two barriers.
  call.count = 2;
  ASSERT_TRUE(collie::predict(algo(Collective::kAllReduce, "direct_twoshot"), call, 4, t, &p).ok());
  EXPECT_EQ(p.barriers, 2u);
  EXPECT_NEAR(p.seconds, 3 * alpha, 0.05 * alpha);
  // 64 MiB: each rank's port carries 7/8 of the buffer in (its chunk of every input) and out; so does the
  // allgather half, in the same epoch and on the same ports: 2 x 7/8 of the buffer through each port.
  call.count = uint64_t{16} << 20;
  ASSERT_TRUE(collie::predict(algo(Collective::kAllReduce, "direct_twoshot"), call, 4, t, &p).ok());
  const double port = 2.0 * 7 / 8 * (64 << 20) * beta;
  EXPECT_NEAR(p.seconds, port + 3 * alpha, 0.01 * port);
  EXPECT_EQ(p.slices, 8u * 14);  // per rank 7 reads of peers and 7 puts
  // Every direct algorithm is predicted, every root, 1 to 9 ranks, count 0 included.
  for (const Direct& d : kDirect) {
    for (int n : {1, 2, 5, 9}) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{1000003}}) {
        collie::ProgramArgs c;
        c.collective = d.collective;
        c.nranks = n;
        c.count = count;
        c.root = n - 1;
        collie::Prediction q;
        const collie::Status s = collie::predict(algo(d.collective, d.name), c, 2, t, &q);
        ASSERT_TRUE(s.ok()) << d.name << ": " << s.message();
        EXPECT_EQ(q.barriers, 2u) << d.name;
        if (count > 1 && n > 1) {
          EXPECT_GT(q.seconds, 2 * alpha) << d.name;
        }
      }
    }
  }
}

// COLLIE_ALGO may name a direct algorithm, but the host backend cannot run it, nor the CUDA kernels emulated on
// it: every rank's call fails with a sentence that says why, and nothing hangs or crashes.
class DirectOnTheHost : public ::testing::TestWithParam<const char*> {};

TEST_P(DirectOnTheHost, IsRefusedWithAClearError) {
  collie::test::ScopedEnv device("COLLIE_DEVICE", "host");
  collie::test::ScopedEnv emulated("COLLIE_TEST_EMULATE_KERNELS", GetParam());
  collie::test::ScopedEnv chosen("COLLIE_ALGO", "allreduce:direct_twoshot");
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieResult_t> results(3, collieSuccess);
  std::vector<std::string> errors(3);
  collie::test::onRanks(3, [&](int r) {
    std::vector<float> in(64, 1.0f), out(64, 0.0f);
    results[static_cast<size_t>(r)] =
        collieAllReduce(in.data(), out.data(), in.size(), collieFloat32, collieSum, comms[r], nullptr);
    errors[static_cast<size_t>(r)] = collieGetLastError(comms[r]);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(results[static_cast<size_t>(r)], collieInvalidUsage) << r;
    EXPECT_NE(errors[static_cast<size_t>(r)].find("allreduce direct_twoshot needs ranks that map each other's "
                                                  "buffers"),
              std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_NE(errors[static_cast<size_t>(r)].find("not available on the host"), std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
}

INSTANTIATE_TEST_SUITE_P(Executors, DirectOnTheHost, ::testing::Values(nullptr, "2"),
                         [](const auto& info) { return std::string(info.param ? "emulated" : "host"); });

}  // namespace
