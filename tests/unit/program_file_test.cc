// Program files (algorithms/program_file.h): every built-in algorithm exported and loaded again gives the
// built-in programs at every count its chunks divide; the loaded programs verify; a file that is not a valid
// program file is refused with a sentence naming the file and the place, never a crash.
#include "algorithms/program_file.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "algorithms/verify_sweep.h"

namespace collie {
namespace {

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

void expectSamePrograms(const std::vector<Program>& got, const std::vector<Program>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < got.size(); ++r) {
    const Program &g = got[r], &w = want[r];
    EXPECT_EQ(g.collective, w.collective) << what << ", rank " << r;
    EXPECT_EQ(g.nranks, w.nranks) << what << ", rank " << r;
    EXPECT_EQ(g.rank, w.rank) << what << ", rank " << r;
    EXPECT_EQ(g.count, w.count) << what << ", rank " << r;
    EXPECT_EQ(g.stride, w.stride) << what << ", rank " << r;
    EXPECT_EQ(g.root, w.root) << what << ", rank " << r;
    EXPECT_EQ(g.scratchCount, w.scratchCount) << what << ", rank " << r;
    EXPECT_TRUE(sameSteps(g.steps, w.steps)) << what << ", rank " << r << "\nloaded:\n"
                                             << g.describe() << "\nbuilt-in:\n"
                                             << w.describe();
  }
}

TEST(ProgramFile, EveryBuiltInAlgorithmRoundTrips) {
  int files = 0;
  for (const AlgorithmInfo& algo : algorithms()) {
    if (algo.collective == Collective::kAllToAllv || algo.mapsPeers) continue;  // a file holds no direct steps
    for (int n : {1, 2, 3, 4, 5, 8}) {
      const int root = rooted(algo.collective) && n > 1 ? 1 : 0;
      const int perNode = algo.nodeAware && n % 2 == 0 ? 2 : 0;
      const std::string what =
          std::string(collectiveName(algo.collective)) + " " + algo.name + " on " + std::to_string(n) + " ranks";
      std::string text;
      uint64_t chunks = 0;
      const Status exported = exportAlgorithm(algo, n, root, perNode, &text, &chunks);
      ASSERT_TRUE(exported.ok()) << what << ": " << exported.message();
      ProgramFile file;
      const Status parsed = parseProgramFile(text, "exported.json", &file);
      ASSERT_TRUE(parsed.ok()) << what << ": " << parsed.message() << "\n" << text;
      EXPECT_EQ(file.name, algo.name);
      EXPECT_EQ(file.chunks, chunks);
      for (uint64_t k : {1, 2, 5, 7}) {
        std::vector<Program> loaded;
        ASSERT_TRUE(programsForCount(file, chunks * k, &loaded).ok()) << what;
        expectSamePrograms(loaded, buildPrograms(algo, n, chunks * k, chunks * k, root, perNode),
                           what + ", count " + std::to_string(chunks * k));
        const Status proved = verifyPrograms(loaded);
        EXPECT_TRUE(proved.ok()) << what << ", count " << chunks * k << ": " << proved.message();
      }
      // Writing what was loaded gives the same text: nothing is lost or added on the way.
      EXPECT_EQ(programFileText(file.programs, file.chunks), text) << what;
      ++files;
    }
  }
  EXPECT_GT(files, 100);
}

TEST(ProgramFile, AllToAllvCannotBeExported) {
  const AlgorithmInfo* a = findAlgorithm(Collective::kAllToAllv, "pairwise");
  ASSERT_NE(a, nullptr);
  std::string text;
  uint64_t chunks = 0;
  const Status st = exportAlgorithm(*a, 4, 0, 0, &text, &chunks);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("per-peer counts"), std::string::npos) << st.message();
}

