// How long a waiting host rank spins before it gives its core away. Spinning
// is the fastest wait while every rank has a core of its own; once the ranks
// of a machine outnumber the CPUs they may run on, a spinning rank holds the
// core the peer it waits for needs (CI runs up to 8 ranks on 2 cores), and
// yielding early is several times faster (docs/design.md, "Semantics worth knowing").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/peer_info.h"

namespace collie {

/// Hostname + boot id: the machine we run on, whatever COLLIE_HOSTID or
/// COLLIE_FAKE_NODES make of the host identity.
std::string machineIdentity();

/// Fills info's `machine` and `cpus` fields: a hash of machineIdentity() and
/// the CPUs this thread may run on.
void describeCpus(PeerInfo* info);

/// Polls before a wait of `rank` starts yielding its core: COLLIE_SPIN_POLLS
/// when set; else kSpinPolls, or kSharedSpinPolls when the ranks of our
/// machine outnumber the union of their CPUs.
int spinPolls(const std::vector<PeerInfo>& peers, int rank);

constexpr int kSpinPolls = 200;
constexpr int kSharedSpinPolls = 30;

}  // namespace collie
