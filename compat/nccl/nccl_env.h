// NCCL's environment variables, mapped onto Collie's. The mapping is planned
// by a pure function (tested on its own) and applied once when libnccl.so.2
// is loaded, as fallbacks (base/env.h): a COLLIE_* variable that is set wins.
//
//   NCCL_DEBUG          -> COLLIE_DEBUG   (VERSION -> WARN plus a version line; ABORT -> WARN)
//   NCCL_DEBUG_FILE     -> COLLIE_DEBUG_FILE (same %h and %p)
//   NCCL_ALGO           -> COLLIE_ALGO    (Ring / Tree: see mapAlgo)
//   NCCL_PROTO          -> COLLIE_PROTO   (Simple / LL; LL128 is nearest to Simple; CUDA backend only)
//   NCCL_SOCKET_IFNAME  -> COLLIE_SOCKET_IFNAME (same syntax: ^ excludes, = matches exactly)
//   NCCL_COMM_ID        used by ncclGetUniqueId / ncclCommInitRank (compat/nccl/nccl_api.cc)
// Every other NCCL_* or TORCH_NCCL_* variable is accepted and named once at INFO as ignored.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace collie {
namespace nccl {

/// What the environment asks of Collie.
struct EnvPlan {
  std::vector<std::pair<std::string, std::string>> fallbacks;  // COLLIE_* name, value
  std::vector<std::string> info;                               // lines to log once at INFO
  bool printVersion = false;                                   // NCCL_DEBUG=VERSION
};

/// Plans the mapping for `vars` (name, value pairs of the environment).
EnvPlan planEnvironment(const std::vector<std::pair<std::string, std::string>>& vars);

/// NCCL_ALGO's value as a COLLIE_ALGO spec ("" when nothing is pinned); *note explains it.
/// The global form ("Ring", "Tree,Ring", "^Tree") and the per-collective one
/// ("allreduce:tree;broadcast:ring") are understood; an algorithm set pins
/// allreduce to ring or tree when it allows exactly one of them, reduce-scatter
/// and allgather to ring when it allows ring and not PAT, and broadcast and
/// reduce to chain (NCCL's ring) when it allows ring; anything else is left to
/// Collie's tuner. NVLS, CollNet and PAT have no Collie equivalent.
std::string mapAlgo(const std::string& value, std::string* note);

/// NCCL_PROTO's value as a COLLIE_PROTO value ("" when nothing is pinned).
std::string mapProto(const std::string& value, std::string* note);

/// NCCL_DEBUG's value as a COLLIE_DEBUG value ("" when unknown).
std::string mapDebug(const std::string& value, bool* printVersion, std::string* note);

/// Logs the plan's INFO lines (and the version line) once per process; called by the init calls.
void announce();

}  // namespace nccl
}  // namespace collie
