// libnccl.so.2: the calls NCCL added after 2.19, the version nccl.h claims.
// A program written for 2.19 never calls them, but a binary built against a
// later NCCL (PyTorch's wheels, language bindings) names them, and the dynamic
// linker refuses to load it when one is missing: a Python extension is loaded
// with every symbol resolved at once, so one absent name stops `import torch`
// before any collective runs. So every function NVIDIA's library exports
// (2.28's, checked by tests/nccl/nccl_abi_test.sh) and the host calls of 2.29
// and later are here. The few Collie can honour forward to it; the rest return
// ncclInvalidUsage with a sentence naming the call, and hand out nothing.
// docs/nccl-compat.md has the table.
#include <cstddef>
#include <cstdint>

#include "base/log.h"
#include "collie.h"
#include "compat/nccl/nccl.h"
#include "compat/nccl/nccl_shim.h"
#include "core/embedding.h"

using collie::Status;
using collie::nccl::fail;
using collie::nccl::toCollie;
using collie::nccl::unsupported;

// nccl_device.h's host-side types, by layout: Collie declares no device API in nccl.h, but its host functions
// must exist with the same calling convention (a team is returned by value).
namespace device_api {
struct Team {
  int nRanks, rank, stride;
};
struct DevCommRequirements;
struct DevComm;
struct DevResourceRequirements;
struct BarrierHandle;
}  // namespace device_api
using device_api::BarrierHandle;
using device_api::DevComm;
using device_api::DevCommRequirements;
using device_api::DevResourceRequirements;
using device_api::Team;

namespace {

constexpr unsigned kSimInfoMagic = 0x74685283;  // what NCCL_SIM_INFO_INITIALIZER stores

const char* const kDeviceApi = "the device API (nccl_device.h) is";

// Reads a live communicator's facts, pinned so that a destroy on another thread waits for it.
template <typename Read>
bool withLiveComm(ncclComm_t comm, Read read) {
  collie::embedding::CommFacts facts;
  if (!collie::embedding::commFacts(toCollie(comm), &facts)) return false;
  read(facts);
  return true;
}

ncclResult_t notLive(const char* call, ncclComm_t comm) {
  return fail(
      Status::error(collieInvalidArgument, "%s: comm %p is not a live communicator", call, static_cast<void*>(comm)));
}

// The teams of the device API as Collie can state them: the world team is every rank, stride 1; no peer is
// reachable through device-API loads and stores, so each rank is its own LSA team, and the rail team (ranks of
// the same LSA index) is the world. An unknown communicator gives the empty team.
Team worldTeam(ncclComm_t comm, const char* call) {
  Team t{0, -1, 0};
  if (!withLiveComm(comm, [&](const collie::embedding::CommFacts& c) { t = Team{c.nranks, c.rank, 1}; }))
    notLive(call, comm);
  return t;
}

}  // namespace

extern "C" {

// ---------------------------------------------------------------- communicators

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr)
    return fail(Status::error(collieInvalidArgument, "ncclCommInitRankScalable: nId %d ids at %p: need at least one",
                              nId, static_cast<void*>(commIds)));
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId*) {
  return unsupported("ncclCommGetUniqueId", "growing a communicator is", comm);
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int, const ncclUniqueId*, int, ncclComm_t* newcomm, ncclConfig_t*) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return unsupported("ncclCommGrow", "growing a communicator is", comm);
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int) {
  return unsupported("ncclCommSuspend", "suspending a communicator is", comm);
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  return unsupported("ncclCommResume", "suspending a communicator is", comm);
}

// Collie allocates its device memory once, at init (the footprint COLLIE_DEBUG=INFO prints), and none of it
// can be suspended.
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* call = "ncclCommMemStats";
  if (value == nullptr) return fail(Status::error(collieInvalidArgument, "%s: value is NULL", call), comm);
  if (stat < ncclStatGpuMemSuspend || stat > ncclStatGpuMemTotal)
    return fail(Status::error(collieInvalidArgument, "%s: stat %d is not a ncclCommMemStat_t (0..3)", call,
                              static_cast<int>(stat)),
                comm);
  uint64_t footprint = 0;
  if (!withLiveComm(comm, [&](const collie::embedding::CommFacts& c) { footprint = c.deviceFootprint; }))
    return notLive(call, comm);
  *value = stat == ncclStatGpuMemPersist || stat == ncclStatGpuMemTotal ? footprint : 0;
  return ncclSuccess;
}

// ---------------------------------------------------------------- windows and one-sided calls

// Windows are Collie's (collieCommWindowRegister): the direct kernels reach peer processes' buffers inside them in
// place. The flags have NCCL's values.
static_assert(NCCL_WIN_COLL_SYMMETRIC == COLLIE_WIN_COLL_SYMMETRIC, "window flags differ");
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  return collie::nccl::toNccl(
      collieCommWindowRegister(toCollie(comm), buff, size, reinterpret_cast<collieWindow_t*>(win), winFlags));
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return collie::nccl::toNccl(collieCommWindowDeregister(toCollie(comm), reinterpret_cast<collieWindow_t>(win)));
}
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return collie::nccl::toNccl(collieWinGetUserPtr(toCollie(comm), reinterpret_cast<collieWindow_t>(win), outUserPtr));
}

ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int, unsigned int,
                           ncclComm_t comm, cudaStream_t) {
  return unsupported("ncclPutSignal", "one-sided communication is", comm);
}
ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t comm, cudaStream_t) {
  return unsupported("ncclSignal", "one-sided communication is", comm);
}
ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t comm, cudaStream_t) {
  return unsupported("ncclWaitSignal", "one-sided communication is", comm);
}

