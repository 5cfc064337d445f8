// Bad input to every public call, one test per row (docs/RELIABILITY.md lists
// them): each gives collieInvalidArgument or collieInvalidUsage, never a crash
// or a hang, and collieGetLastError names the call and the argument. After
// each row, a correct call on the same communicator still works.
//
// Rows that need a GPU (device buffers on a host communicator, host buffers on
// a GPU one, a stream of another device) are in tests/gpu/cuda_backend_setup_test.cc.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "collie.h"

namespace {

struct Row {
  const char* name;                                  // the test's name
  collieResult_t code;                               // the result it must give
  std::vector<const char*> needles;                  // what collieGetLastError must contain (call and argument)
  std::function<collieResult_t(collieComm_t)> call;  // run on a live 1-rank host communicator
};

float gA[8], gB[8];
size_t gOne[1] = {1}, gZero[1] = {0}, gHuge[1] = {SIZE_MAX};
const size_t kOverflow = SIZE_MAX / 2;  // times 4 bytes of float32 overflows size_t

// A communicator that existed once: its handle is refused by the live-handle registry.
collieComm_t deadComm() {
  collieComm_t c = nullptr;
  EXPECT_EQ(collieCommInitAll(&c, 1, nullptr), collieSuccess);
  EXPECT_EQ(collieCommDestroy(c), collieSuccess);
  return c;
}

collieUniqueId someId() {
  collieUniqueId id;
  EXPECT_EQ(collieGetUniqueId(&id), collieSuccess);
  return id;
}

const collieRedOp_t kBadOp = static_cast<collieRedOp_t>(collieNumOps + 40);  // never created
const collieDataType_t kBadType = static_cast<collieDataType_t>(collieNumTypes);
const auto kInvalid = collieInvalidArgument;
const auto kUsage = collieInvalidUsage;

std::vector<Row> rows() {
  return {
      // ---------------------------------------------------------------- collectives
      {"AllReduce_NullComm",
       kInvalid,
       {"collieAllReduce", "comm is NULL"},
       [](collieComm_t) { return collieAllReduce(gA, gB, 1, collieFloat32, collieSum, nullptr, nullptr); }},
      {"AllReduce_DestroyedComm",
       kInvalid,
       {"collieAllReduce", "not a live communicator"},
       [](collieComm_t) { return collieAllReduce(gA, gB, 1, collieFloat32, collieSum, deadComm(), nullptr); }},
      {"AllReduce_FinalizedComm",
       kUsage,
       {"collieAllReduce", "finalized"},
       [](collieComm_t) {
         collieComm_t c = nullptr;
         collieCommInitAll(&c, 1, nullptr);
         collieCommFinalize(c);
         const collieResult_t rc = collieAllReduce(gA, gB, 1, collieFloat32, collieSum, c, nullptr);
         const std::string text = collieGetLastError(c);
         collieCommDestroy(c);
         return rc == kUsage && text.find("finalized") != std::string::npos ? rc : collieInternalError;
       }},
      {"AllReduce_NullSendbuff",
       kInvalid,
       {"collieAllReduce", "sendbuff is NULL"},
       [](collieComm_t c) { return collieAllReduce(nullptr, gB, 1, collieFloat32, collieSum, c, nullptr); }},
      {"AllReduce_NullRecvbuff",
       kInvalid,
       {"collieAllReduce", "recvbuff is NULL"},
       [](collieComm_t c) { return collieAllReduce(gA, nullptr, 1, collieFloat32, collieSum, c, nullptr); }},
      {"AllReduce_CountTimesSizeOverflows",
       kInvalid,
       {"collieAllReduce", "overflows"},
       [](collieComm_t c) { return collieAllReduce(gA, gB, kOverflow, collieFloat32, collieSum, c, nullptr); }},
      {"AllReduce_UnknownType",
       kInvalid,
       {"collieAllReduce", "datatype 12"},
       [](collieComm_t c) { return collieAllReduce(gA, gB, 1, kBadType, collieSum, c, nullptr); }},
      {"AllReduce_NegativeType",
       kInvalid,
       {"collieAllReduce", "datatype -1"},
       [](collieComm_t c) {
         return collieAllReduce(gA, gB, 1, static_cast<collieDataType_t>(-1), collieSum, c, nullptr);
       }},
      {"AllReduce_UnknownOp",
       kInvalid,
       {"collieAllReduce", "op 45"},
       [](collieComm_t c) { return collieAllReduce(gA, gB, 1, collieFloat32, kBadOp, c, nullptr); }},
      {"AllReduce_NegativeOp",
       kInvalid,
       {"collieAllReduce", "op -3"},
       [](collieComm_t c) {
         return collieAllReduce(gA, gB, 1, collieFloat32, static_cast<collieRedOp_t>(-3), c, nullptr);
       }},
      {"ReduceScatter_NullSendbuff",
       kInvalid,
       {"collieReduceScatter", "sendbuff is NULL"},
       [](collieComm_t c) { return collieReduceScatter(nullptr, gB, 1, collieFloat32, collieSum, c, nullptr); }},
      {"ReduceScatter_UnknownOp",
       kInvalid,
       {"collieReduceScatter", "op"},
       [](collieComm_t c) { return collieReduceScatter(gA, gB, 1, collieFloat32, kBadOp, c, nullptr); }},
      {"AllGather_NullRecvbuff",
       kInvalid,
       {"collieAllGather", "recvbuff is NULL"},
       [](collieComm_t c) { return collieAllGather(gA, nullptr, 1, collieFloat32, c, nullptr); }},
      {"AllGather_CountOverflows",
       kInvalid,
       {"collieAllGather", "overflows"},
       [](collieComm_t c) { return collieAllGather(gA, gB, kOverflow, collieFloat32, c, nullptr); }},
      {"Broadcast_RootTooLarge",
       kInvalid,
       {"collieBroadcast", "root 1 is not a rank"},
       [](collieComm_t c) { return collieBroadcast(gA, gB, 1, collieFloat32, 1, c, nullptr); }},
      {"Broadcast_NegativeRoot",
       kInvalid,
       {"collieBroadcast", "root -1"},
       [](collieComm_t c) { return collieBroadcast(gA, gB, 1, collieFloat32, -1, c, nullptr); }},
      {"Broadcast_NullRecvbuff",
       kInvalid,
       {"collieBroadcast", "recvbuff is NULL"},
       [](collieComm_t c) { return collieBroadcast(gA, nullptr, 1, collieFloat32, 0, c, nullptr); }},
      {"Reduce_RootTooLarge",
       kInvalid,
       {"collieReduce", "root 7"},
       [](collieComm_t c) { return collieReduce(gA, gB, 1, collieFloat32, collieSum, 7, c, nullptr); }},
      {"Reduce_UnknownType",
       kInvalid,
       {"collieReduce", "datatype"},
       [](collieComm_t c) { return collieReduce(gA, gB, 1, kBadType, collieSum, 0, c, nullptr); }},
      {"AllToAll_Overlapping",
       kInvalid,
       {"collieAllToAll", "overlap"},
       [](collieComm_t c) { return collieAllToAll(gA, gA + 1, 2, collieFloat32, c, nullptr); }},
      {"AllToAll_NullSendbuff",
       kInvalid,
       {"collieAllToAll", "sendbuff is NULL"},
       [](collieComm_t c) { return collieAllToAll(nullptr, gB, 2, collieFloat32, c, nullptr); }},
      {"AllToAllv_NullCounts",
       kInvalid,
       {"collieAllToAllv", "sendcounts"},
       [](collieComm_t c) { return collieAllToAllv(gA, nullptr, gZero, gB, gOne, gZero, collieFloat32, c, nullptr); }},
      {"AllToAllv_NullDispls",
       kInvalid,
       {"collieAllToAllv", "recv displacements"},
       [](collieComm_t c) { return collieAllToAllv(gA, gOne, gZero, gB, gOne, nullptr, collieFloat32, c, nullptr); }},
      {"AllToAllv_DisplacementOverflows",
       kInvalid,
       {"collieAllToAllv", "displacement", "overflows"},
       [](collieComm_t c) { return collieAllToAllv(gA, gOne, gHuge, gB, gOne, gZero, collieFloat32, c, nullptr); }},
      {"AllToAllv_OwnBlockCountsDiffer",
       kInvalid,
       {"collieAllToAllv", "sendcounts[0] = 1", "recvcounts[0] = 0"},
       [](collieComm_t c) { return collieAllToAllv(gA, gOne, gZero, gB, gZero, gZero, collieFloat32, c, nullptr); }},
      {"AllToAllv_Overlapping",
       kInvalid,
       {"collieAllToAllv", "overlap"},
       [](collieComm_t c) { return collieAllToAllv(gA, gOne, gZero, gA, gOne, gZero, collieFloat32, c, nullptr); }},
      {"Gather_NegativeRoot",
       kInvalid,
       {"collieGather", "root -2"},
       [](collieComm_t c) { return collieGather(gA, gB, 1, collieFloat32, -2, c, nullptr); }},
      {"Gather_NullRecvbuffOnRoot",
       kInvalid,
       {"collieGather", "recvbuff is NULL"},
       [](collieComm_t c) { return collieGather(gA, nullptr, 1, collieFloat32, 0, c, nullptr); }},
      {"Scatter_RootTooLarge",
       kInvalid,
       {"collieScatter", "root 1"},
       [](collieComm_t c) { return collieScatter(gA, gB, 1, collieFloat32, 1, c, nullptr); }},
      {"Scatter_NullSendbuffOnRoot",
       kInvalid,
       {"collieScatter", "sendbuff is NULL"},
       [](collieComm_t c) { return collieScatter(nullptr, gB, 1, collieFloat32, 0, c, nullptr); }},
      {"Barrier_NullComm",
       kInvalid,
       {"collieBarrier", "comm is NULL"},
       [](collieComm_t) { return collieBarrier(nullptr, nullptr); }},
      {"Barrier_DestroyedComm",
       kInvalid,
       {"collieBarrier", "not a live communicator"},
       [](collieComm_t) { return collieBarrier(deadComm(), nullptr); }},
      // ---------------------------------------------------------------- point to point and groups
      {"Send_PeerTooLarge",
       kInvalid,
       {"collieSend", "peer 1 is not a rank"},
       [](collieComm_t c) { return collieSend(gA, 1, collieFloat32, 1, c, nullptr); }},
      {"Send_NullBuffer",
       kInvalid,
       {"collieSend", "sendbuff is NULL"},
       [](collieComm_t c) { return collieSend(nullptr, 1, collieFloat32, 0, c, nullptr); }},
      {"Recv_NegativePeer",
       kInvalid,
       {"collieRecv", "peer -1"},
       [](collieComm_t c) { return collieRecv(gB, 1, collieFloat32, -1, c, nullptr); }},
      {"Recv_UnknownType",
       kInvalid,
       {"collieRecv", "datatype"},
       [](collieComm_t c) { return collieRecv(gB, 1, kBadType, 0, c, nullptr); }},
      {"SendToSelf_WithoutReceive",
       kUsage,
       {"send to self"},
       [](collieComm_t c) {
         collieGroupStart();
         collieSend(gA, 1, collieFloat32, 0, c, nullptr);
         return collieGroupEnd();
       }},
      {"GroupEnd_WithoutStart",
       kUsage,
       {"collieGroupEnd without collieGroupStart"},
       [](collieComm_t) { return collieGroupEnd(); }},
      // ---------------------------------------------------------------- communicators
      {"CommInitRank_NullComm",
       kInvalid,
       {"collieCommInitRank", "comm is NULL"},
       [](collieComm_t) { return collieCommInitRank(nullptr, 1, someId(), 0); }},
      {"CommInitRank_ZeroRanks",
       kInvalid,
       {"collieCommInitRank", "nranks 0"},
       [](collieComm_t) {
         collieComm_t c;
         return collieCommInitRank(&c, 0, someId(), 0);
       }},
      {"CommInitRank_RankOutOfRange",
       kInvalid,
       {"collieCommInitRank", "rank 3 is not in [0, 2)"},
       [](collieComm_t) {
         collieComm_t c;
         return collieCommInitRank(&c, 2, someId(), 3);
       }},
      {"CommInitRank_GarbageId",
       kInvalid,
       {"collieCommInitRank"},
       [](collieComm_t) {
         collieUniqueId id;
         memset(&id, 0x5a, sizeof(id));
         collieComm_t c;
         return collieCommInitRank(&c, 1, id, 0);
       }},
      {"CommInitRankConfig_BadMagic",
       kInvalid,
       {"collieCommInitRank", "COLLIE_CONFIG_INITIALIZER"},
       [](collieComm_t) {
         collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
         config.magic = 1;
         collieComm_t c;
         return collieCommInitRankConfig(&c, 1, someId(), 0, &config);
       }},
      {"CommInitRankConfig_BadTimeout",
       kInvalid,
       {"collieCommInitRank", "config.timeoutMs -5"},
       [](collieComm_t) {
         collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
         config.timeoutMs = -5;
         collieComm_t c;
         return collieCommInitRankConfig(&c, 1, someId(), 0, &config);
       }},
      {"CommInitRankConfig_BadBackend",
       kInvalid,
       {"collieCommInitRank", "config.backend 9"},
       [](collieComm_t) {
         collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
         config.backend = static_cast<collieBackend_t>(9);
         collieComm_t c;
         return collieCommInitRankConfig(&c, 1, someId(), 0, &config);
       }},
      {"CommInitAll_NullComms",
       kInvalid,
       {"collieCommInitAll", "comms is NULL"},
       [](collieComm_t) { return collieCommInitAll(nullptr, 2, nullptr); }},
      {"CommInitAll_ZeroDevices",
       kInvalid,
       {"collieCommInitAll", "ndev 0"},
       [](collieComm_t) {
         collieComm_t c[1];
         return collieCommInitAll(c, 0, nullptr);
       }},
      {"CommInitAll_NegativeDevice",
       kInvalid,
       {"collieCommInitAll", "devlist[1] = -4"},
       [](collieComm_t) {
         collieComm_t c[2];
         const int devs[2] = {0, -4};
         return collieCommInitAll(c, 2, devs);
       }},
      {"CommInitFromEnv_NullComm",
       kInvalid,
       {"collieCommInitFromEnv", "comm is NULL"},
       [](collieComm_t) { return collieCommInitFromEnv(nullptr, nullptr); }},
      {"CommSplit_ColourOutOfRange",
       kInvalid,
       {"collieCommSplit", "color -5"},
       [](collieComm_t c) {
         collieComm_t n;
         return collieCommSplit(c, -5, 0, &n, nullptr);
       }},
      {"CommSplit_NullComm",
       kInvalid,
       {"collieCommSplit", "comm is NULL"},
       [](collieComm_t) {
         collieComm_t n;
         return collieCommSplit(nullptr, 0, 0, &n, nullptr);
       }},
      {"CommSplit_DestroyedComm",
       kInvalid,
       {"collieCommSplit", "not a live communicator"},
       [](collieComm_t) {
         collieComm_t n;
         return collieCommSplit(deadComm(), 0, 0, &n, nullptr);
       }},
      {"CommShrink_NullComm",
       kInvalid,
       {"collieCommShrink", "comm is NULL"},
       [](collieComm_t) {
         collieComm_t n;
         return collieCommShrink(nullptr, nullptr, 0, &n, nullptr, COLLIE_SHRINK_DEFAULT);
       }},
      {"CommShrink_DestroyedComm",
       kInvalid,
       {"collieCommShrink", "not a live communicator"},
       [](collieComm_t) {
         collieComm_t n;
         return collieCommShrink(deadComm(), nullptr, 0, &n, nullptr, COLLIE_SHRINK_DEFAULT);
       }},
      {"CommShrink_ExcludesEveryRank",
       kInvalid,
       {"collieCommShrink", "excludeRanksCount 1 is not in [0, 1)"},
       [](collieComm_t c) {
         const int self = 0;
         collieComm_t n;
         return collieCommShrink(c, &self, 1, &n, nullptr, COLLIE_SHRINK_DEFAULT);
       }},
      {"CommRevoke_NullComm",
       kInvalid,
       {"collieCommRevoke", "comm is NULL"},
       [](collieComm_t) { return collieCommRevoke(nullptr, COLLIE_REVOKE_DEFAULT); }},
      {"CommRevoke_DestroyedComm",
       kInvalid,
       {"collieCommRevoke", "not a live communicator"},
       [](collieComm_t) { return collieCommRevoke(deadComm(), COLLIE_REVOKE_DEFAULT); }},
      {"CommRevoke_UnknownFlags",
       kInvalid,
       {"collieCommRevoke", "revokeFlags 4 is not COLLIE_REVOKE_DEFAULT"},
       [](collieComm_t c) { return collieCommRevoke(c, 4); }},
      {"CommSplit_NullNewcomm",
       kInvalid,
       {"collieCommSplit", "newcomm is NULL"},
       [](collieComm_t c) { return collieCommSplit(c, 0, 0, nullptr, nullptr); }},
      {"CommDestroy_DestroyedComm",
       kInvalid,
       {"collieCommDestroy", "not a live communicator"},
       [](collieComm_t) { return collieCommDestroy(deadComm()); }},
      {"CommAbort_DestroyedComm",
       kInvalid,
       {"collieCommAbort", "not a live communicator"},
       [](collieComm_t) { return collieCommAbort(deadComm()); }},
      {"CommFinalize_NullComm",
       kInvalid,
       {"collieCommFinalize", "comm is NULL"},
       [](collieComm_t) { return collieCommFinalize(nullptr); }},
      {"CommCount_NullOut",
       kInvalid,
       {"collieCommCount", "count is NULL"},
       [](collieComm_t c) { return collieCommCount(c, nullptr); }},
      {"CommUserRank_DestroyedComm",
       kInvalid,
       {"collieCommUserRank", "not a live communicator"},
       [](collieComm_t) {
         int r;
         return collieCommUserRank(deadComm(), &r);
       }},
      {"CommCuDevice_NullOut",
       kInvalid,
       {"collieCommCuDevice", "device is NULL"},
       [](collieComm_t c) { return collieCommCuDevice(c, nullptr); }},
      {"CommGetAsyncError_NullOut",
       kInvalid,
       {"collieCommGetAsyncError", "asyncError is NULL"},
       [](collieComm_t c) { return collieCommGetAsyncError(c, nullptr); }},
      {"GetVersion_NullOut",
       kInvalid,
       {"collieGetVersion", "version is NULL"},
       [](collieComm_t) { return collieGetVersion(nullptr); }},
      {"GetUniqueId_NullOut",
       kInvalid,
       {"collieGetUniqueId", "uniqueId is NULL"},
       [](collieComm_t) { return collieGetUniqueId(nullptr); }},
      // ---------------------------------------------------------------- memory and operators
      {"MemAlloc_NullOut",
       kInvalid,
       {"collieMemAlloc", "ptr is NULL"},
       [](collieComm_t) { return collieMemAlloc(nullptr, 64); }},
      {"MemFree_ForeignPointer",
       kInvalid,
       {"collieMemFree", "was not returned by collieMemAlloc"},
       [](collieComm_t) { return collieMemFree(gA); }},
      {"CommRegister_NullBuffer",
       kInvalid,
       {"collieCommRegister", "buff is NULL"},
       [](collieComm_t c) {
         void* h;
         return collieCommRegister(c, nullptr, 64, &h);
       }},
      {"CommDeregister_UnknownHandle",
       kInvalid,
       {"collieCommDeregister"},
       [](collieComm_t c) { return collieCommDeregister(c, gA); }},
      {"RedOpCreatePreMulSum_NullScalar",
       kInvalid,
       {"collieRedOpCreatePreMulSum", "scalar is NULL"},
       [](collieComm_t c) {
         collieRedOp_t op;
         return collieRedOpCreatePreMulSum(&op, nullptr, collieFloat32, collieScalarHostImmediate, c);
       }},
      {"RedOpCreatePreMulSum_BadResidence",
       kInvalid,
       {"collieRedOpCreatePreMulSum", "residence 7"},
       [](collieComm_t c) {
         collieRedOp_t op;
         return collieRedOpCreatePreMulSum(&op, gA, collieFloat32, static_cast<collieScalarResidence_t>(7), c);
       }},
      {"RedOpDestroy_UnknownOp",
       kInvalid,
       {"collieRedOpDestroy", "not a live operator"},
       [](collieComm_t c) { return collieRedOpDestroy(kBadOp, c); }},
      {"RedOp_WrongTypeForOperator",
       kInvalid,
       {"collieAllReduce", "was made for float", "int32"},
       [](collieComm_t c) {
         float scale = 2;
         collieRedOp_t op;
         if (collieRedOpCreatePreMulSum(&op, &scale, collieFloat32, collieScalarHostImmediate, c) != collieSuccess)
           return collieInternalError;
         int32_t x = 1;
         const collieResult_t rc = collieAllReduce(&x, &x, 1, collieInt32, op, c, nullptr);
         const std::string text = collieGetLastError(c);
         collieRedOpDestroy(op, c);
         return text.find("was made for") != std::string::npos ? rc : collieInternalError;
       }},
  };
}

// gtest prints a failing row by its name, not its bytes.
void PrintTo(const Row& row, std::ostream* os) { *os << row.name; }

class BadInput : public ::testing::TestWithParam<Row> {};

TEST_P(BadInput, IsRefusedWithASentenceNamingCallAndArgument) {
  const Row& row = GetParam();
  collieComm_t comm = nullptr;
  ASSERT_EQ(collieCommInitAll(&comm, 1, nullptr), collieSuccess) << collieGetLastError(nullptr);
  const collieResult_t rc = row.call(comm);
  // Calls without a live communicator keep their sentence per thread (collieGetLastError(NULL)).
  std::string text = collieGetLastError(comm);
  bool found = true;
  for (const char* n : row.needles) found = found && text.find(n) != std::string::npos;
  if (!found) text = collieGetLastError(nullptr);
  EXPECT_EQ(rc, row.code) << collieGetErrorString(rc) << ": " << text;
  for (const char* n : row.needles)
    EXPECT_NE(text.find(n), std::string::npos) << "missing \"" << n << "\" in: " << text;
  // The rejected call changed nothing: the communicator still works.
  float x = 3;
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comm, nullptr), collieSuccess)
      << collieGetLastError(comm);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(collieCommDestroy(comm), collieSuccess);
}

INSTANTIATE_TEST_SUITE_P(EveryPublicCall, BadInput, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.name); });

}  // namespace
