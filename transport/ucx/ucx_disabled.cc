// Built instead of ucx_windows.cc when COLLIE_WITH_UCX is OFF (or pkg-config
// finds no ucx): communicators spanning hosts then fail with a sentence that
// says how to get them.
#include "transport/ucx/ucx_windows.h"

namespace collie {

bool ucxBuilt() { return false; }

Status createUcxWindows(Bootstrap*, const std::vector<bool>&, uint8_t*, size_t, std::unique_ptr<RemoteWindows>*) {
  return Status::error(collieInvalidUsage,
                       "a communicator spanning hosts needs the UCX transport, which this build of Collie does not "
                       "have (configure with -DCOLLIE_WITH_UCX=ON and the UCX development files, e.g. libucx-dev)");
}

}  // namespace collie
