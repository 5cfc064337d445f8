// Linear scatter: the root sends every other rank its block directly. It is
// the linear gather run backwards, built as such (scatterFromGather below):
// reverse the step list, turn each send into a receive from the same peer and
// each receive into a send, and swap the roles of input and output.
//
//   phases: one; the root sends block r to each rank r in turn, in ring order
//           from root-1 down to root+1, then copies its own block
//   steps:  root n (n-1 sends + 1 copy), every other rank 1 receive
//   bytes:  the root sends (n-1)*count, all of it over its own links; a
//           non-root receives count
//
//   n = 4, root 0:                .--b1--> r1
//     r0 input: [b0 b1 b2 b3] --+--b2--> r2      (b0 by a local copy)
//                               '--b3--> r3
//
// Round rule kNone: the root is the only sender and each rank it sends to only
// receives from it, so a full slot always drains. No scratch. In place (the
// root's output is block `root` of its input) the copy is onto itself.
#include "algorithms/registry.h"

namespace collie {

namespace {

// The gather's view of the same buffer: a gather's input is a scatter's output and back.
Range swapRoles(Range r) {
  if (r.buffer == Buffer::kInput) {
    r.buffer = Buffer::kOutput;
  } else if (r.buffer == Buffer::kOutput) {
    r.buffer = Buffer::kInput;
  }
  return r;
}

}  // namespace

// Run backwards, every message of a gather goes the other way: what a rank
// received last it now sends first, so each pair's sends and receives still
// match in order, and a gather free of deadlock gives a scatter free of it
// (the waits of the tree reverse, and a tree has no cycle either way).
Program scatterFromGather(const Program& gather) {
  Program p = gather;
  p.collective = Collective::kScatter;
  p.steps.clear();
  for (auto it = gather.steps.rbegin(); it != gather.steps.rend(); ++it) {
    Step s;
    s.count = it->count;
    switch (it->op) {
      case StepOp::kSend:
        s.op = StepOp::kRecv;
        s.recvPeer = it->sendPeer;
        s.dst = swapRoles(it->src);
        break;
      case StepOp::kRecv:
        s.op = StepOp::kSend;
        s.sendPeer = it->recvPeer;
        s.src = swapRoles(it->dst);
        break;
      default:  // kCopy; a gather moves data and never reduces
        s.op = StepOp::kCopy;
        s.src = swapRoles(it->dst);
        s.dst = swapRoles(it->src);
        break;
    }
    p.steps.push_back(s);
  }
  return p;
}

Program buildScatterLinear(const ProgramArgs& args) {
  ProgramArgs gather = args;
  gather.collective = Collective::kGather;
  return scatterFromGather(buildGatherLinear(gather));
}

}  // namespace collie
