// Program files (algorithms/program_file.h) on the CUDA backend, ranks as threads sharing the GPU: exported
// built-in algorithms run from files on device buffers, and the protocol a file asks for is the one its calls take.
// Every test skips, saying why, when no GPU is usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "collie.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/executor.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_skip.h"

namespace {

using collie::test::Coll;
using collie::test::Memory;
using collie::test::ScopedEnv;
using collie::test::timeoutSeconds;

// Program files (COLLIE_ALGO=COLLECTIVE:file:PATH) on the CUDA backend: built-in algorithms exported as files
// (bruck's allgather has ranges across rank blocks, so it runs in one round), with tiny slots so that the others
// run in many; counts that are multiples of each file's chunks, in place and out of place, on device buffers.
TEST(CudaBackend, ProgramFilesRun) {
  SKIP_WITHOUT_GPU();
  struct File {
    Coll coll;
    collie::Collective c;
    const char* name;
  };
  const File files[] = {{Coll::kAllReduce, collie::Collective::kAllReduce, "ring"},
                        {Coll::kReduceScatter, collie::Collective::kReduceScatter, "ring"},
                        {Coll::kAllGather, collie::Collective::kAllGather, "bruck"}};
  std::vector<std::unique_ptr<collie::test::TempFile>> temps;
  std::vector<uint64_t> chunks;
  std::string spec;
  for (const File& f : files) {
    std::string text;
    uint64_t n = 0;
    ASSERT_TRUE(collie::exportAlgorithm(*collie::findAlgorithm(f.c, f.name), 3, 0, 0, &text, &n).ok());
    temps.push_back(std::make_unique<collie::test::TempFile>(text, ".json"));
    chunks.push_back(n);
    spec += std::string(collie::collectiveName(f.c)) + ":file:" + temps.back()->path + ";";
  }
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", "4096");
  ScopedEnv slots("COLLIE_SLOTS", "2");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(std::string(comms[0]->algorithmFor(files[i].c, 4096)->name), std::string("file:") + files[i].name);
    for (uint64_t k : {0, 1, 13, 4099})
      for (collieDataType_t type : {collieFloat32, collieInt8})
        for (bool inPlace : {false, true}) {
          const size_t count = static_cast<size_t>(k * chunks[i]);
          const std::string err = collie::test::runCollectiveCase(comms, files[i].coll, type, collieSum, count, inPlace,
                                                                  0, seed, Memory::kDevice);
          ASSERT_EQ(err, "") << spec << " " << collie::test::collName(files[i].coll) << " count " << count << " "
                             << collie::typeName(type) << (inPlace ? " in-place" : "") << " (seed " << seed << ")";
        }
  }
}

// A file's protocol (JSON "protocol", MSCCL's proto) decides on the CUDA backend: "ll" takes LL above the 64 KiB
// where Collie's own choice stops, as far as one round of LL slots holds the call; "simple" never takes it.
TEST(CudaBackend, AProgramFilesProtocolIsTaken) {
  SKIP_WITHOUT_GPU();
  std::string text;
  uint64_t chunks = 0;
  const collie::Collective c = collie::Collective::kAllReduce;
  ASSERT_TRUE(collie::exportAlgorithm(*collie::findAlgorithm(c, "ring"), 3, 0, 0, &text, &chunks).ok());
  const size_t at = text.find("\"chunks\":");
  ASSERT_NE(at, std::string::npos);
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv llSlotBytes("COLLIE_LL_SLOT_BYTES", "65536");
  ScopedEnv channels("COLLIE_CHANNELS", "4");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  for (const char* protocol : {"ll", "simple"}) {
    std::string withProtocol = text;
    withProtocol.insert(at, std::string("\"protocol\": \"") + protocol + "\",\n  ");
    collie::test::TempFile file(withProtocol, ".json");
    const std::string spec = "allreduce:file:" + file.path;
    ScopedEnv algo("COLLIE_ALGO", spec.c_str());
    collie::test::Comms comms(3);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    const collie::AlgorithmInfo* a = comms[0]->algorithmFor(c, 4);
    ASSERT_EQ(std::string(a->name), "file:ring");
    // The largest float count one round of LL slots holds, a multiple of the file's chunks.
    const uint64_t most = collie::roundCount(*a, 3, comms[0]->executor->roundElemsLL(4)) / chunks * chunks;
    ASSERT_GT(most * 4, uint64_t{64} << 10) << "one round of LL slots is too small to show the file's choice";
    const bool ll = std::string(protocol) == "ll";
    EXPECT_EQ(collie::takesLowLatency(*comms[0], *a, c, chunks, 4), ll) << protocol;
    EXPECT_EQ(collie::takesLowLatency(*comms[0], *a, c, most, 4), ll) << protocol;
    EXPECT_FALSE(collie::takesLowLatency(*comms[0], *a, c, most + chunks, 4)) << protocol;
    for (size_t count : {size_t{0}, static_cast<size_t>(chunks), static_cast<size_t>(most)}) {
      const std::string err = collie::test::runCollectiveCase(comms, Coll::kAllReduce, collieFloat32, collieSum, count,
                                                              false, 0, seed, Memory::kDevice);
      ASSERT_EQ(err, "") << protocol << " count " << count << " (seed " << seed << ")";
    }
  }
}

}  // namespace
