// Program files run in communicators (COLLIE_ALGO=COLLECTIVE:file:PATH): every collective's built-in algorithms,
// exported to files (collie-sim export's code), run through the public C API on the host backend with ranks as
// threads, as algorithms_api_test runs the built-in ones: the types of the sweep, operators rotated, counts that
// are multiples of the file's chunks (0, one chunk each, 13 and many, the last in several rounds with tiny slots),
// in place and out of place, roots varied; inputs random (seed printed), outputs poisoned, references
// independent. And what a file cannot run is refused: a count its chunks do not divide, a file for another rank
// count or collective, a file the verifier refutes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "algorithms/tuner.h"
#include "collie.h"
#include "common/coll_map.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/reduce_ops.h"

namespace {

using collie::test::Coll;
using collie::test::ScopedEnv;

using collie::test::TempFile;

struct Param {
  const collie::AlgorithmInfo* algo;
  int nranks;
  bool tinySlots;  // 4 KiB slots, 2 per connection: many rounds, full FIFOs
};

class ProgramFileRunTest : public ::testing::TestWithParam<Param> {};

bool rooted(collie::Collective c) {
  return c == collie::Collective::kBroadcast || c == collie::Collective::kReduce || c == collie::Collective::kGather ||
         c == collie::Collective::kScatter;
}

TEST_P(ProgramFileRunTest, ExactAsTheBuiltInAlgorithm) {
  const Param p = GetParam();
  Coll coll;
  ASSERT_TRUE(collie::test::toColl(p.algo->collective, &coll));
  // Rooted collectives: the file is for one root, so every case uses it.
  const int root = rooted(p.algo->collective) ? p.nranks - 1 : 0;
  const int perNode = p.algo->nodeAware && p.nranks % 2 == 0 ? 2 : 0;
  std::string text;
  uint64_t chunks = 0;
  ASSERT_TRUE(collie::exportAlgorithm(*p.algo, p.nranks, root, perNode, &text, &chunks).ok());
  TempFile file(text, ".json");
  const uint64_t seed = collie::test::testSeed();
  const std::string spec = std::string(collie::collectiveName(p.algo->collective)) + ":file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", p.tinySlots ? "4096" : nullptr);
  ScopedEnv slots("COLLIE_SLOTS", p.tinySlots ? "2" : nullptr);
  collie::test::Comms comms(p.nranks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t several = (p.tinySlots ? 3 * 1024 + 5 : 65537) / chunks + 1;
  int cases = 0;
  const std::string err = collie::test::runSweep(
      comms, coll, p.tinySlots, {0, chunks, 13 * chunks, several * chunks}, [root](int) { return root; }, seed, spec,
      &cases);
  ASSERT_EQ(err, "");
  printf("%s %s as a file (%llu chunks), nranks %d%s: %d cases exact (%s; counts 0, 1, 13 and %zu chunks)\n",
         collie::collectiveName(p.algo->collective), p.algo->name, static_cast<unsigned long long>(chunks), p.nranks,
         p.tinySlots ? " tiny slots" : "", cases, collie::test::sweepTypesLabel(p.nranks, p.tinySlots).c_str(),
         several);
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (const collie::AlgorithmInfo& a : collie::algorithms()) {
    Coll unused;
    if (a.collective == collie::Collective::kAllToAllv || a.mapsPeers || !collie::test::toColl(a.collective, &unused))
      continue;  // a file holds neither per-call counts nor direct steps
    v.push_back({&a, 3, false});
    v.push_back({&a, 4, true});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Registry, ProgramFileRunTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(collie::collectiveName(info.param.algo->collective)) + "_" + info.param.algo->name + "_n" +
         std::to_string(info.param.nranks) + (info.param.tinySlots ? "_tinyslots" : "");
});

std::string exported(const char* collective, const char* name, int n) {
  collie::Collective c;
  EXPECT_TRUE(collie::collectiveFromName(collective, &c));
  std::string text;
  uint64_t chunks = 0;
  EXPECT_TRUE(collie::exportAlgorithm(*collie::findAlgorithm(c, name), n, 0, 0, &text, &chunks).ok());
  return text;
}

TEST(ProgramFileRun, ACountItsChunksDoNotDivideFailsOnEveryRank) {
  TempFile file(exported("allreduce", "ring", 3), ".json");  // 3 chunks
  const std::string spec = "allreduce:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<float*> bufs(3, nullptr);
  for (float*& b : bufs) ASSERT_EQ(collieMemAlloc(reinterpret_cast<void**>(&b), 8 * sizeof(float)), collieSuccess);
  std::vector<collieResult_t> results(3, collieSuccess);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < 3; ++r)
    results[static_cast<size_t>(r)] = collieAllReduce(bufs[static_cast<size_t>(r)], bufs[static_cast<size_t>(r)], 7,
                                                      collieFloat32, collieSum, comms[r], nullptr);
  const collieResult_t end = collieGroupEnd();
  EXPECT_NE(end, collieSuccess);
  const std::string why = collieGetLastError(comms[0]);
  EXPECT_NE(why.find("count 7 is not a multiple of the 3 chunks of program file " + file.path), std::string::npos)
      << why;
  for (float* b : bufs) collieMemFree(b);
}

