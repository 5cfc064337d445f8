#include "core/cpu_share.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"

namespace collie {

std::string machineIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + ":" + boot;
}

void describeCpus(PeerInfo* info) {
  const std::string id = machineIdentity();
  info->machine = fnv1a(id.data(), id.size());
  memset(info->cpus, 0, sizeof(info->cpus));
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;  // unknown: counts as no CPU, so never "shared"
  constexpr int kBits = 64 * static_cast<int>(sizeof(info->cpus) / sizeof(info->cpus[0]));
  for (int c = 0; c < CPU_SETSIZE && c < kBits; ++c)
    if (CPU_ISSET(c, &set)) info->cpus[c / 64] |= uint64_t{1} << (c % 64);
}

int spinPolls(const std::vector<PeerInfo>& peers, int rank) {
  bool bad = false;
  const int64_t forced = env::getInt("COLLIE_SPIN_POLLS", -1, &bad);  // a malformed value is logged there
  if (!bad && forced >= 0) return static_cast<int>(std::min<int64_t>(forced, 1 << 30));
  const PeerInfo& me = peers[static_cast<size_t>(rank)];
  int ranks = 0, cpus = 0;
  uint64_t all[sizeof(me.cpus) / sizeof(me.cpus[0])] = {};
  for (const PeerInfo& p : peers) {
    if (p.machine != me.machine) continue;
    ++ranks;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) all[i] |= p.cpus[i];
  }
  for (uint64_t word : all) cpus += __builtin_popcountll(word);
  // Ranks bound to CPUs of their own (mpirun --bind-to core) have one CPU
  // each, and their union still counts one per rank.
  if (cpus == 0 || ranks <= cpus) return kSpinPolls;
  COLLIE_INFO(
      "%d ranks of this communicator share %d CPUs on this machine: a waiting rank yields its core after %d "
      "polls (COLLIE_SPIN_POLLS)",
      ranks, cpus, kSharedSpinPolls);
  return kSharedSpinPolls;
}

}  // namespace collie
