// Topology: the machine a simulated collective runs on, as an alpha-beta-gamma
// cost model per link class. The simulator (simulator.h) charges every slice a
// rank sends `alpha + bytes * beta` of the link class between the two ranks,
// and every byte it reduces `gamma`; the tuner (tuner.h) picks algorithms with it.
//
// Ranks are placed in order, `ranksPerNode` to a node: ranks r and q share a
// node when r / ranksPerNode == q / ranksPerNode, and then talk over the
// `intra` class, otherwise over `inter`.
//
// A topology is one of the built-ins (builtinTopologies()) or a small text file:
//
//   # comment                      (anything after '#' on a line)
//   base h100-nvlink               start from a built-in (must be the first key)
//   name my-cluster
//   nodes 4                        -> nranks = nodes * ranks_per_node
//   ranks_per_node 8
//   intra nvlink                   link class inside a node
//   inter network                  link class between nodes
//   nvlink_alpha_us 1.0            per class: latency per slice, microseconds
//   nvlink_gbps 450                per class: bandwidth per direction, GB/s (1e9 bytes/s)
//   gamma_gbps 1000                the rate at which a rank reduces, GB/s
//   shared_memory_gbps 1900        memory traffic (read + written) per second that
//                                  all ranks of a node share: ranks on one GPU
//   serial_batches 1               1: a batch of small exchanges costs a round trip per
//                                  exchange (the GPU's kernels), 0: one for the batch
//   slot_bytes 262144              executor slot size
//   slots 4                        slots per connection
//
// Classes are named samehost, sharedgpu, nvlink, pcie, network. Every key is
// optional and may appear once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace collie {

/// How two ranks are connected.
enum class LinkClass : uint8_t {
  kSameHost,   // processes or threads of one CPU host, over shared memory
  kSharedGpu,  // ranks sharing one GPU: a copy through its memory
  kNvlink,     // GPUs of one node over NVLink / NVSwitch
  kPcie,       // GPUs of one node over PCIe peer-to-peer
  kNetwork,    // nodes over the network (one NIC per rank)
};
constexpr int kLinkClasses = 5;

const char* linkClassName(LinkClass c);
/// Parses a class name as written in topology files ("nvlink"); false when unknown.
bool linkClassFromName(const std::string& name, LinkClass* out);

/// The cost of a link class: a slice of b bytes takes alpha + b * beta seconds
/// from the moment the sender starts writing it until the receiver sees it.
struct LinkCost {
  double alpha = 0;  // seconds per message (slice)
  double beta = 0;   // seconds per byte: 1 / bandwidth per direction
};

struct Topology {
  std::string name;
  int nranks = 8;        // the default size (the simulator takes the size of the call)
  int ranksPerNode = 8;  // consecutive ranks share a node
  LinkClass intra = LinkClass::kNvlink;
  LinkClass inter = LinkClass::kNetwork;
  LinkCost links[kLinkClasses];
  double gamma = 0;  // seconds per byte reduced (a local copy costs 2/3 of it: 2 of 3 memory streams)
  // Seconds per byte of memory traffic (algorithms/memory_traffic.h) that the ranks of one node move through one
  // memory system, as ranks sharing a GPU do; 0 when each rank has its own. A call then takes at least the node's
  // summed traffic times this (simulator.h).
  double sharedMemoryBeta = 0;
  // Whether a batch of small exchanges (program.h, cutExchangeBatch) costs a round trip per exchange rather than one
  // for the batch: so on the GPU, where the kernels take a batch's slices one peer after another (about as long
  // per peer as a lone recursive-doubling step, docs/PERFORMANCE.md); the host's threads overlap them.
  bool serialBatches = false;
  uint64_t slotBytes = 1 << 18;  // executor defaults (executor/protocol.h): 4 slots of 256 KiB
  uint32_t slots = 4;

  bool sameNode(int r, int q) const { return r / ranksPerNode == q / ranksPerNode; }
  LinkClass classBetween(int r, int q) const { return sameNode(r, q) ? intra : inter; }
  const LinkCost& link(LinkClass c) const { return links[static_cast<int>(c)]; }
  LinkCost& link(LinkClass c) { return links[static_cast<int>(c)]; }

  /// The topology in the file format above; parseTopology() reads it back.
  std::string describe() const;
};

/// Limits the parser enforces (and the simulator relies on).
constexpr int kMaxTopologyRanks = 1 << 20;
constexpr uint32_t kMaxSlots = 64;

/// h100-nvlink, a100-nvlink, h100-2x8-400g, h100-16x8-400g, host, h100-shared, h200-shared.
const std::vector<Topology>& builtinTopologies();
/// The built-in called `name`; nullptr when there is none.
const Topology* findTopology(const std::string& name);
/// The names of the built-ins, comma-separated, for messages.
std::string topologyNames();

/// Parses the text of a topology file. Errors name the line and what was
/// expected there; `source` (a file name) prefixes them.
Status parseTopology(const std::string& text, const std::string& source, Topology* out);

/// A built-in's name, or else the path of a topology file.
Status loadTopology(const std::string& nameOrPath, Topology* out);

/// The model of ranks that all share one GPU whose memory peaks at `peakBytesPerSec` (read + written, from its
/// clock and bus width): h100-shared's figures, with the shared memory bandwidth scaled to that peak.
Topology sharedGpuTopology(double peakBytesPerSec);

}  // namespace collie