TEST(ProgramFileRun, ARootOtherThanTheFilesFailsOnEveryRank) {
  collie::Collective c = collie::Collective::kBroadcast;
  std::string text;
  uint64_t chunks = 0;
  ASSERT_TRUE(collie::exportAlgorithm(*collie::findAlgorithm(c, "binomial"), 3, 2, 0, &text, &chunks).ok());
  TempFile file(text, ".json");
  const std::string spec = "broadcast:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<float*> bufs(3, nullptr);
  for (float*& b : bufs) ASSERT_EQ(collieMemAlloc(reinterpret_cast<void**>(&b), 8 * sizeof(float)), collieSuccess);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < 3; ++r)
    (void)collieBroadcast(bufs[static_cast<size_t>(r)], bufs[static_cast<size_t>(r)], 8, collieFloat32, 0, comms[r],
                          nullptr);
  EXPECT_NE(collieGroupEnd(), collieSuccess);
  const std::string why = collieGetLastError(comms[1]);
  EXPECT_NE(why.find("root 0, but program file " + file.path + " (COLLIE_ALGO) is for root 2"), std::string::npos)
      << why;
  for (float* b : bufs) collieMemFree(b);
}

TEST(ProgramFileRun, AFileForAnotherRankCountIsRefusedAtInit) {
  TempFile file(exported("allreduce", "ring", 4), ".json");
  const std::string spec = "allreduce:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  collie::test::Comms comms(3);
  EXPECT_EQ(comms.result, collieInvalidUsage);
  const std::string why = collieGetLastError(nullptr);
  EXPECT_NE(why.find("is for 4 ranks; this communicator has 3"), std::string::npos) << why;
}

TEST(ProgramFileRun, AFileOfAnotherCollectiveIsRefused) {
  TempFile file(exported("allgather", "ring", 3), ".json");
  const std::string spec = "allreduce:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  collie::test::Comms comms(3);
  EXPECT_EQ(comms.result, collieInvalidArgument);
  const std::string why = collieGetLastError(nullptr);
  EXPECT_NE(why.find("the file is a allgather, not a allreduce"), std::string::npos) << why;
}

TEST(ProgramFileRun, AFileTheVerifierRefutesIsRefusedAtInit) {
  std::string text = exported("allreduce", "ring", 3);
  const size_t at = text.find(",\"finalize\":true");
  ASSERT_NE(at, std::string::npos);
  text.erase(at, std::string(",\"finalize\":true").size());
  TempFile file(text, ".json");
  const std::string spec = "allreduce:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  collie::test::Comms comms(3);
  EXPECT_EQ(comms.result, collieInvalidArgument);
  const std::string why = collieGetLastError(nullptr);
  EXPECT_NE(why.find("output was never finalized"), std::string::npos) << why;
}

// A file with max_bytes serves the calls up to that size; above it the tuner picks, so a count the file's chunks
// do not divide runs there, and fails (naming the file) inside the range.
TEST(ProgramFileRun, AFileServesOnlyItsByteRange) {
  std::string text = exported("allreduce", "ring", 3);  // 3 chunks
  const size_t at = text.find("\"chunks\": 3,\n");
  ASSERT_NE(at, std::string::npos) << text;
  text.insert(at, "\"max_bytes\": 120,\n  ");  // 30 floats
  TempFile file(text, ".json");
  const std::string spec = "allreduce:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  EXPECT_STREQ(comms[0]->algorithmFor(collie::Collective::kAllReduce, 120)->name, "file:ring");
  EXPECT_STRNE(comms[0]->algorithmFor(collie::Collective::kAllReduce, 124)->name, "file:ring");
  std::vector<float*> bufs(3, nullptr);
  for (float*& b : bufs) ASSERT_EQ(collieMemAlloc(reinterpret_cast<void**>(&b), 301 * sizeof(float)), collieSuccess);
  auto allreduce = [&](size_t count) {
    for (float* b : bufs) std::fill(b, b + count, 1.0f);
    EXPECT_EQ(collieGroupStart(), collieSuccess);
    for (int r = 0; r < 3; ++r)
      (void)collieAllReduce(bufs[static_cast<size_t>(r)], bufs[static_cast<size_t>(r)], count, collieFloat32, collieSum,
                            comms[r], nullptr);
    return collieGroupEnd();
  };
  EXPECT_NE(allreduce(7), collieSuccess);  // 28 bytes: the file's, and 7 is not a multiple of its 3 chunks
  const std::string why = collieGetLastError(comms[0]);
  EXPECT_NE(why.find("count 7 is not a multiple of the 3 chunks of program file " + file.path), std::string::npos)
      << why;
  ASSERT_EQ(allreduce(301), collieSuccess) << collieGetLastError(comms[0]);  // 1204 bytes: the tuner's
  for (float* b : bufs)
    for (size_t i = 0; i < 301; ++i) ASSERT_EQ(b[i], 3.0f) << i;
  for (float* b : bufs) collieMemFree(b);
}

// collieConfig_t.algo names a file as COLLIE_ALGO does, and its entry replaces the variable's.
TEST(ProgramFileRun, TheConfigNamesAFile) {
  TempFile file(exported("allreduce", "ring", 3), ".json");
  const std::string spec = "allreduce:file:" + file.path;
  ScopedEnv algo("COLLIE_ALGO", "allreduce:rd;broadcast:chain");
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  std::vector<collieComm_t> made(3, nullptr);
  std::vector<collieResult_t> results(3, collieSuccess);
  collie::test::onRanks(3, [&](int r) {
    collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
    config.algo = spec.c_str();
    results[static_cast<size_t>(r)] = collieCommInitRankConfig(&made[static_cast<size_t>(r)], 3, id, r, &config);
  });
  collie::test::Comms comms(made);
  for (collieResult_t r : results) ASSERT_EQ(r, collieSuccess) << collieGetLastError(nullptr);
  EXPECT_STREQ(comms[1]->algorithmFor(collie::Collective::kAllReduce, 1 << 20)->name, "file:ring");
  EXPECT_STREQ(comms[1]->algorithmFor(collie::Collective::kBroadcast, 1 << 20)->name, "chain");
}

}  // namespace
