#include "core/embedding.h"

#include "core/comm.h"
#include "core/group.h"

namespace collie {
namespace embedding {

bool commFacts(collieComm_t comm, CommFacts* out) {
  if (comm == nullptr || !pinComm(comm)) return false;
  out->nranks = comm->nranks;
  out->rank = comm->rank;
  out->deviceFootprint = comm->deviceFootprint;
  unpinComm(comm);
  return true;
}

Status endGroupWithoutRunning(size_t* dropped) { return group::endWithoutRunning(dropped); }

Status initTimeoutSec(double* out) {
  InitOptions options;
  COLLIE_RETURN_IF_ERROR(resolveConfig(nullptr, &options));
  *out = options.initTimeoutSec;
  return Status();
}

}  // namespace embedding
}  // namespace collie
