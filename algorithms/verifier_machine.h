// The verifier's symbolic machine (algorithms/verifier.h), internal to it: verifier.cc runs the steps that move
// data through slots, verifier_direct.cc the direct steps (program.h, "Direct steps"), over the same memory of
// symbolic values and the same postconditions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "algorithms/program.h"
#include "algorithms/verifier.h"
#include "base/status.h"

namespace collie {
namespace verifier_internal {

struct Value {
  uint64_t ranks = 0;      // contributions held
  uint64_t index = 0;      // which element of the contributors' inputs
  bool finalized = false;  // avg's division applied
  bool defined = false;    // written at all (outputs start undefined)
};

struct Slice {
  std::vector<Value> values;
  bool last = false;  // ends the sender's step: the receiver's step must end here too
};

/// Who touched one element of a rank's memory in which epoch, for the races of direct programs: the last writer,
/// and the ranks that read it in the epoch `readEpoch` (a mask; two of them with their steps, so that a write can
/// name a reader other than itself).
struct Access {
  int32_t writer = -1, writerStep = -1, writeEpoch = -1;
  int32_t readEpoch = -1;
  uint64_t readers = 0;
  int32_t reader[2] = {-1, -1}, readerStep[2] = {-1, -1};
};

// One rank's memory. Input and output are windows of `mem` (they overlap when
// the call is in place); a buffer the rank does not have is empty.
struct RankState {
  std::vector<Value> mem, scratch;
  uint64_t inBase = 0, inCount = 0, outBase = 0, outCount = 0;
  size_t pc = 0;      // current step
  uint64_t sent = 0;  // elements of the current step sent / received so far
  uint64_t received = 0;
  std::vector<uint64_t> groupSent;  // a group of joined steps or a batch run as one: each step's elements sent
  std::vector<uint64_t> batchGot;   // a batch of exchanges: each step's elements received so far
  size_t batchEnd = 0;              // one past the batch being run; 0 when none
  size_t exchangeGroupEnd = 0;      // one past the exchange group the current step is in (program.h)
  // Direct programs only: the epoch the rank is in (barriers passed), whether it waits at a barrier, and who
  // touched each element of mem and scratch in which epoch.
  int epoch = 0;
  bool atBarrier = false;
  std::vector<Access> memAccess, scratchAccess;
};

Status violation(const Program& p, size_t step, const char* what, uint64_t element);

class Machine {
 public:
  Machine(const std::vector<Program>& programs, const VerifyOptions& options)
      : programs_(programs), options_(options), n_(static_cast<int>(programs.size())) {
    channels_.resize(static_cast<size_t>(n_) * static_cast<size_t>(n_));
  }

  Status setUp();
  Status run();
  Status checkPostconditions();

 private:
  Value* at(RankState& s, const Range& r, uint64_t i) {
    switch (r.buffer) {
      case Buffer::kInput:
        return &s.mem[s.inBase + r.offset + i];
      case Buffer::kOutput:
        return &s.mem[s.outBase + r.offset + i];
      case Buffer::kScratch:
        return &s.scratch[r.offset + i];
    }
    return nullptr;
  }
  bool fits(const RankState& s, const Range& r, uint64_t count) const {
    const uint64_t size = r.buffer == Buffer::kInput    ? s.inCount
                          : r.buffer == Buffer::kOutput ? s.outCount
                                                        : s.scratch.size();
    return r.offset <= size && count <= size - r.offset;
  }
  std::deque<Slice>& channel(int from, int to) {
    return channels_[static_cast<size_t>(from) * static_cast<size_t>(n_) + static_cast<size_t>(to)];
  }
  bool full(int from, int to) { return options_.nslots != 0 && channel(from, to).size() >= options_.nslots; }
  uint64_t sliceOf(uint64_t total) const {
    return options_.sliceElems ? options_.sliceElems : std::max<uint64_t>(total, 1);
  }

  Status checkStep(int r);
  Status reduce(const Program& p, const Value& a, const Value& b, uint64_t i, Value* out) const;
  Status write(const Program& p, const Step& st, Value v, uint64_t i, Value* dst) const;
  Status take(int r, int from, uint64_t done, uint64_t total, Slice* out);
  Status advance(int r, bool* moved);
  Status checkGroup(int r, int end);
  Status advanceGroup(int r, int end, bool* moved, bool* done);
  Status sendPass(int r, size_t first, size_t m, bool* progressed);
  size_t batchEnd(int r);
  Status advanceBatch(int r, bool* moved, bool* done);

  // Direct programs (verifier_direct.cc).
  Status setUpDirect();
  Status advanceDirect(int r, bool* moved);
  Status runDirectStep(int r);
  Status checkDirectStep(int r);
  Status checkOwnOverlap(int r, const Range& read, const Range& written, uint64_t count);
  Status directStuck() const;
  Access* accessAt(RankState& s, const Range& r, uint64_t i);
  Status noteRead(int r, int owner, const Range& range, uint64_t i);
  Status noteWrite(int r, int owner, const Range& range, uint64_t i);
  Status directViolation(int r, const std::string& what) const;

  const std::vector<Program>& programs_;
  VerifyOptions options_;
  int n_;
  bool direct_ = false;  // some program holds a direct step: every rank runs as a direct program
  int barriers_ = 0;     // direct programs: the barriers each rank has
  std::vector<RankState> ranks_;
  std::vector<std::deque<Slice>> channels_;  // [from * n + to]: slices in flight
};

}  // namespace verifier_internal
}  // namespace collie
