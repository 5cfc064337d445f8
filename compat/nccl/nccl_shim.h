// What the two halves of libnccl.so.2 (nccl_api.cc: NCCL 2.19's calls;
// nccl_later.cc: calls of later NCCL releases) share: turning handles and
// results between the two names, and recording a failure the shim finds
// itself so that ncclGetLastError reports it like one of Collie's own.
#pragma once

#include "base/status.h"
#include "collie.h"
#include "compat/nccl/nccl.h"
#include "core/embedding.h"

// Defines pncclNAME as another name of nccl<NAME>, for tools that interpose on the nccl* names.
#define COLLIE_NCCL_ALIAS(ret, name, params) extern "C" ret p##name params __attribute__((alias(#name)))

namespace collie {
namespace nccl {

inline ncclResult_t toNccl(collieResult_t r) { return static_cast<ncclResult_t>(r); }
inline collieComm_t toCollie(ncclComm_t c) { return reinterpret_cast<collieComm_t>(c); }

/// Records `st` as the last error (of `comm` when given) and returns its code.
inline ncclResult_t fail(const Status& st, ncclComm_t comm = nullptr) { return toNccl(report(st, toCollie(comm))); }

/// ncclInvalidUsage: "<call>: <what> not supported by Collie (see docs/nccl-compat.md)".
inline ncclResult_t unsupported(const char* call, const char* what, ncclComm_t comm = nullptr) {
  return fail(Status::error(collieInvalidUsage, "%s: %s not supported by Collie (see docs/nccl-compat.md)", call, what),
              comm);
}

}  // namespace nccl
}  // namespace collie