// A two-rank allreduce written by hand: each rank sends its half of the input to the other, reduces the half it
// keeps with the one it receives (the write that completes it: "finalize"), then they swap the reduced halves.
const char* const kTwoRankAllReduce = R"({
  "collie_program": 1, "collective": "allreduce", "name": "by_hand", "nranks": 2, "chunks": 2,
  "ranks": [
    {"rank": 0, "steps": [
      {"op": "sendRecvReduce", "send": 1, "recv": 1, "src": ["input", 1], "count": 1,
       "dst": ["output", 0], "recv_count": 1, "finalize": true},
      {"op": "sendRecv", "send": 1, "recv": 1, "src": ["output", 0], "count": 1, "dst": ["output", 1],
       "recv_count": 1}]},
    {"rank": 1, "steps": [
      {"op": "sendRecvReduce", "send": 0, "recv": 0, "src": ["input", 0], "count": 1,
       "dst": ["output", 1], "recv_count": 1, "finalize": true},
      {"op": "sendRecv", "send": 0, "recv": 0, "src": ["output", 1], "count": 1, "dst": ["output", 0],
       "recv_count": 1}]}
  ]
})";

TEST(ProgramFile, AFileWrittenByHandLoadsAndItsMistakeIsFound) {
  ProgramFile file;
  Status st = parseProgramFile(kTwoRankAllReduce, "by_hand.json", &file);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(file.programs.size(), 2u);
  std::vector<Program> programs;
  ASSERT_TRUE(programsForCount(file, 6, &programs).ok());
  // The reduce-exchange must seed its dst with the rank's own half first: the file as written reduces into an
  // output nobody wrote, and the verifier says which element lacks which contribution.
  st = verifyPrograms(programs);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("step 0 (sendRecvReduce): reduces an undefined value"), std::string::npos)
      << st.message();
  // With each rank's own half copied into its output first, the file is a correct allreduce.
  std::string fixed = kTwoRankAllReduce;
  const std::string firstOfRank0 = R"({"rank": 0, "steps": [)";
  const std::string firstOfRank1 = R"({"rank": 1, "steps": [)";
  fixed.replace(fixed.find(firstOfRank0), firstOfRank0.size(),
                firstOfRank0 + R"({"op": "copy", "src": ["input", 0], "dst": ["output", 0], "count": 1},)");
  fixed.replace(fixed.find(firstOfRank1), firstOfRank1.size(),
                firstOfRank1 + R"({"op": "copy", "src": ["input", 1], "dst": ["output", 1], "count": 1},)");
  ASSERT_TRUE(parseProgramFile(fixed, "fixed.json", &file).ok());
  for (uint64_t count : {2, 6, 1000}) {
    ASSERT_TRUE(programsForCount(file, count, &programs).ok());
    st = verifyPrograms(programs);
    EXPECT_TRUE(st.ok()) << "count " << count << ": " << st.message();
  }
}

// min_bytes/max_bytes bound the calls a file serves, measured as MSCCL does (fileCallBytes): a rank's block times
// the rank count for the collectives whose count is one block.
TEST(ProgramFile, AByteRangeBoundsTheCallsServed) {
  ProgramFile file;
  ASSERT_TRUE(parseProgramFile(kTwoRankAllReduce, "by_hand.json", &file).ok());
  EXPECT_EQ(file.minBytes, 0u);
  EXPECT_EQ(file.maxBytes, UINT64_MAX);
  std::string text = kTwoRankAllReduce;
  text.replace(text.find("\"chunks\": 2"), 11, "\"chunks\": 2, \"min_bytes\": 64, \"max_bytes\": 4096");
  const Status st = parseProgramFile(text, "ranged.json", &file);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(file.minBytes, 64u);
  EXPECT_EQ(file.maxBytes, 4096u);
  EXPECT_FALSE(fileServes(file, 63));
  EXPECT_TRUE(fileServes(file, 64));
  EXPECT_TRUE(fileServes(file, 4096));
  EXPECT_FALSE(fileServes(file, 4097));
  EXPECT_EQ(fileCallBytes(Collective::kAllReduce, 1000, 8), 1000u);
  EXPECT_EQ(fileCallBytes(Collective::kBroadcast, 1000, 8), 1000u);
  EXPECT_EQ(fileCallBytes(Collective::kAllGather, 1000, 8), 8000u);
  EXPECT_EQ(fileCallBytes(Collective::kReduceScatter, 1000, 8), 8000u);
  EXPECT_EQ(fileCallBytes(Collective::kAllToAll, 1000, 8), 8000u);
  EXPECT_EQ(fileCallBytes(Collective::kAllGather, UINT64_MAX / 2, 8), UINT64_MAX);  // saturates
}

