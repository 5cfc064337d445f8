// collieCommSplit: new communicators from an existing one, as NCCL's
// ncclCommSplit. Collective over the parent:
//
//   1. allgather (color, key) over the parent's bootstrap;
//   2. the members of each colour, ordered by key then parent rank, are the
//      new communicator's ranks 0..m-1;
//   3. each colour's new rank 0 starts a rendezvous root and makes a unique
//      id; a second allgather carries the ids (one slot per parent rank, so
//      every colour finds its leader's);
//   4. each member inits rank i of m from its leader's id, like
//      collieCommInitRank. A rank with COLLIE_SPLIT_NOCOLOR takes part in
//      the allgathers and gets NULL.
//
// Inside a group the split is queued on the parent, so one thread may split
// every rank of a clique (each runs on its own thread at GroupEnd).
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "base/cuda_check.h"
#include "base/log.h"
#include "core/api_checks.h"
#include "core/comm.h"
#include "core/group.h"
#include "transport/bootstrap/bootstrap.h"

using collie::Status;
using collie::api::checkComm;
using collie::api::guarded;

namespace collie {

InitOptions inheritedOptions(collieComm_t comm) {
  InitOptions o;
  o.backend = comm->backend;
  o.cudaDevice = comm->cudaDevice;
  o.timeoutSec = comm->timeoutSec;
  o.initTimeoutSec = comm->initTimeoutSec;
  o.algoOverrides = comm->algoOverrides;
  o.checkCalls = comm->checkCalls;
  o.directTune = comm->directTuneOption;
  o.directStaging = comm->directStaging;
  o.directOneLaunch = comm->directOneLaunch;
  for (const auto& a : comm->algoOverrides)
    o.algoSpec += std::string(collectiveName(a.first)) + ":" + a.second->name + ";";
  return o;
}

std::string splitRendezvousHost(collieComm_t comm) {
  for (const PeerInfo& p : comm->peers)
    if (strncmp(p.hostId, comm->peers[static_cast<size_t>(comm->rank)].hostId, sizeof(p.hostId)) != 0) return "";
  return "127.0.0.1";
}

namespace {

Status splitNow(collieComm_t comm, int color, int key, const InitOptions& options, collieComm_t* newcomm) {
  if (!commIsLive(comm))
    return Status::error(collieInvalidUsage, "collieCommSplit: the parent was destroyed before collieGroupEnd");
  ScopedLogRank logRank(comm->rank);
  const int n = comm->nranks, me = comm->rank;
  struct Entry {
    int32_t color, key;
  };
  std::vector<Entry> entries(static_cast<size_t>(n));
  entries[static_cast<size_t>(me)] = Entry{color, key};
  COLLIE_RETURN_IF_ERROR(comm->bootstrap->allGather(entries.data(), sizeof(Entry)));

  std::vector<int> members;  // parent ranks of my colour, in new-rank order
  if (color != COLLIE_SPLIT_NOCOLOR) {
    for (int r = 0; r < n; ++r)
      if (entries[static_cast<size_t>(r)].color == color) members.push_back(r);
    // Stable: equal keys keep the parent's order.
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return entries[static_cast<size_t>(a)].key < entries[static_cast<size_t>(b)].key;
    });
  }

  // Leaders fill their slot with a fresh id; a leader whose root fails leaves it
  // zero and still joins the allgather, so its members fail instead of hanging.
  std::vector<collieUniqueId> ids(static_cast<size_t>(n));
  memset(ids.data(), 0, ids.size() * sizeof(collieUniqueId));
  Status leaderStatus;
  const bool leader = !members.empty() && members[0] == me;
  if (leader) {
    Secret secret;
    leaderStatus = randomSecret(&secret);
    if (leaderStatus.ok())
      leaderStatus = startRendezvousRoot(splitRendezvousHost(comm), 0, secret, options.initTimeoutSec,
                                         &ids[static_cast<size_t>(me)]);
  }
  COLLIE_RETURN_IF_ERROR(comm->bootstrap->allGather(ids.data(), sizeof(collieUniqueId)));
  COLLIE_RETURN_IF_ERROR(leaderStatus);
  if (members.empty()) return Status();  // COLLIE_SPLIT_NOCOLOR: *newcomm stays NULL

  const int root = members[0];
  const collieUniqueId& id = ids[static_cast<size_t>(root)];
  static const collieUniqueId kZero{};
  if (memcmp(&id, &kZero, sizeof(id)) == 0)
    return Status::error(collieSystemError,
                         "rank %d, the first of colour %d, could not start the new communicator's rendezvous", root,
                         color);
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
  COLLIE_INFO("split: colour %d key %d -> rank %d of %zu", color, key, newRank, members.size());
  // On the parent's GPU (inside a group this runs on a thread of its own), and
  // the caller's current device is left as it was.
  DeviceGuard guard(options.cudaDevice);
  return commInit(id, static_cast<int>(members.size()), newRank, options, newcomm);
}

}  // namespace

}  // namespace collie

extern "C" collieResult_t collieCommSplit(collieComm_t comm, int color, int key, collieComm_t* newcomm,
                                          collieConfig_t* config) {
  return guarded(comm, [&] {
    const char* call = "collieCommSplit";
    if (newcomm == nullptr) return Status::error(collieInvalidArgument, "%s: newcomm is NULL", call);
    *newcomm = nullptr;
    // A revoked communicator (collieCommRevoke) may be split: its work has stopped, and the split needs none of it.
    COLLIE_RETURN_IF_ERROR(checkComm(comm, call, collie::api::Accept::kRevoked));
    if (color < 0 && color != COLLIE_SPLIT_NOCOLOR)
      return Status::error(collieInvalidArgument, "%s: color %d must be >= 0 or COLLIE_SPLIT_NOCOLOR (-1)", call,
                           color);
    collie::InitOptions options = collie::inheritedOptions(comm);
    if (config != nullptr) {
      COLLIE_RETURN_IF_ERROR(collie::resolveConfig(config, &options).withContext(call));
      options.cudaDevice = comm->cudaDevice;  // a config has no device: children stay on the parent's GPU
    }
    if (collie::group::active()) {
      collie::group::enqueue(comm,
                             [=] { return collie::splitNow(comm, color, key, options, newcomm).withContext(call); });
      return Status();
    }
    return collie::splitNow(comm, color, key, options, newcomm).withContext(call);
  });
}
