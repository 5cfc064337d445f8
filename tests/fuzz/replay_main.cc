// fuzz_corpus_replay: runs corpus files through the fuzz targets' functions without libFuzzer, so the
// normal build's test suite catches a parser that regresses on a known input (ctest fuzz_corpus_replay).
//
//   fuzz_corpus_replay CORPUS_DIR          every file of CORPUS_DIR/<target>/ through its target
//   fuzz_corpus_replay TARGET FILE...      the given files (e.g. a crash libFuzzer wrote) through TARGET
//
// A failed check aborts with its sentence; an empty or missing corpus folder is a failure too, so
// that a renamed folder cannot silently replay nothing.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"

namespace {

namespace fs = std::filesystem;

struct Target {
  const char* name;  // its corpus folder
  int (*run)(const uint8_t*, size_t);
};
const Target kTargets[] = {
    {"bootstrap_wire", collie::fuzz::bootstrapWire},
    {"algo_overrides", collie::fuzz::algoOverrides},
    {"topology", collie::fuzz::topology},
    {"traffic", collie::fuzz::traffic},
    {"user_text", collie::fuzz::userText},
    {"program_file", collie::fuzz::programFile},
    {"msccl_xml", collie::fuzz::mscclXml},
    {"direct_kernels", collie::fuzz::directKernels},
};

bool replayFile(const Target& t, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    fprintf(stderr, "fuzz_corpus_replay: cannot read %s\n", file.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Each file is announced first, so the last line before an abort names the input that caused it.
  fprintf(stderr, "%s: %s\n", t.name, file.c_str());
  t.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fuzz_corpus_replay CORPUS_DIR | fuzz_corpus_replay TARGET FILE...\n");
    return 2;
  }
  if (argc >= 3) {
    for (const Target& t : kTargets) {
      if (strcmp(t.name, argv[1]) != 0) continue;
      for (int i = 2; i < argc; ++i)
        if (!replayFile(t, argv[i])) return 1;
      printf("fuzz_corpus_replay: %d file(s) through %s: every check held\n", argc - 2, t.name);
      return 0;
    }
    fprintf(stderr, "fuzz_corpus_replay: no target '%s'\n", argv[1]);
    return 2;
  }
  const fs::path root = argv[1];
  int failures = 0;
  for (const Target& t : kTargets) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(root / t.name, ec))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    if (ec || files.empty()) {
      fprintf(stderr, "fuzz_corpus_replay: no corpus files in %s\n", (root / t.name).c_str());
      ++failures;
      continue;
    }
    for (const fs::path& f : files)
      if (!replayFile(t, f)) ++failures;
    printf("fuzz_corpus_replay: %-15s %zu files, every check held\n", t.name, files.size());
  }
  return failures == 0 ? 0 : 1;
}
