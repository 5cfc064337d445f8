// The fuzz targets: one function per parser family, each taking arbitrary bytes. libfuzzer_main.cc
// turns one of them into a libFuzzer binary (scripts/fuzz.sh); replay_main.cc runs every corpus file
// through all of them in the normal build (ctest fuzz_corpus_replay). A target checks what the
// parser promises (bounds of what it accepts, round trips), not only that it does not crash: a
// broken promise aborts, which libFuzzer reports as a crash with the input that caused it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace collie {
namespace fuzz {

// Each returns 0; a failed check aborts. The name is also the corpus folder, tests/fuzz/corpus/<name>.
int bootstrapWire(const uint8_t* data, size_t size);  // bootstrap_wire
int algoOverrides(const uint8_t* data, size_t size);  // algo_overrides
int topology(const uint8_t* data, size_t size);       // topology
int traffic(const uint8_t* data, size_t size);        // traffic
int userText(const uint8_t* data, size_t size);       // user_text
int programFile(const uint8_t* data, size_t size);    // program_file
int mscclXml(const uint8_t* data, size_t size);       // msccl_xml
int directKernels(const uint8_t* data, size_t size);  // direct_kernels (differential, not a parser)

/// True when every byte of `s` is printable ASCII: what a sentence built from untrusted input must
/// be before it reaches a log line or collieGetLastError.
inline bool printable(const std::string& s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return false;
  return true;
}

[[noreturn]] inline void checkFailed(const char* file, int line, const char* cond, const std::string& detail) {
  fprintf(stderr, "fuzz check failed at %s:%d: %s%s%s\n", file, line, cond, detail.empty() ? "" : ": ", detail.c_str());
  abort();
}

}  // namespace fuzz
}  // namespace collie

/// Aborts with the condition and `detail` (a std::string) when `cond` is false.
#define COLLIE_FUZZ_CHECK(cond, detail) \
  ((cond) ? (void)0 : ::collie::fuzz::checkFailed(__FILE__, __LINE__, #cond, (detail)))
