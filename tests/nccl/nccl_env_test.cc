// The NCCL_* -> COLLIE_* environment plan of libnccl.so.2 (compat/nccl/nccl_env.cc),
// as a pure function: what each NCCL variable maps to, that a COLLIE_* variable
// already set wins, and that everything else is named as ignored.
#include "compat/nccl/nccl_env.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace {

using collie::nccl::EnvPlan;
using collie::nccl::mapAlgo;
using collie::nccl::mapDebug;
using collie::nccl::mapProto;
using collie::nccl::planEnvironment;

std::string algo(const std::string& v) {
  std::string note;
  return mapAlgo(v, &note);
}

std::string fallbackOf(const EnvPlan& plan, const std::string& name) {
  for (const auto& f : plan.fallbacks)
    if (f.first == name) return f.second;
  return "<unset>";
}

bool infoHas(const EnvPlan& plan, const std::string& text) {
  for (const std::string& line : plan.info)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

TEST(NcclEnv, AlgoPinsRingAndTree) {
  EXPECT_EQ(algo("Tree"), "allreduce:tree");
  EXPECT_EQ(algo("Ring"), "allreduce:ring,reducescatter:ring,allgather:ring,broadcast:chain,reduce:chain");
  EXPECT_EQ(algo("ring"), algo("Ring"));
  // Both allowed: allreduce is left to the tuner; ring is the only NCCL choice for the others.
  EXPECT_EQ(algo("Tree,Ring"), "reducescatter:ring,allgather:ring,broadcast:chain,reduce:chain");
  EXPECT_EQ(algo("^Tree"), "allreduce:ring,broadcast:chain,reduce:chain");  // PAT allowed: RS/AG to the tuner
  EXPECT_EQ(algo("^Ring"), "allreduce:tree");  // of ring and tree only tree; NVLS, CollNet, PAT have no equivalent
  EXPECT_EQ(algo("NVLS"), "");
  EXPECT_EQ(algo("allreduce:tree;broadcast:ring"), "allreduce:tree,broadcast:chain");
  std::string note;
  EXPECT_EQ(mapAlgo("Ring,Bogus", &note), algo("Ring"));
  EXPECT_NE(note.find("'Bogus' is not an NCCL algorithm"), std::string::npos) << note;
  EXPECT_EQ(mapAlgo("CollnetDirect", &note), "");
  EXPECT_NE(note.find("no Collie equivalent"), std::string::npos) << note;
}

TEST(NcclEnv, ProtoAndDebug) {
  std::string note;
  EXPECT_EQ(mapProto("Simple", &note), "simple");
  EXPECT_EQ(mapProto("LL", &note), "ll");
  EXPECT_EQ(mapProto("LL128", &note), "simple");
  EXPECT_NE(note.find("LL128"), std::string::npos);
  EXPECT_EQ(mapProto("LL,Simple", &note), "");
  EXPECT_EQ(mapProto("^LL", &note), "simple");
  EXPECT_EQ(mapProto("^LL128,Simple", &note), "ll");
  bool version = false;
  EXPECT_EQ(mapDebug("INFO", &version, &note), "INFO");
  EXPECT_TRUE(version);
  EXPECT_EQ(mapDebug("VERSION", &version, &note), "WARN");
  EXPECT_TRUE(version);
  EXPECT_EQ(mapDebug("warn", &version, &note), "WARN");
  EXPECT_FALSE(version);
  EXPECT_EQ(mapDebug("ABORT", &version, &note), "WARN");
  EXPECT_EQ(mapDebug("TRACE", &version, &note), "TRACE");
  EXPECT_EQ(mapDebug("LOUD", &version, &note), "");
}

TEST(NcclEnv, PlanMapsIgnoresAndLetsCollieWin) {
  const EnvPlan plan = planEnvironment({{"NCCL_DEBUG", "INFO"},
                                        {"NCCL_DEBUG_FILE", "logs/x.%h.%p"},
                                        {"NCCL_ALGO", "Tree"},
                                        {"NCCL_PROTO", "LL"},
                                        {"NCCL_SOCKET_IFNAME", "^docker,lo"},
                                        {"COLLIE_SOCKET_IFNAME", "eth0"},
                                        {"NCCL_COMM_ID", "10.0.0.1:5000"},
                                        {"NCCL_IB_HCA", "mlx5_0"},
                                        {"NCCL_BUFFSIZE", "4194304"},
                                        {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                                        {"PATH", "/bin"}});
  EXPECT_EQ(fallbackOf(plan, "COLLIE_DEBUG"), "INFO");
  EXPECT_EQ(fallbackOf(plan, "COLLIE_DEBUG_FILE"), "logs/x.%h.%p");
  EXPECT_EQ(fallbackOf(plan, "COLLIE_ALGO"), "allreduce:tree");
  EXPECT_EQ(fallbackOf(plan, "COLLIE_PROTO"), "ll");
  EXPECT_EQ(fallbackOf(plan, "COLLIE_SOCKET_IFNAME"), "<unset>");  // COLLIE_SOCKET_IFNAME is set: it wins
  EXPECT_TRUE(infoHas(plan, "COLLIE_SOCKET_IFNAME=eth0 is set and wins"));
  EXPECT_TRUE(infoHas(plan, "NCCL_ALGO=Tree -> COLLIE_ALGO=allreduce:tree"));
  EXPECT_TRUE(infoHas(plan, "NCCL_IB_HCA=mlx5_0 is accepted and ignored"));
  EXPECT_TRUE(infoHas(plan, "NCCL_BUFFSIZE=4194304 is accepted and ignored"));
  EXPECT_TRUE(infoHas(plan, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 is accepted and ignored"));
  EXPECT_TRUE(infoHas(plan, "NCCL_COMM_ID=10.0.0.1:5000"));
  EXPECT_FALSE(infoHas(plan, "PATH"));
  EXPECT_TRUE(plan.printVersion);
  EXPECT_EQ(planEnvironment({{"PATH", "/bin"}}).info.size(), 0u);
}

TEST(NcclEnv, P2PDisableStagesThroughHostMemory) {
  EXPECT_EQ(fallbackOf(planEnvironment({{"NCCL_P2P_DISABLE", "1"}}), "COLLIE_P2P"), "0");
  EXPECT_EQ(fallbackOf(planEnvironment({{"NCCL_P2P_DISABLE", " 0"}}), "COLLIE_P2P"), "1");
  const EnvPlan bad = planEnvironment({{"NCCL_P2P_DISABLE", "yes"}});
  EXPECT_EQ(fallbackOf(bad, "COLLIE_P2P"), "<unset>");
  EXPECT_TRUE(infoHas(bad, "NCCL_P2P_DISABLE=yes is not mapped (not an integer)"));
  const EnvPlan wins = planEnvironment({{"NCCL_P2P_DISABLE", "1"}, {"COLLIE_P2P", "1"}});
  EXPECT_EQ(fallbackOf(wins, "COLLIE_P2P"), "<unset>");
}

}  // namespace
