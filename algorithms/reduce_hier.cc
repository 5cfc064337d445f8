// Hierarchical reduce: the hierarchical broadcast (broadcast_hier.cc) run
// backwards. Reduce-scatter inside every node, reduce each piece across nodes
// on its own chain, gather the pieces at the root. Each rank carries 1/L of
// the buffer over the network (L = ranks per node, K = n / L nodes, local
// rank l = r % L), where a chain or a tree sends all of it through one rank.
//
//   phase 1  ring reduce-scatter of L pieces inside every node: local rank l
//            holds piece l summed over its node                          (L-1 steps, S/L each)
//   phase 2  piece l: chain reduce through local rank l of every node,
//            ending in the root's node                                   (K-1 hops, S/L each)
//   phase 3  local rank j of the root's node sends piece j to the root  (L-1 receives at the root)
//
//   n = 6, L = 3, K = 2, root 4 (node 1, local 1), pieces a b c:
//     phase 1   ring reduce-scatter in node 0 (r0: a, r1: b, r2: c) and in node 1 (r3: a, r4: b, r5: c)
//     phase 2   r0 -> r3 (a), r1 -> r4 (b), r2 -> r5 (c)   (the only network traffic)
//     phase 3   r3 -> r4 (a), r5 -> r4 (c)
//
// Buffers: only the root has an output. Another rank keeps its partial piece
// in scratch (S/L elements) where a later step reads it whole; where the next
// step just sends it on, the receive that completes it forwards it instead.
// The reduction completes at the root: avg divides when the root writes a
// piece into its output. Round rule kNodeSlots, as the broadcast. With one
// rank per node this is the chain; on one node, reduce-scatter then gather.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildReduceHier(const ProgramArgs& args) {
  Program p = emptyProgram(args, "hier");
  const int l = nodeSize(args.nranks, args.ranksPerNode), k = args.nranks / l;
  const int node = args.rank / l, local = args.rank % l;
  const int rootNode = args.root / l, rootLocal = args.root % l;
  const bool root = args.rank == args.root;
  const std::vector<Chunk> pieces = balancedChunks(args.count, l);
  const Chunk& mine = pieces[static_cast<size_t>(local)];
  // Where this rank's piece is summed: the root's output, else scratch.
  const Range sum = root ? Range{Buffer::kOutput, mine.offset} : Range{Buffer::kScratch, 0};
  std::vector<Step> steps;

  // Phase 1: inside every node (with one rank per node the piece is the input).
  Range piece{Buffer::kInput, mine.offset};
  if (l > 1 || k == 1) {
    appendRingReduceScatter(l, local, pieces, Buffer::kInput, sum, &steps);
    renumberPeers(&steps, 0, node * l, 1);
    piece = sum;
  }
  const size_t phase1 = steps.size();
  // Phase 2: piece `local` across nodes, among ranks local + g * L, into the root's node.
  if (k > 1) {
    std::vector<Step> chain = buildReduceChain(groupArgs(args, k, node, rootNode, mine.count)).steps;
    for (Step& s : chain) {
      s.src = piece;
      if (s.op == StepOp::kRecvReduceCopy) s.dst = sum;
    }
    renumberPeers(&chain, 0, local, l);
    for (const Step& s : chain) appendForwarding(s, &steps);
  }
  // Phase 3: the root's node sends its pieces to the root; only the root divides.
  if (root) {
    for (int d = 1; d < l; ++d) {
      const Chunk& c = pieces[static_cast<size_t>((rootLocal + d) % l)];
      steps.push_back(makeStep(StepOp::kRecv, -1, node * l + (rootLocal + d) % l, Range{},
                               Range{Buffer::kOutput, c.offset}, c.count, true));
    }
  } else if (node == rootNode) {
    appendForwarding(makeStep(StepOp::kSend, args.root, -1, sum, Range{}, mine.count), &steps);
  }
  // Only the root completes the reduction: in the chain (its own piece) or, on
  // one node, at the end of the reduce-scatter; the root's receives above.
  for (size_t i = 0; i < steps.size(); ++i)
    if (!root || (k > 1 && i < phase1)) steps[i].finalize = false;
  for (const Step& s : steps)
    if (s.src.buffer == Buffer::kScratch || s.dst.buffer == Buffer::kScratch) p.scratchCount = mine.count;
  p.steps = std::move(steps);
  return p;
}

}  // namespace collie