TEST(ProgramFile, AProtocolIsRead) {
  ProgramFile file;
  ASSERT_TRUE(parseProgramFile(kTwoRankAllReduce, "by_hand.json", &file).ok());
  EXPECT_EQ(file.protocol, FileProtocol::kAuto);
  for (const auto& [name, protocol] : {std::pair<const char*, FileProtocol>{"auto", FileProtocol::kAuto},
                                       {"simple", FileProtocol::kSimple},
                                       {"ll", FileProtocol::kLL}}) {
    std::string text = kTwoRankAllReduce;
    text.replace(text.find("\"chunks\": 2"), 11, std::string("\"chunks\": 2, \"protocol\": \"") + name + "\"");
    const Status st = parseProgramFile(text, "protocol.json", &file);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(file.protocol, protocol) << name;
  }
}

TEST(ProgramFile, ACountItsChunksDoNotDivideIsRefused) {
  ProgramFile file;
  ASSERT_TRUE(parseProgramFile(kTwoRankAllReduce, "by_hand.json", &file).ok());
  std::vector<Program> programs;
  const Status st = programsForCount(file, 7, &programs);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("count 7 is not a multiple of its 2 chunks"), std::string::npos) << st.message();
  EXPECT_TRUE(programsForCount(file, 0, &programs).ok());
}

struct BadFile {
  const char* what;
  std::string from, to;  // kTwoRankAllReduce with `from` replaced by `to`; `to` empty and `from` empty: the text
  const char* says;      // part of the error
};

