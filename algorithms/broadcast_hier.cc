// Hierarchical broadcast: scatter inside the root's node, broadcast each
// piece across nodes on its own chain, allgather inside every node. Each
// rank then carries 1/L of the message over the network instead of one rank
// per node carrying all of it, so with a NIC per rank the network part costs
// S/L per NIC (L = ranks per node, K = n / L nodes, local rank l = r % L).
// The chain and binomial broadcasts cross the network once per node too, but
// always through one rank's link.
//
//   phase 1  the root sends piece j of L to local rank j of its node   (L-1 sends at the root)
//   phase 2  piece l: chain from the root's node through local rank l
//            of every node, in node order from the root's              (K-1 hops, S/L each)
//   phase 3  ring allgather of the L pieces inside every node         (L-1 steps, S/L each)
//
//   n = 6, L = 3, K = 2, root 4 (node 1, local 1), pieces a b c:
//     node 0: r0 r1 r2   node 1: r3 r4 r5
//     phase 1   r4 -> r3 (a), r4 -> r5 (c)             r4 keeps b
//     phase 2   r3 -> r0 (a), r4 -> r1 (b), r5 -> r2 (c)   (the only network traffic)
//     phase 3   ring allgather of a b c in node 0 and in node 1
//
// Cost per rank: (L-1)/L of the buffer sent inside the node (the root twice
// that), 1/L across nodes. Round rule kNodeSlots: a round gives every piece
// at most one slot, as the hierarchical allreduce. With one rank per node
// this is the chain; on one node, scatter then allgather.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildBroadcastHier(const ProgramArgs& args) {
  Program p = emptyProgram(args, "hier");
  const int l = nodeSize(args.nranks, args.ranksPerNode), k = args.nranks / l;
  const int node = args.rank / l, local = args.rank % l;
  const int rootNode = args.root / l, rootLocal = args.root % l;
  const std::vector<Chunk> pieces = balancedChunks(args.count, l);
  const Chunk& mine = pieces[static_cast<size_t>(local)];
  const Range out{Buffer::kOutput, 0}, myPiece{Buffer::kOutput, mine.offset};

  // Phase 1: inside the root's node.
  if (args.rank == args.root) {
    for (int d = 1; d < l; ++d) {
      const Chunk& c = pieces[static_cast<size_t>((rootLocal + d) % l)];
      p.steps.push_back(makeStep(StepOp::kSend, node * l + (rootLocal + d) % l, -1, Range{Buffer::kInput, c.offset},
                                 Range{}, c.count));
    }
    p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, 0}, out, args.count));
  } else if (node == rootNode) {
    p.steps.push_back(makeStep(StepOp::kRecv, -1, args.root, Range{}, myPiece, mine.count));
  }
  // Phase 2: piece `local` across nodes, among ranks local + g * L; the chain's
  // first rank already holds it in its output.
  // A rank of the root's node forwards its piece as it arrives from the root.
  if (k > 1) {
    std::vector<Step> chain = buildBroadcastChain(groupArgs(args, k, node, rootNode, mine.count)).steps;
    renumberPeers(&chain, 0, local, l);
    for (Step s : chain) {
      if (s.op == StepOp::kCopy) continue;
      s.src = myPiece;
      s.dst = myPiece;
      appendForwarding(s, &p.steps);
    }
  }
  // Phase 3: every node shares its pieces.
  const size_t from = p.steps.size();
  appendRingAllGather(l, local, pieces, Buffer::kOutput, &p.steps);
  renumberPeers(&p.steps, from, node * l, 1);
  return p;
}

}  // namespace collie
