// The threads on which collieGroupEnd runs a group's communicator inits and the queues of a group of several
// communicators (core/group.h). Each needs a thread of its own at once, since the ranks' parts wait for each other.
// A thread made and joined per communicator at every group end costs tens of microseconds each (more than a small
// call's enqueue, and one thread driving every rank of a GPU pays it at every call), so these threads are kept
// and reused: a worker that has run its task goes back to the idle list before it says so, so that group after
// group reuses the same few. They live until the process ends; a child process after fork starts a pool of its
// own (the parent's threads are not in it).
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"

namespace collie {
namespace group {

/// Runs every task at once, each on a worker of its own, and returns when all have returned; the calling thread
/// only waits (so that nothing a task does, a cudaSetDevice say, changes the caller's thread state). Tasks must
/// not throw. collieSystemError, before any task runs, where a thread cannot be started.
Status runTogether(const std::vector<std::function<void()>>& tasks);

/// Workers started so far in this process (for tests).
size_t workersStarted();

}  // namespace group
}  // namespace collie
