// Memory the library hands out (collieMemAlloc) and buffers a communicator is
// told about (collieCommRegister). On the host backend registration is
// bookkeeping only: the host executor copies through its windows either way.
#pragma once

#include <cstddef>

namespace collie {

/// One registered range; its address in collieComm::registrations is the handle.
struct Registration {
  const void* buffer = nullptr;
  size_t bytes = 0;
};

}  // namespace collie
