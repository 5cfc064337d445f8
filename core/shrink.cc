// collieCommShrink: a new communicator of the parent's ranks less a list, as
// NCCL's ncclCommShrink (2.27). Only the ranks that stay call it; those left
// out may be dead (that is what it is for: going on after a rank failed), so
// nothing here may need them:
//
//   1. every caller works out the same list of staying ranks (the parent's
//      order) from the same exclusion list; its place there is its new rank;
//   2. the first of them starts a rendezvous root and sends its unique id to
//      each of the others over the parent's bootstrap, one connection each
//      (Bootstrap::sendTo: the ring would pass through the ranks that left);
//      the message also carries the count and a hash of the exclusion list,
//      so that callers who passed different lists fail with a sentence
//      instead of hanging in init;
//   3. each inits rank i of m from that id, like collieCommInitRank.
//
// COLLIE_SHRINK_ABORT first stops what the parent has in flight (its
// kernels' waits, another thread's host waits) and leaves the parent good
// only for destroy, as collieCommAbort would, but without freeing it.
// Inside a group the shrink is queued on the parent, as a split is.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/cuda_check.h"
#include "base/hash.h"
#include "base/log.h"
#include "core/api_checks.h"
#include "core/comm.h"
#include "core/group.h"
#include "executor/executor.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"

using collie::Status;
using collie::api::guarded;

namespace collie {

namespace {

// What the first staying rank sends each of the others: the new communicator's id, its size, and a hash of
// the exclusion list as the sender sorted it.
constexpr size_t kShrinkMessageBytes = sizeof(collieUniqueId) + 4 + 8;
// No count of shrinks can tag the message: a rank left out of one shrink of a parent may stay in the next,
// having counted one fewer. A rank takes the first message its listener holds from the first rank that stays,
// and the list's hash tells it whether that rank meant the same shrink.
constexpr uint32_t kShrinkTag = 1;

uint64_t hashOfList(const std::vector<int>& sorted) {
  uint64_t h = kFnvOffset;
  for (int r : sorted) {
    const uint32_t v = static_cast<uint32_t>(r);
    h = fnv1a(&v, sizeof(v), h);
  }
  return h;
}

Status shrinkNow(collieComm_t comm, const std::vector<int>& excluded, const InitOptions& options, bool abortFirst,
                 collieComm_t* newcomm) {
  if (!commIsLive(comm))
    return Status::error(collieInvalidUsage, "collieCommShrink: the parent was destroyed before collieGroupEnd");
  ScopedLogRank logRank(comm->rank);
  if (abortFirst) {
    // Stops waits in flight (kernels, other threads' host waits) and makes every later call but destroy fail;
    // the bootstrap stays up, since the message below needs it.
    comm->aborted.store(true);
    if (comm->executor) comm->executor->abort();
  }
  const int n = comm->nranks, me = comm->rank;
  std::vector<int> stay;
  for (int r = 0, i = 0; r < n; ++r) {
    if (i < static_cast<int>(excluded.size()) && excluded[static_cast<size_t>(i)] == r) {
      ++i;
      continue;
    }
    stay.push_back(r);
  }
  const int m = static_cast<int>(stay.size());
  const int newRank = static_cast<int>(std::find(stay.begin(), stay.end(), me) - stay.begin());
  const int leader = stay[0];
  const uint64_t listHash = hashOfList(excluded);

  collieUniqueId id;
  memset(&id, 0, sizeof(id));
  if (me == leader) {
    Secret secret;
    COLLIE_RETURN_IF_ERROR(randomSecret(&secret));
    COLLIE_RETURN_IF_ERROR(startRendezvousRoot(splitRendezvousHost(comm), 0, secret, options.initTimeoutSec, &id));
    std::vector<uint8_t> msg;
    putBytes(&msg, &id, sizeof(id));
    putBe32(&msg, static_cast<uint32_t>(m));
    putBe64(&msg, listHash);
    // To every staying rank, even after one failed: the others then fail in init, naming the missing rank,
    // instead of waiting here for a message that never comes.
    Status first;
    for (int i = 1; i < m; ++i) {
      const Status st = comm->bootstrap->sendTo(stay[static_cast<size_t>(i)], kShrinkTag, msg.data(), msg.size(),
                                                options.initTimeoutSec);
      if (!st.ok() && first.ok()) first = st;
    }
    COLLIE_RETURN_IF_ERROR(first);
  } else {
    uint8_t msg[kShrinkMessageBytes];
    COLLIE_RETURN_IF_ERROR(
        comm->bootstrap->recvFrom(leader, kShrinkTag, msg, sizeof(msg), options.initTimeoutSec)
            .withContext("waiting for rank " + std::to_string(leader) + ", the first rank that stays"));
    memcpy(&id, msg, sizeof(id));
    const uint32_t theirM = getBe32(msg + sizeof(id));
    const uint64_t theirHash = getBe64(msg + sizeof(id) + 4);
    if (theirM != static_cast<uint32_t>(m) || theirHash != listHash)
      return Status::error(collieInvalidUsage,
                           "rank %d excludes another list of ranks than this rank (%u ranks stay there, %d here): "
                           "every rank that stays must pass the same excludeRanksList",
                           leader, theirM, m);
  }
  COLLIE_INFO("shrink: %zu of %d ranks excluded -> rank %d of %d", excluded.size(), n, newRank, m);
  DeviceGuard guard(options.cudaDevice);
  return commInit(id, m, newRank, options, newcomm);
}

}  // namespace

}  // namespace collie

