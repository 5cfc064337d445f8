// Whether a GPU is usable, and the skip every GPU test starts with: without
// one, the test is skipped with the reason printed (the CUDA runtime's error,
// or 0 devices). Also the COLLIE_TIMEOUT the tests of several ranks set.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gpu/gpu_usable.h"

namespace collie {
namespace test {

// COLLIE_TIMEOUT for the GPU tests: 60 s unless the caller chose (tests/gpu/run.sh: 30 s, so a hang costs
// less of a lent machine).
inline std::string timeoutSeconds() {
  const char* chosen = getenv("COLLIE_TIMEOUT");
  return chosen != nullptr ? chosen : "60";
}

}  // namespace test
}  // namespace collie

#define SKIP_WITHOUT_GPU()                                     \
  do {                                                         \
    std::string why_;                                          \
    if (!collie::test::gpuUsable(&why_)) GTEST_SKIP() << why_; \
  } while (0)
