// The libFuzzer entry point of one target: COLLIE_FUZZ_TARGET names its function (fuzz_targets.h),
// set per binary by tests/fuzz/CMakeLists.txt.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return collie::fuzz::COLLIE_FUZZ_TARGET(data, size);
}
