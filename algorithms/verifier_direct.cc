// The verifier's direct programs (program.h, "Direct steps"): ranks that load and store each other's buffers,
// in epochs separated by barriers. Within an epoch the ranks run at once in no order, so besides the values the
// machine proves (verifier.cc), each element of every rank's memory records who wrote and who read it in which
// epoch: a write of an element another rank writes or reads in the same epoch is a race, and so is a read of one
// another rank writes. A rank's own accesses are ordered by its program and never race. The ranks advance in
// turn as in verifier.cc; a rank at a barrier waits until every rank is at one, so while a rank runs epoch e,
// every other rank is in epoch e too (or waits at its end), and epochs stamp accesses comparably.
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "algorithms/verifier_machine.h"

namespace collie {
namespace verifier_internal {

namespace {

const char* bufferWord(Buffer b) {
  return b == Buffer::kInput ? "input" : (b == Buffer::kOutput ? "output" : "scratch");
}

uint64_t bufferSize(const RankState& s, Buffer b) {
  return b == Buffer::kInput ? s.inCount : (b == Buffer::kOutput ? s.outCount : s.scratch.size());
}

// Where a range of a rank's memory starts: input and output share one array (they overlap in place), scratch is
// another. `scratch` says which.
uint64_t position(const RankState& s, const Range& r, bool* scratch) {
  *scratch = r.buffer == Buffer::kScratch;
  return *scratch ? r.offset : (r.buffer == Buffer::kInput ? s.inBase : s.outBase) + r.offset;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return text;
}

// Where rank r's put `st` writes in its peer's memory: its dst, or for a block put (Step::peerDispl) its dst offset
// from where the peer receives r's block, by the peer's own program (its recvDispls, as the direct kernel learns
// them from the peer's entry announcement).
Range putTarget(const std::vector<Program>& programs, int r, const Step& st) {
  Range dst = st.dst;
  if (!st.peerDispl) return dst;
  const Program& q = programs[static_cast<size_t>(st.sendPeer)];
  if (static_cast<size_t>(r) < q.recvDispls.size()) dst.offset += q.recvDispls[static_cast<size_t>(r)];
  return dst;
}

}  // namespace

Status Machine::directViolation(int r, const std::string& what) const {
  const Program& p = programs_[static_cast<size_t>(r)];
  const RankState& s = ranks_[static_cast<size_t>(r)];
  return Status::error(collieInternalError, "%s %s, nranks %d, count %llu: rank %d step %zu (%s), epoch %d: %s",
                       p.algorithm.c_str(), collectiveName(p.collective), p.nranks,
                       static_cast<unsigned long long>(p.count), p.rank, s.pc,
                       s.pc < p.steps.size() ? stepOpName(p.steps[s.pc].op) : "end", s.epoch, what.c_str());
}

// Every rank must pass as many barriers as the others: one with more waits forever in the first barrier the
// others do not have. Found before anything runs, so the message names both ranks' counts.
Status Machine::setUpDirect() {
  std::vector<int> count(static_cast<size_t>(n_), 0);
  int most = 0, fewest = 0;
  for (int r = 0; r < n_; ++r) {
    for (const Step& st : programs_[static_cast<size_t>(r)].steps)
      count[static_cast<size_t>(r)] += st.op == StepOp::kBarrier;
    if (count[static_cast<size_t>(r)] > count[static_cast<size_t>(most)]) most = r;
    if (count[static_cast<size_t>(r)] < count[static_cast<size_t>(fewest)]) fewest = r;
    RankState& s = ranks_[static_cast<size_t>(r)];
    s.memAccess.assign(s.mem.size(), Access{});
    s.scratchAccess.assign(s.scratch.size(), Access{});
  }
  barriers_ = count[0];
  const int more = count[static_cast<size_t>(most)], fewer = count[static_cast<size_t>(fewest)];
  if (more == fewer) return Status();
  // Put rank `most` where it waits: at its barrier number `fewer`, in the epoch that barrier ends.
  RankState& s = ranks_[static_cast<size_t>(most)];
  const std::vector<Step>& steps = programs_[static_cast<size_t>(most)].steps;
  for (int seen = 0; s.pc < steps.size(); ++s.pc)
    if (steps[s.pc].op == StepOp::kBarrier && seen++ == fewer) break;
  s.epoch = fewer;
  return directViolation(most, format("deadlock: waits forever in barrier %d, which rank %d does not have (it has %d "
                                      "barriers, this rank %d); every rank must have as many barriers as the others",
                                      fewer, fewest, fewer, more));
}

Access* Machine::accessAt(RankState& s, const Range& r, uint64_t i) {
  switch (r.buffer) {
    case Buffer::kInput:
      return &s.memAccess[s.inBase + r.offset + i];
    case Buffer::kOutput:
      return &s.memAccess[s.outBase + r.offset + i];
    case Buffer::kScratch:
      return &s.scratchAccess[r.offset + i];
  }
  return nullptr;
}

// Rank r reads element i of `range` in rank `owner`'s memory.
Status Machine::noteRead(int r, int owner, const Range& range, uint64_t i) {
  const RankState& me = ranks_[static_cast<size_t>(r)];
  Access& a = *accessAt(ranks_[static_cast<size_t>(owner)], range, i);
  if (a.writeEpoch == me.epoch && a.writer != r)
    return directViolation(r, format("race: reads element %llu of rank %d's %s, which rank %d writes in the same "
                                     "epoch (its step %d)",
                                     static_cast<unsigned long long>(range.offset + i), owner, bufferWord(range.buffer),
                                     a.writer, a.writerStep));
  if (a.readEpoch != me.epoch) {
    a.readEpoch = me.epoch;
    a.readers = 0;
    a.reader[0] = a.reader[1] = -1;
  }
  const uint64_t bit = uint64_t{1} << r;
  if ((a.readers & bit) == 0) {
    for (int k = 0; k < 2; ++k)
      if (a.reader[k] < 0) {
        a.reader[k] = r;
        a.readerStep[k] = static_cast<int32_t>(me.pc);
        break;
      }
    a.readers |= bit;
  }
  return Status();
}

// Rank r writes element i of `range` in rank `owner`'s memory.
Status Machine::noteWrite(int r, int owner, const Range& range, uint64_t i) {
  const RankState& me = ranks_[static_cast<size_t>(r)];
  Access& a = *accessAt(ranks_[static_cast<size_t>(owner)], range, i);
  const unsigned long long element = range.offset + i;
  if (a.writeEpoch == me.epoch && a.writer != r)
    return directViolation(r, format("race: writes element %llu of rank %d's %s, which rank %d writes in the same "
                                     "epoch (its step %d)",
                                     element, owner, bufferWord(range.buffer), a.writer, a.writerStep));
  if (a.readEpoch == me.epoch && (a.readers & ~(uint64_t{1} << r)) != 0) {
    const int k = a.reader[0] != r ? 0 : 1;  // the first reader, or the second when the first is r
    return directViolation(r, format("race: writes element %llu of rank %d's %s, which rank %d reads in the same "
                                     "epoch (its step %d)",
                                     element, owner, bufferWord(range.buffer), a.reader[k], a.readerStep[k]));
  }
  a.writer = r;
  a.writerStep = static_cast<int32_t>(me.pc);
  a.writeEpoch = me.epoch;
  return Status();
}

// A step that reads and writes one rank's memory does so element by element, all elements at once on a GPU: the
// two ranges must coincide (in place) or be apart, else it reads what it has already overwritten.
Status Machine::checkOwnOverlap(int r, const Range& read, const Range& written, uint64_t count) {
  const RankState& s = ranks_[static_cast<size_t>(r)];
  bool readScratch = false, writtenScratch = false;
  const uint64_t a = position(s, read, &readScratch), b = position(s, written, &writtenScratch);
  if (count == 0 || readScratch != writtenScratch || a == b || a + count <= b || b + count <= a) return Status();
  return directViolation(r, format("reads %s [%llu, %llu) and writes %s [%llu, %llu) of its own memory: they overlap "
                                   "but do not coincide",
                                   bufferWord(read.buffer), static_cast<unsigned long long>(read.offset),
                                   static_cast<unsigned long long>(read.offset + count), bufferWord(written.buffer),
                                   static_cast<unsigned long long>(written.offset),
                                   static_cast<unsigned long long>(written.offset + count)));
}

// The shape of rank r's current step: an op a direct program may hold, ranks that exist, every range inside its
// buffer, and no peer's memory reached outside the barriers.
Status Machine::checkDirectStep(int r) {
  const RankState& s = ranks_[static_cast<size_t>(r)];
  const Step& st = programs_[static_cast<size_t>(r)].steps[s.pc];
  if (!stepIsDirect(st.op) && st.op != StepOp::kCopy && st.op != StepOp::kReduce)
    return directViolation(r,
                           "sends or receives through slots in a direct program, which holds only direct steps, "
                           "kCopy and kReduce (program.h, \"Direct steps\")");
  if (st.joined) return directViolation(r, "joined, but a direct program joins no steps");
  auto inside = [&](int owner, const Range& range, const char* verb) {
    const RankState& o = ranks_[static_cast<size_t>(owner)];
    if (fits(o, range, st.count)) return Status();
    return directViolation(r, format("%s rank %d's %s [%llu, %llu), outside its %llu elements", verb, owner,
                                     bufferWord(range.buffer), static_cast<unsigned long long>(range.offset),
                                     static_cast<unsigned long long>(range.offset + st.count),
                                     static_cast<unsigned long long>(bufferSize(o, range.buffer))));
  };
  // Before the first barrier the peer may not have entered the call (its buffers may still be in use by what
  // came before it); after the last, it may have returned from it.
  auto reachable = [&](int owner, const Range& range) {
    if (owner == r || st.count == 0 || (s.epoch > 0 && s.epoch < barriers_)) return Status();
    return directViolation(r, format("reaches rank %d's %s %s, where rank %d may %s", owner, bufferWord(range.buffer),
                                     s.epoch == 0 ? "before the first barrier" : "after the last barrier", owner,
                                     s.epoch == 0 ? "not have entered the call yet" : "have returned from the call"));
  };
  switch (st.op) {
    case StepOp::kCopy:
    case StepOp::kReduce:
      COLLIE_RETURN_IF_ERROR(inside(r, st.src, "reads"));
      COLLIE_RETURN_IF_ERROR(inside(r, st.dst, "writes"));
      return checkOwnOverlap(r, st.src, st.dst, st.count);
    case StepOp::kPutPeer: {
      const int q = st.sendPeer;
      if (q < 0 || q >= n_) return directViolation(r, format("puts to rank %d, which is not one of the %d", q, n_));
      if (st.peerDispl) {
        // A block put lands in the peer's block for this rank, which must hold all of it.
        const Program& peer = programs_[static_cast<size_t>(q)];
        const size_t ur = static_cast<size_t>(r);
        if (peer.recvCounts.size() != static_cast<size_t>(n_) || peer.recvDispls.size() != static_cast<size_t>(n_))
          return directViolation(r, format("puts its block into rank %d, whose program has no per-peer counts", q));
        if (st.dst.buffer != Buffer::kOutput || st.dst.offset + st.count > peer.recvCounts[ur])
          return directViolation(r, format("puts [%llu, %llu) of its block into rank %d's output, which receives %llu "
                                           "elements from it",
                                           static_cast<unsigned long long>(st.dst.offset),
                                           static_cast<unsigned long long>(st.dst.offset + st.count), q,
                                           static_cast<unsigned long long>(peer.recvCounts[ur])));
      }
      const Range dst = putTarget(programs_, r, st);
      COLLIE_RETURN_IF_ERROR(inside(r, st.src, "reads"));
      COLLIE_RETURN_IF_ERROR(inside(q, dst, "puts into"));
      COLLIE_RETURN_IF_ERROR(reachable(q, dst));
      return q == r ? checkOwnOverlap(r, st.src, dst, st.count) : Status();
    }
    case StepOp::kReducePeers: {
      const int lo = st.recvPeer, k = st.peerCount;
      if (lo < 0 || k < 1 || k > n_ - lo)
        return directViolation(r, format("reads ranks %d..%d, which are not ranks of the %d", lo, lo + k - 1, n_));
      for (int q = lo; q < lo + k; ++q) {
        COLLIE_RETURN_IF_ERROR(inside(q, st.src, "reads"));
        COLLIE_RETURN_IF_ERROR(reachable(q, st.src));
      }
      COLLIE_RETURN_IF_ERROR(inside(r, st.dst, "writes"));
      return r >= lo && r < lo + k ? checkOwnOverlap(r, st.src, st.dst, st.count) : Status();
    }
    default:
      return Status();  // a barrier: advanceDirect
  }
}

// Runs rank r's current step, a direct one or a local copy or reduce, element by element.
Status Machine::runDirectStep(int r) {
  COLLIE_RETURN_IF_ERROR(checkDirectStep(r));
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  const Step& st = p.steps[s.pc];
  for (uint64_t i = 0; i < st.count; ++i) {
    Value v;
    Value* dst = nullptr;
    switch (st.op) {
      case StepOp::kCopy:
      case StepOp::kReduce:
        COLLIE_RETURN_IF_ERROR(noteRead(r, r, st.src, i));
        v = *at(s, st.src, i);
        if (st.op == StepOp::kReduce) {
          COLLIE_RETURN_IF_ERROR(noteRead(r, r, st.dst, i));
          COLLIE_RETURN_IF_ERROR(reduce(p, *at(s, st.dst, i), v, i, &v));
        }
        COLLIE_RETURN_IF_ERROR(noteWrite(r, r, st.dst, i));
        dst = at(s, st.dst, i);
        break;
      case StepOp::kPutPeer: {
        const Range target = putTarget(programs_, r, st);
        COLLIE_RETURN_IF_ERROR(noteRead(r, r, st.src, i));
        v = *at(s, st.src, i);
        COLLIE_RETURN_IF_ERROR(noteWrite(r, st.sendPeer, target, i));
        dst = at(ranks_[static_cast<size_t>(st.sendPeer)], target, i);
        break;
      }
      case StepOp::kReducePeers:
        // In ascending rank order, as the executors reduce, so that every rank gets the same bits.
        for (int q = st.recvPeer; q < st.recvPeer + st.peerCount; ++q) {
          COLLIE_RETURN_IF_ERROR(noteRead(r, q, st.src, i));
          const Value& x = *at(ranks_[static_cast<size_t>(q)], st.src, i);
          if (q == st.recvPeer) {
            v = x;
          } else {
            COLLIE_RETURN_IF_ERROR(reduce(p, v, x, i, &v));
          }
        }
        COLLIE_RETURN_IF_ERROR(noteWrite(r, r, st.dst, i));
        dst = at(s, st.dst, i);
        break;
      default:
        return Status();
    }
    COLLIE_RETURN_IF_ERROR(write(p, st, v, i, dst));
  }
  return Status();
}

// Runs rank r as far as it can go: up to a barrier that some rank has not reached yet. The last rank to reach a
// barrier lets every rank through it.
Status Machine::advanceDirect(int r, bool* moved) {
  RankState& s = ranks_[static_cast<size_t>(r)];
  const Program& p = programs_[static_cast<size_t>(r)];
  while (s.pc < p.steps.size()) {
    const Step& st = p.steps[s.pc];
    if (st.op != StepOp::kBarrier) {
      COLLIE_RETURN_IF_ERROR(runDirectStep(r));
      ++s.pc;
      *moved = true;
      continue;
    }
    if (st.finalize) return directViolation(r, "finalizes a value it does not write");
    if (st.joined) return directViolation(r, "joined, but a direct program joins no steps");
    s.atBarrier = true;
    for (const RankState& q : ranks_)
      if (!q.atBarrier) return Status();
    for (RankState& q : ranks_) {
      q.atBarrier = false;
      ++q.epoch;
      ++q.pc;
    }
    *moved = true;
  }
  return Status();
}

// After the ranks stopped: a rank that waits at a barrier waits for one that ended without reaching it.
Status Machine::directStuck() const {
  for (int r = 0; r < n_; ++r) {
    const RankState& s = ranks_[static_cast<size_t>(r)];
    if (!s.atBarrier) continue;
    for (int q = 0; q < n_; ++q)
      if (!ranks_[static_cast<size_t>(q)].atBarrier)
        return directViolation(r, format("deadlock: waits in barrier %d, which rank %d never reaches", s.epoch, q));
  }
  return Status();
}

}  // namespace verifier_internal
}  // namespace collie