TEST(ProgramFile, BadFilesAreRefusedWithASentence) {
  const std::vector<BadFile> cases = {
      {"truncated", "\"recv_count\": 1}]}\n  ]\n}", "\"recv_count\": 1}]}", "not JSON"},
      {"not an object", "{\n  \"collie_program\"", "[{\n  \"collie_program\"", "not JSON"},
      {"a later version", "\"collie_program\": 1", "\"collie_program\": 9", "\"collie_program\" is 9"},
      {"an unknown collective", "\"allreduce\"", "\"allsum\"", "\"collective\" must name a collective"},
      {"alltoallv", "\"allreduce\"", "\"alltoallv\"", "per-peer counts"},
      {"too many ranks", "\"nranks\": 2", "\"nranks\": 65", "\"nranks\" is 65, outside 1..64"},
      {"ranks that do not match nranks", "\"nranks\": 2", "\"nranks\": 3", "\"ranks\" must be an array of nranks"},
      {"huge chunks", "\"chunks\": 2", "\"chunks\": 99999999999999999999", "\"chunks\""},
      {"negative chunks", "\"chunks\": 2", "\"chunks\": -2", "\"chunks\" is -2"},
      {"an unknown field", "\"chunks\": 2", "\"chunks\": 2, \"chunk\": 2", "unknown field \"chunk\""},
      {"an unknown op", "\"op\": \"sendRecv\"", "\"op\": \"sendRecvCopy\"", "unknown op \"sendRecvCopy\""},
      {"a peer out of range", "\"send\": 1, \"recv\": 1, \"src\": [\"input\", 1]",
       "\"send\": 2, \"recv\": 1, \"src\": [\"input\", 1]", "rank 0, step 0: \"send\" is 2, outside -1..1"},
      {"a send with no peer", "\"send\": 1, \"recv\": 1, \"src\": [\"input\", 1]",
       "\"recv\": 1, \"src\": [\"input\", 1]", "needs a \"send\" peer"},
      {"an offset past the buffer", "\"src\": [\"input\", 1]", "\"src\": [\"input\", 2]",
       "src input[2, 3) is past the end of rank 0's input (2 chunks)"},
      {"a count past the buffer", "\"src\": [\"output\", 0], \"count\": 1", "\"src\": [\"output\", 0], \"count\": 3",
       "past the end"},
      {"scratch that is not declared", "\"dst\": [\"output\", 0], \"recv_count\": 1",
       "\"dst\": [\"scratch\", 0], \"recv_count\": 1", "rank 0's scratch (0 chunks)"},
      {"an unknown buffer", "\"src\": [\"input\", 1]", "\"src\": [\"inbox\", 1]", "names buffer \"inbox\""},
      {"a negative offset", "\"src\": [\"input\", 1]", "\"src\": [\"input\", -1]", "\"src\" must be"},
      {"a count that is text", "\"count\": 1,\n       \"dst\"", "\"count\": \"1\",\n       \"dst\"",
       "\"count\" must be a whole number"},
      {"a flag that is not a boolean", "\"recv_count\": 1}]},\n    {\"rank\": 1",
       "\"recv_count\": 1, \"joined\": 1}]},\n    {\"rank\": 1", "\"joined\" must be true or false"},
      {"ranks out of order", "{\"rank\": 1, \"steps\"", "{\"rank\": 0, \"steps\"", "rank 1: \"rank\" is 0"},
      {"a byte range that serves nothing", "\"chunks\": 2", "\"chunks\": 2, \"min_bytes\": 100, \"max_bytes\": 99",
       "\"max_bytes\" 99 is below \"min_bytes\" 100"},
      {"a negative min_bytes", "\"chunks\": 2", "\"chunks\": 2, \"min_bytes\": -1", "\"min_bytes\" is -1"},
      {"an unknown protocol", "\"chunks\": 2", "\"chunks\": 2, \"protocol\": \"LL128\"",
       "\"protocol\" must be \"auto\", \"simple\" or \"ll\", not \"LL128\""},
      {"a max_bytes that is text", "\"chunks\": 2", "\"chunks\": 2, \"max_bytes\": \"1M\"",
       "\"max_bytes\" must be a whole number"},
  };
  for (const BadFile& c : cases) {
    std::string text = kTwoRankAllReduce;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.what;
    text.replace(at, c.from.size(), c.to);
    ProgramFile file;
    const Status st = parseProgramFile(text, "bad.json", &file);
    ASSERT_FALSE(st.ok()) << c.what;
    EXPECT_EQ(st.code(), collieInvalidArgument) << c.what;
    EXPECT_EQ(st.message().rfind("bad.json: ", 0), 0u) << c.what << ": " << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.what << ": " << st.message();
  }
}

TEST(ProgramFile, AFileTooLargeToProveIsRefusedUnproved) {
  std::string text = R"({"collie_program": 1, "collective": "allreduce", "name": "big", "nranks": 8,
    "chunks": 16777216, "ranks": [)";
  for (int r = 0; r < 8; ++r)
    text += std::string(r ? "," : "") + R"({"rank": )" + std::to_string(r) + R"(, "steps": []})";
  text += "]}";
  ProgramFile file;
  ASSERT_TRUE(parseProgramFile(text, "big.json", &file).ok());
  const Status st = verifyProgramFile(file, "big.json");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("big.json: too large to prove"), std::string::npos) << st.message();
}

TEST(ProgramFile, AMissingFileIsNamed) {
  ProgramFile file;
  const Status st = loadProgramFile("/nonexistent/collie/program.json", &file);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/collie/program.json: cannot be read"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace collie