extern "C" collieResult_t collieCommShrink(collieComm_t comm, const int* excludeRanksList, int excludeRanksCount,
                                           collieComm_t* newcomm, collieConfig_t* config, int shrinkFlags) {
  return guarded(comm, [&] {
    const char* call = "collieCommShrink";
    if (newcomm == nullptr) return Status::error(collieInvalidArgument, "%s: newcomm is NULL", call);
    *newcomm = nullptr;
    // A broken communicator (a failed collective) is what shrinking is for, and a revoked one (collieCommRevoke)
    // is the way NCCL prepares it: only an aborted or finalized one is refused.
    COLLIE_RETURN_IF_ERROR(collie::api::checkComm(comm, call, collie::api::Accept::kRevokedOrBroken));
    if (shrinkFlags != COLLIE_SHRINK_DEFAULT && shrinkFlags != COLLIE_SHRINK_ABORT)
      return Status::error(collieInvalidArgument,
                           "%s: shrinkFlags %d is neither COLLIE_SHRINK_DEFAULT (0) nor COLLIE_SHRINK_ABORT (1)", call,
                           shrinkFlags);
    const int n = comm->nranks;
    if (excludeRanksCount < 0 || excludeRanksCount >= n)
      return Status::error(collieInvalidArgument,
                           "%s: excludeRanksCount %d is not in [0, %d): at least this rank must stay", call,
                           excludeRanksCount, n);
    if (excludeRanksCount > 0 && excludeRanksList == nullptr)
      return Status::error(collieInvalidArgument, "%s: excludeRanksList is NULL with excludeRanksCount %d", call,
                           excludeRanksCount);
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excluded[static_cast<size_t>(i)];
      if (r < 0 || r >= n)
        return Status::error(collieInvalidArgument, "%s: excludeRanksList[%d] = %d is not a rank of this %d-rank comm",
                             call, i, r, n);
      if (r == comm->rank)
        return Status::error(collieInvalidArgument,
                             "%s: excludeRanksList[%d] = %d is this rank; only the ranks that stay call it", call, i,
                             r);
    }
    std::sort(excluded.begin(), excluded.end());
    const auto dup = std::adjacent_find(excluded.begin(), excluded.end());
    if (dup != excluded.end())
      return Status::error(collieInvalidArgument, "%s: rank %d is in excludeRanksList twice", call, *dup);
    collie::InitOptions options = collie::inheritedOptions(comm);
    if (config != nullptr) {
      COLLIE_RETURN_IF_ERROR(collie::resolveConfig(config, &options).withContext(call));
      options.cudaDevice = comm->cudaDevice;  // a config has no device: the child stays on the parent's GPU
    }
    const bool abortFirst = shrinkFlags == COLLIE_SHRINK_ABORT;
    if (collie::group::active()) {
      collie::group::enqueue(
          comm, [=] { return collie::shrinkNow(comm, excluded, options, abortFirst, newcomm).withContext(call); });
      return Status();
    }
    return collie::shrinkNow(comm, excluded, options, abortFirst, newcomm).withContext(call);
  });
}
