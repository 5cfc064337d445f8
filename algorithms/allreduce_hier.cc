// Hierarchical allreduce: reduce inside each node, across nodes, then share
// inside each node, so each byte crosses the network once per direction
// rather than 2(n-1)/n times per rank as in a flat ring. Nodes are ranks
// r / L (L = ProgramArgs::ranksPerNode, K = n / L nodes); local rank l = r % L.
//
//   phase 1  ring reduce-scatter inside the node over L chunks: local rank l
//            holds chunk l reduced over its node           (L-1 steps, count/L each)
//   phase 2  ring allreduce of chunk l across the K ranks with local rank l,
//            one per node: chunk l reduced over all ranks  (2(K-1) steps, count/n each)
//   phase 3  ring allgather inside the node over L chunks  (L-1 steps, count/L each)
//
//   n = 4, L = 2, K = 2, chunks a b:
//     node 0: r0 r1   node 1: r2 r3
//     phase 1   r0: a0+a1   r1: b0+b1      r2: a2+a3   r3: b2+b3
//     phase 2   r0 <-> r2 allreduce a       r1 <-> r3 allreduce b    (the only network traffic)
//     phase 3   r0 <-> r1 exchange a, b     r2 <-> r3 exchange a, b
//
// Cost per rank: intra-node 2(L-1)/L of the buffer sent, inter-node 2(K-1)/n.
// Without a node layout (ranksPerNode 0, or not dividing n) every rank is on
// one node and this is the ring allreduce (phase 2 is empty).
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildAllReduceHier(const ProgramArgs& args) {
  Program p = emptyProgram(args, "hier");
  const int l = nodeSize(args.nranks, args.ranksPerNode), k = args.nranks / l;
  const int node = args.rank / l, local = args.rank % l;
  const std::vector<Chunk> chunks = balancedChunks(args.count, l);
  const Chunk& mine = chunks[static_cast<size_t>(local)];

  // Phase 1: inside the node, among ranks node*L + 0..L-1.
  size_t from = p.steps.size();
  appendRingReduceScatter(l, local, chunks, Buffer::kInput, Range{Buffer::kOutput, mine.offset}, &p.steps);
  renumberPeers(&p.steps, from, node * l, 1);
  if (k > 1) {
    // The reduction is complete only after phase 2: avg divides there.
    for (size_t i = from; i < p.steps.size(); ++i) p.steps[i].finalize = false;
    // Phase 2: chunk `local` across nodes, among ranks local + 0..K-1 * L, in place in the output.
    std::vector<Chunk> parts = balancedChunks(mine.count, k);
    for (Chunk& c : parts) c.offset += mine.offset;
    from = p.steps.size();
    appendRingReduceScatter(k, node, parts, Buffer::kOutput,
                            Range{Buffer::kOutput, parts[static_cast<size_t>(node)].offset}, &p.steps);
    appendRingAllGather(k, node, parts, Buffer::kOutput, &p.steps);
    renumberPeers(&p.steps, from, local, l);
  }
  // Phase 3: inside the node again.
  from = p.steps.size();
  appendRingAllGather(l, local, chunks, Buffer::kOutput, &p.steps);
  renumberPeers(&p.steps, from, node * l, 1);
  return p;
}

}  // namespace collie
