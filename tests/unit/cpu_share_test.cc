// spinPolls (core/cpu_share.h): a waiting host rank spins long only while the
// ranks of its machine have a CPU each.
#include "core/cpu_share.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <initializer_list>
#include <vector>

namespace collie {
namespace {

PeerInfo peer(uint64_t machine, std::initializer_list<int> cpus) {
  PeerInfo p;
  memset(&p, 0, sizeof(p));
  p.machine = machine;
  for (int c : cpus) p.cpus[c / 64] |= uint64_t{1} << (c % 64);
  return p;
}

class SpinPolls : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("COLLIE_SPIN_POLLS"); }
  void TearDown() override { unsetenv("COLLIE_SPIN_POLLS"); }
};

TEST_F(SpinPolls, RanksThatOutnumberTheirCpusYieldEarly) {
  const std::vector<PeerInfo> four = {peer(1, {0, 1}), peer(1, {0, 1}), peer(1, {0, 1}), peer(1, {0, 1})};
  EXPECT_EQ(spinPolls(four, 0), kSharedSpinPolls);
  const std::vector<PeerInfo> two = {peer(1, {0, 1}), peer(1, {0, 1})};
  EXPECT_EQ(spinPolls(two, 1), kSpinPolls);
}

TEST_F(SpinPolls, RanksBoundToACpuEachSpin) {
  // mpirun --bind-to core: one CPU per rank, and the union has one per rank.
  const std::vector<PeerInfo> bound = {peer(1, {0}), peer(1, {1}), peer(1, {130}), peer(1, {1000})};
  EXPECT_EQ(spinPolls(bound, 2), kSpinPolls);
  // Two ranks bound to the same CPU share it.
  const std::vector<PeerInfo> same = {peer(1, {3}), peer(1, {3})};
  EXPECT_EQ(spinPolls(same, 0), kSharedSpinPolls);
}

TEST_F(SpinPolls, OnlyRanksOfOurMachineCount) {
  // 4 ranks on 2 machines of 2 CPUs: 2 per machine, no sharing (fake nodes
  // on one machine carry one machine hash, so they do count together).
  const std::vector<PeerInfo> split = {peer(1, {0, 1}), peer(1, {0, 1}), peer(2, {0, 1}), peer(2, {0, 1})};
  EXPECT_EQ(spinPolls(split, 3), kSpinPolls);
}

TEST_F(SpinPolls, UnknownCpusNeverCountAsShared) {
  const std::vector<PeerInfo> unknown = {peer(1, {}), peer(1, {}), peer(1, {})};
  EXPECT_EQ(spinPolls(unknown, 0), kSpinPolls);
}

TEST_F(SpinPolls, EnvironmentWins) {
  const std::vector<PeerInfo> four = {peer(1, {0}), peer(1, {0}), peer(1, {0}), peer(1, {0})};
  setenv("COLLIE_SPIN_POLLS", "7", 1);
  EXPECT_EQ(spinPolls(four, 0), 7);
  setenv("COLLIE_SPIN_POLLS", "0", 1);
  EXPECT_EQ(spinPolls(four, 0), 0);
  setenv("COLLIE_SPIN_POLLS", "lots", 1);  // malformed: logged, the detected value stays
  EXPECT_EQ(spinPolls(four, 0), kSharedSpinPolls);
}

TEST(CpuShare, DescribesThisMachineAndItsCpus) {
  PeerInfo a, b;
  memset(&a, 0xff, sizeof(a));
  describeCpus(&a);
  describeCpus(&b);
  EXPECT_EQ(a.machine, b.machine);
  int cpus = 0;
  for (uint64_t w : a.cpus) cpus += __builtin_popcountll(w);
  EXPECT_GE(cpus, 1);  // the CPU this test runs on, at least
}

}  // namespace
}  // namespace collie
