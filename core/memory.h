// Memory the library hands out (collieMemAlloc) and buffers a communicator is
// told about (collieCommRegister, collieCommWindowRegister). On the host backend
// registration is bookkeeping only: the host executor copies through its windows
// either way.
#pragma once

#include <cstddef>

namespace collie {

/// One registered range; its address in collieComm::registrations is the handle.
struct Registration {
  const void* buffer = nullptr;
  size_t bytes = 0;
};

/// One window (collieCommWindowRegister); its address in collieComm::bufferWindowList is the handle. number 0:
/// bookkeeping only (no peer process maps it), else its number in collieComm::bufferWindows.
struct Window {
  void* buffer = nullptr;
  size_t bytes = 0;
  int number = 0;
};

/// The start of the collieMemAlloc device allocation that holds [p, p + bytes), or null.
void* memAllocStart(const void* p, size_t bytes);

}  // namespace collie
