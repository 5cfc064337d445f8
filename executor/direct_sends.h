// Which sends of a rank's Program a receiver may read in place, from the
// sender's own buffer, instead of the sender copying each slice into the
// receiver's slot first (the "read in place" path of the slot protocol,
// executor/protocol.h). It saves a pass over memory per byte sent: the
// sender's read and the slot's write become nothing, the receiver reads the
// sender's buffer where it would have read its slot.
//
// A slice read in place must not change until the receiver has credited it.
// Instead of making later writes wait for credits (new waits the verifier's
// deadlock proof knows nothing of), only sends whose bytes no later step of
// the program writes are marked, and the executor waits for every credit of
// the channel before it moves on (the user may write the buffers once the
// call returns; a kernel ends with that wait, its drain). Input and output
// may be one buffer (in place), so ranges are compared as addresses. Scratch
// is never read in place: rounds reuse it.
//
// A later write may still be safe: when it comes after the receiver has
// finished reading, by the causal order of the ranks' programs. Steps of one
// program run one after another (executor/step_runner.h), and a receive takes
// a slice only after its sender posted it, which the sender does only once its
// earlier steps are done; but the steps of a group (joined, or an exchange
// group, program.h) may all start when the group does. So the receiver's step that reads the send "happens
// before" a step of ours whenever a chain of such edges leads from the one to
// the other, through any ranks. A receiver that forwards what it reads orders
// each slice the same way, though not the end of its step: the reduced chunk
// of an in-place ring comes back so to the rank it started from. readOrderFrom
// finds both orders from every rank's program (per channel: each channel runs
// the programs on its own part of the buffers).
//
// Who reads in place: ranks that are threads of one process, on the host
// (core/comm.cc) and on one GPU (executor/cuda_executor.cc), never through a proxy.
#pragma once

#include <climits>
#include <cstdint>
#include <vector>

#include "algorithms/program.h"
#include "base/status.h"

namespace collie {

/// When a receiver's read of each send of one rank is known to be over, in the
/// causal order of every rank's program (readOrderFrom), for the sending steps
/// i of that rank (-1 elsewhere):
struct ReadOrder {
  /// The first step of ours whose writes come after the receiver's whole step
  /// that reads step i (INT_MAX: none is known to).
  std::vector<int> stepDone;
  /// The step of ours that receives, slice by slice, what a chain of forwards
  /// (kRecv*Send of the same count) starting with that read passes on: each
  /// slice it writes comes after the receiver read the same slice of ours, so
  /// it may write exactly what step i sent (-1: no such chain).
  std::vector<int> sliceChain;
};

/// marks[i] = 1 when step i's send may be read in place: its peer is in
/// `inProcess` (a rank whose loads reach our memory), it sends at least
/// `minBytes`, and no step after it (nor the step itself, but for the bytes
/// it sends) writes a byte of what it sends, unless that step is known to
/// come after the receiver's read (ReadOrder). What it sends is its source, or
/// for the forwarding kinds the destination it has just written: the same
/// values, except for a kRecvCopySend that divides (it forwards what it
/// received, not the mean it wrote), which is never marked. `bufs` are the
/// input, output and scratch buffers as the executor passes them (Buffer order).
/// `causal`: where a later step writes what a send sent, rebuild every rank's
/// program (everyRanksProgram) and ask readOrderFrom; only for programs each
/// channel runs on a part of its own (not steps split among channels), and at
/// most kCausalRanks ranks (the cost grows as ranks^3 x steps). `order`
/// (tests) gives readOrderFrom's answer instead. Returns whether any step is marked.
bool markDirectSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                     const std::vector<bool>& inProcess, uint64_t minBytes, std::vector<uint8_t>* marks,
                     bool causal = false, const ReadOrder* order = nullptr);

/// The most ranks markDirectSends' causal order is worked out for.
constexpr int kCausalRanks = 16;

/// The ReadOrder of all[me]'s sends, from every rank's program. Sends and
/// receives of each pair of ranks match in program order, steps that move no
/// element taking no part. Empty vectors when they do not match (not programs
/// of one collective).
ReadOrder readOrderFrom(const std::vector<Program>& all, int me);

/// Every rank's program of the algorithm, shape and round of `mine`, rebuilt
/// from the registry; false where that cannot be done: all-to-all-v and
/// send/recv (per-rank counts), node-aware algorithms (the node size is not
/// in a Program), an algorithm not registered, or a rebuilt program of this
/// rank that differs from `mine`.
bool everyRanksProgram(const Program& mine, std::vector<Program>* all);

/// COLLIE_DIRECT_READ_BYTES: the smallest send read in place (default 131072; 0: every send; negative: none).
/// An unparsable value is an error naming the variable.
Status readDirectReadBytes(int64_t* out);

/// Buffers for markDirectSends where no call's exist (counting a program's traffic ahead of any call): the
/// input, the output `outputShiftBytes` after it in place or far from it, the scratch far from both. Addresses
/// only: markDirectSends compares them and never loads through them.
void placeholderBuffers(bool inPlace, int64_t outputShiftBytes, void* bufs[3]);

}  // namespace collie