// ---------------------------------------------------------------- groups, logging

// NCCL would model the group's calls without running them. Collie closes the group the same way, running nothing,
// but has no estimate to give: ncclInvalidUsage. A bad simInfo is refused before the group is touched, so the
// caller can still end it with ncclGroupEnd.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  const char* call = "ncclGroupSimulateEnd";
  if (simInfo == nullptr) return fail(Status::error(collieInvalidArgument, "%s: simInfo is NULL", call));
  if (simInfo->magic != kSimInfoMagic || simInfo->size < offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
    return fail(Status::error(collieInvalidArgument,
                              "%s: simInfo (size %zu, magic 0x%x) was not set from NCCL_SIM_INFO_INITIALIZER", call,
                              simInfo->size, simInfo->magic));
  size_t dropped = 0;
  Status st = collie::embedding::endGroupWithoutRunning(&dropped);
  if (!st.ok()) return fail(st.withContext(call));
  simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  return fail(Status::error(collieInvalidUsage,
                            "%s: simulating a group is not supported by Collie; the group is closed and its %zu "
                            "operations were dropped without running (see docs/nccl-compat.md)",
                            call, dropped));
}

// Collie reads its log settings once (COLLIE_DEBUG, or NCCL_DEBUG mapped to it): nothing to reload.
void ncclResetDebugInit() { COLLIE_INFO("ncclResetDebugInit has no effect: Collie reads its log settings once"); }
void ncclResetDebugInitInternal() { ncclResetDebugInit(); }

// ---------------------------------------------------------------- the device API's host functions (2.28)

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const DevCommRequirements*, DevComm*) {
  return unsupported("ncclDevCommCreate", kDeviceApi, comm);
}
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const DevComm*) {
  return unsupported("ncclDevCommDestroy", kDeviceApi, comm);
}
ncclResult_t ncclLsaBarrierCreateRequirement(Team, int, BarrierHandle*, DevResourceRequirements*) {
  return unsupported("ncclLsaBarrierCreateRequirement", kDeviceApi);
}
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, Team, int, BarrierHandle*, DevResourceRequirements*) {
  return unsupported("ncclGinBarrierCreateRequirement", kDeviceApi, comm);
}
ncclResult_t ncclLLA2ACreateRequirement(int, int, BarrierHandle*, DevResourceRequirements*) {
  return unsupported("ncclLLA2ACreateRequirement", kDeviceApi);
}
// No slots: there is no device-API all-to-all to size them for.
int ncclLLA2ACalcSlots(int, int) { return 0; }

Team ncclTeamWorld(ncclComm_t comm) { return worldTeam(comm, "ncclTeamWorld"); }
Team ncclTeamLsa(ncclComm_t comm) {
  const Team world = worldTeam(comm, "ncclTeamLsa");
  return world.nRanks > 0 ? Team{1, 0, 1} : world;
}
Team ncclTeamRail(ncclComm_t comm) { return worldTeam(comm, "ncclTeamRail"); }
// Rank `rank` of `team`, as a rank of the world: this rank's world rank moved by whole strides.
int ncclTeamRankToWorld(ncclComm_t comm, Team team, int rank) {
  const Team world = worldTeam(comm, "ncclTeamRankToWorld");
  return world.nRanks > 0 ? world.rank + (rank - team.rank) * team.stride : -1;
}
// The same as an index of this rank's LSA team (this rank alone): 0 for itself; other ranks fall outside it.
int ncclTeamRankToLsa(ncclComm_t comm, Team team, int rank) {
  const Team world = worldTeam(comm, "ncclTeamRankToLsa");
  return world.nRanks > 0 ? (rank - team.rank) * team.stride : -1;
}

}  // extern "C"

// ---------------------------------------------------------------- pnccl* aliases

COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommInitRankScalable,
                  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommGrow,
                  (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                   ncclConfig_t* config));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommResume, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommWindowRegister,
                  (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclPutSignal,
                  (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                   size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                   cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclSignal,
                  (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclWaitSignal,
                  (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));
COLLIE_NCCL_ALIAS(void, ncclResetDebugInit, ());
COLLIE_NCCL_ALIAS(ncclResult_t, ncclDevCommCreate, (ncclComm_t comm, const DevCommRequirements* reqs, DevComm* out));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclDevCommDestroy, (ncclComm_t comm, const DevComm* devComm));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclLsaBarrierCreateRequirement,
                  (Team team, int nBarriers, BarrierHandle* outHandle, DevResourceRequirements* outReq));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclGinBarrierCreateRequirement,
                  (ncclComm_t comm, Team team, int nBarriers, BarrierHandle* outHandle,
                   DevResourceRequirements* outReq));
COLLIE_NCCL_ALIAS(ncclResult_t, ncclLLA2ACreateRequirement,
                  (int nBlocks, int nSlots, BarrierHandle* outHandle, DevResourceRequirements* outReq));
COLLIE_NCCL_ALIAS(int, ncclLLA2ACalcSlots, (int maxElts, int maxEltSize));
COLLIE_NCCL_ALIAS(Team, ncclTeamWorld, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(Team, ncclTeamLsa, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(Team, ncclTeamRail, (ncclComm_t comm));
COLLIE_NCCL_ALIAS(int, ncclTeamRankToWorld, (ncclComm_t comm, Team team, int rank));
COLLIE_NCCL_ALIAS(int, ncclTeamRankToLsa, (ncclComm_t comm, Team team, int rank));
