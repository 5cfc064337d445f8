// Fuzz target algo_overrides: COLLIE_ALGO ("allreduce:ring;broadcast:binomial"), as
// parseAlgorithmOverrides (algorithms/tuner.cc) reads it at communicator init. The whole input is
// the variable's value. Checks: every accepted entry names a registered algorithm of its own
// collective; the overrides written back as a spec parse to the same map; errors are printable.
#include <map>
#include <string>

#include "algorithms/registry.h"
#include "algorithms/tuner.h"
#include "tests/fuzz/fuzz_targets.h"

namespace collie {
namespace fuzz {

int algoOverrides(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  std::map<Collective, const AlgorithmInfo*> got;
  Status st = parseAlgorithmOverrides(spec, &got);
  COLLIE_FUZZ_CHECK(printable(st.message()), st.message());
  if (!st.ok()) {
    COLLIE_FUZZ_CHECK(st.code() == collieInvalidArgument && got.empty(), "an error must leave the map alone");
    return 0;
  }
  std::string again;
  for (const auto& [c, a] : got) {
    COLLIE_FUZZ_CHECK(a != nullptr && a->collective == c, "an algorithm of another collective");
    COLLIE_FUZZ_CHECK(findAlgorithm(c, a->name) == a, std::string("not in the registry: ") + a->name);
    again += std::string(again.empty() ? "" : ";") + collectiveName(c) + ":" + a->name;
  }
  std::map<Collective, const AlgorithmInfo*> reread;
  Status st2 = parseAlgorithmOverrides(again, &reread);
  COLLIE_FUZZ_CHECK(st2.ok() && reread == got, "round trip of '" + again + "': " + st2.message());
  return 0;
}

}  // namespace fuzz
}  // namespace collie
