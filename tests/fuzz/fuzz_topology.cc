// Fuzz target topology: the text of a topology file, as parseTopology (algorithms/topology.h) reads
// it for collie-sim and the tuner. The whole input is the file. Checks: an accepted topology is
// within the bounds the simulator relies on (ranks, slots, finite positive costs), and
// describe() -> parseTopology gives the same topology (up to describe's 6 significant digits), whose
// description is then unchanged.
#include <cmath>
#include <string>

#include "algorithms/topology.h"
#include "tests/fuzz/fuzz_targets.h"

namespace collie {
namespace fuzz {

namespace {

bool near(double a, double b) { return std::fabs(a - b) <= 1e-5 * std::fmax(std::fabs(a), std::fabs(b)) + 1e-300; }

void checkBounds(const Topology& t, const std::string& text) {
  COLLIE_FUZZ_CHECK(t.ranksPerNode >= 1 && t.nranks >= t.ranksPerNode && t.nranks <= kMaxTopologyRanks, text);
  COLLIE_FUZZ_CHECK(t.nranks % t.ranksPerNode == 0, text);
  COLLIE_FUZZ_CHECK(t.slots >= 2 && t.slots <= kMaxSlots, text);
  COLLIE_FUZZ_CHECK(t.slotBytes >= 64 && t.slotBytes <= (uint64_t{1} << 30) && t.slotBytes % 8 == 0, text);
  COLLIE_FUZZ_CHECK(std::isfinite(t.gamma) && t.gamma > 0, "gamma " + std::to_string(t.gamma) + " from " + text);
  for (const LinkCost& l : t.links) {
    COLLIE_FUZZ_CHECK(std::isfinite(l.alpha) && l.alpha >= 0, "alpha from " + text);
    COLLIE_FUZZ_CHECK(std::isfinite(l.beta) && l.beta > 0, "beta from " + text);
  }
}

}  // namespace

int topology(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Topology t;
  Status st = parseTopology(text, "fuzz.topo", &t);
  COLLIE_FUZZ_CHECK(printable(st.message()), st.message());
  if (!st.ok()) return 0;
  checkBounds(t, text);

  const std::string once = t.describe();
  Topology t2;
  Status st2 = parseTopology(once, "describe", &t2);
  COLLIE_FUZZ_CHECK(st2.ok(), "describe() does not parse: " + st2.message() + "\n" + once);
  checkBounds(t2, once);
  COLLIE_FUZZ_CHECK(t2.name == t.name && t2.nranks == t.nranks && t2.ranksPerNode == t.ranksPerNode &&
                        t2.intra == t.intra && t2.inter == t.inter && t2.slotBytes == t.slotBytes &&
                        t2.slots == t.slots,
                    once);
  COLLIE_FUZZ_CHECK(near(t2.gamma, t.gamma), once);
  for (int i = 0; i < kLinkClasses; ++i) {
    // alpha is printed in microseconds, so below 1e-300 us it may come back as 0.
    COLLIE_FUZZ_CHECK(near(t2.links[i].alpha, t.links[i].alpha) || t.links[i].alpha < 1e-290, once);
    COLLIE_FUZZ_CHECK(near(t2.links[i].beta, t.links[i].beta), once);
  }
  COLLIE_FUZZ_CHECK(t2.describe() == once, "describe() is not stable:\n" + once + "\n" + t2.describe());
  return 0;
}

}  // namespace fuzz
}  // namespace collie
