// The discrete-event simulation behind predict(). Ranks advance slice by
// slice like the verifier's Machine, but each action has a start time: a rank
// is an event in a time-ordered queue, and when it cannot act yet it either
// schedules itself at the time it can (a slice that arrives later, a port that
// is busy) or waits on a connection until the peer posts a slice or frees a
// slot, which wakes it. Ports are claimed in time order, so contention
// (n-1 senders into one root) is modelled as it happens.
//
// Bounded work: a call of R identical rounds is not simulated round by round
// when that would be slow (1 GiB is thousands of one-slot rounds). At most
// kMaxRounds rounds are simulated, fewer when the rounds are large (a slice
// budget of kSliceBudget transfers per prediction): the first K-1 full rounds
// and the last (partial) one; the R-K rounds not simulated are charged the
// steady-state time per round measured over the middle half of the simulated
// full rounds. Where even one round exceeds the budget (steps of many slices,
// as in the exchange algorithms that run in one round), slices are coarsened
// to a multiple of the slot, the FIFO keeping its number of slots.
#include "algorithms/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <vector>

#include "algorithms/memory_traffic.h"

namespace collie {

namespace {

constexpr uint64_t kSliceBudget = 300000;
constexpr uint64_t kMaxRounds = 48;
constexpr uint64_t kMinRounds = 5;
constexpr double kNever = std::numeric_limits<double>::infinity();

bool reducesOp(StepOp op) {
  return op == StepOp::kRecvReduceSend || op == StepOp::kRecvReduceCopy || op == StepOp::kRecvReduceCopySend ||
         op == StepOp::kSendRecvReduce || op == StepOp::kReduce;
}

uint64_t ceilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

// Slice transfers a set of programs makes with slices of `slice` elements.
uint64_t sliceCount(const std::vector<Program>& programs, uint64_t slice) {
  uint64_t total = 0;
  for (const Program& p : programs)
    for (const Step& s : p.steps) {
      if (stepIsExchange(s.op))
        total += ceilDiv(s.count, slice) + ceilDiv(s.recvCount, slice);
      else if (stepSends(s.op) || stepReceives(s.op))
        total += ceilDiv(s.count, slice);
    }
  return total;
}

struct Conn {
  uint64_t posted = 0, consumed = 0;  // slices, over the whole call
  bool recvWaits = false;             // the receiver waits for the next slice
  bool sendWaits = false;             // the sender waits for a free slot
};

// A batch of exchanges a rank runs at once, as the step runner does (executor/step_runner.h, runExchanges):
// steps[first..end), each with what it has sent and received so far.
struct Batch {
  size_t first = 0, end = 0;
  uint64_t sent[kMaxBatchedExchanges] = {};
  uint64_t received[kMaxBatchedExchanges] = {};
};

struct RankSim {
  uint64_t round = 0;
  size_t pc = 0;
  uint64_t sent = 0;    // elements of the current send / receive / forwarding step
  size_t groupEnd = 0;  // of the exchange group the current step is in (program.h)
  bool inBatch = false;
  Batch batch;
  double engine = 0;  // when the rank's previous action ends
  double sendEngine = 0, recvEngine = 0;
  double scheduled = kNever;
};

struct Event {
  double time;
  uint64_t seq;
  int rank;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

class Simulation {
 public:
  Simulation(const Topology& topo, int n, size_t elemBytes, uint64_t sliceElems, const std::vector<Program>& full,
             const std::vector<Program>& last, uint64_t rounds)
      : topo_(topo),
        n_(n),
        es_(static_cast<double>(elemBytes)),
        slice_(sliceElems),
        slotElems_(topo.slotBytes / elemBytes),
        slots_(topo.slots),
        full_(full),
        last_(last),
        rounds_(rounds),
        ranks_(static_cast<size_t>(n)),
        conns_(static_cast<size_t>(n) * static_cast<size_t>(n)),
        arrive_(conns_.size() * slots_),
        credit_(conns_.size() * slots_),
        outPort_(static_cast<size_t>(n) * 2, 0.0),
        inPort_(static_cast<size_t>(n) * 2, 0.0),
        roundEnd_(rounds, 0.0) {
    copyGamma_ = topo.gamma * 2.0 / 3.0;
  }

  Status run();
  const std::vector<double>& roundEnds() const { return roundEnd_; }
  uint64_t slices() const { return slices_; }

 private:
  size_t at(int from, int to) const { return static_cast<size_t>(from) * static_cast<size_t>(n_) + to; }
  Conn& conn(int from, int to) { return conns_[at(from, to)]; }
  const Program& program(int r, uint64_t round) const {
    return (round + 1 < rounds_ ? full_ : last_)[static_cast<size_t>(r)];
  }
  const LinkCost& link(int r, int q) const { return topo_.link(topo_.classBetween(r, q)); }
  size_t port(int r, int q) const { return static_cast<size_t>(r) * 2 + (topo_.sameNode(r, q) ? 0 : 1); }

  void schedule(int r, double t) {
    RankSim& s = ranks_[static_cast<size_t>(r)];
    if (t >= s.scheduled) return;
    s.scheduled = t;
    queue_.push(Event{t, seq_++, r});
  }
  // Whether the next slot of from -> to is free (its credit time known); its time.
  bool slotKnown(const Conn& c) const { return c.posted < slots_ || c.consumed > c.posted - slots_; }
  double slotTime(int from, int to, const Conn& c) const {
    return c.posted < slots_ ? 0.0 : credit_[at(from, to) * slots_ + (c.posted - slots_) % slots_];
  }
  // Earliest start of a send to q given `ready`: both ports of that link free.
  double portsFree(int r, int q, double ready) const {
    if (q == r) return ready;
    return std::max({ready, outPort_[port(r, q)], inPort_[port(q, r)]});
  }
  // Sends b bytes r -> q starting at `now`, the data leaving after `work`
  // seconds of local work overlapping the transfer; returns when r is done.
  double send(int r, int q, double b, double now, double work) {
    Conn& c = conn(r, q);
    double xfer, alpha = 0;
    if (q == r) {
      xfer = b * copyGamma_;  // a send to oneself is a copy through its own memory
    } else {
      const LinkCost& l = link(r, q);
      xfer = b * l.beta;
      alpha = l.alpha;
      outPort_[port(r, q)] = inPort_[port(q, r)] = now + xfer;
    }
    const double end = now + std::max(xfer, work);
    arrive_[at(r, q) * slots_ + c.posted % slots_] = end + alpha;
    ++c.posted;
    ++slices_;
    if (c.recvWaits) {
      c.recvWaits = false;
      schedule(q, end + alpha);
    }
    return end;
  }
  // Consumes the next slice p -> r, r being busy until `end`.
  void consume(int p, int r, double end) {
    Conn& c = conn(p, r);
    const double credit = end + (p == r ? 0.0 : link(p, r).alpha);
    credit_[at(p, r) * slots_ + c.consumed % slots_] = credit;
    ++c.consumed;
    if (c.sendWaits) {
      c.sendWaits = false;
      schedule(p, credit);
    }
  }
  double arrival(int p, int r, const Conn& c) const { return arrive_[at(p, r) * slots_ + c.consumed % slots_]; }

  bool forward(int r, const Step& st, double now);
  Batch batchAt(int r, const Program& p);
  bool runBatch(int r, const Program& p, double now);
  void advance(int r, double now);
  Status deadlock() const;

  const Topology& topo_;
  const int n_;
  const double es_;
  const uint64_t slice_;
  const uint64_t slotElems_;  // a slot's elements: a step that moves more joins no batch
  const uint64_t slots_;
  const std::vector<Program>& full_;
  const std::vector<Program>& last_;
  const uint64_t rounds_;
  double copyGamma_ = 0;
  std::vector<RankSim> ranks_;
  std::vector<Conn> conns_;
  std::vector<double> arrive_, credit_;   // [connection][slice % slots]
  std::vector<double> outPort_, inPort_;  // [rank][0 node link, 1 network]: busy until
  std::vector<double> roundEnd_;          // latest end of each round over the ranks
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
  uint64_t seq_ = 0, slices_ = 0;
  int finished_ = 0;
};

// One slice of a send / receive / forwarding step; false when r must wait.
bool Simulation::forward(int r, const Step& st, double now) {
  RankSim& s = ranks_[static_cast<size_t>(r)];
  const bool in = stepReceives(st.op), out = stepSends(st.op);
  const int p = st.recvPeer, q = st.sendPeer;
  double ready = s.engine;
  bool blocked = false;
  if (in) {
    Conn& c = conn(p, r);
    if (c.consumed >= c.posted) {
      c.recvWaits = blocked = true;
    } else {
      ready = std::max(ready, arrival(p, r, c));
    }
  }
  if (out) {
    Conn& c = conn(r, q);
    if (!slotKnown(c)) {
      c.sendWaits = blocked = true;
    } else {
      ready = portsFree(r, q, std::max(ready, slotTime(r, q, c)));
    }
  }
  if (blocked) return false;
  if (ready > now) {
    schedule(r, ready);
    return false;
  }
  const uint64_t k = std::min(slice_, st.count - s.sent);
  const double b = static_cast<double>(k) * es_;
  double work = 0;
  if (reducesOp(st.op)) {
    work = b * topo_.gamma;
  } else if (st.op == StepOp::kRecv || st.op == StepOp::kRecvCopySend || st.op == StepOp::kCopySend) {
    work = b * copyGamma_;  // out of the slot (or the source) into the destination
  }
  const double end = out ? send(r, q, b, now, work) : now + work;
  if (in) consume(p, r, end);
  s.engine = end;
  s.sent += k;
  if (s.sent == st.count) {
    s.sent = 0;
    ++s.pc;
  }
  return true;
}

// Where a step's range lies, for the batch rule: each buffer its own address space, input and output apart
// (predictions are out of place).
ByteSpan spanOf(const Range& r, uint64_t count, double elemBytes) {
  if (count == 0) return ByteSpan{};
  const uintptr_t lo = (static_cast<uintptr_t>(r.buffer) + 1) << 58 | static_cast<uintptr_t>(r.offset * elemBytes);
  return ByteSpan{lo, lo + static_cast<uintptr_t>(count * elemBytes)};
}

// The batch of exchanges from rank r's current step, cut by the executors' own rule (program.h,
// cutExchangeBatch; a step joins only if it moves at most one slot each way), else that exchange alone.
Batch Simulation::batchAt(int r, const Program& p) {
  RankSim& s = ranks_[static_cast<size_t>(r)];
  const Step* steps = p.steps.data();
  const int pc = static_cast<int>(s.pc);
  if (s.pc >= s.groupEnd)
    s.groupEnd = static_cast<size_t>(exchangeGroupEnd(steps, static_cast<int>(p.steps.size()), pc));
  Batch b;
  b.first = s.pc;
  if (topo_.serialBatches) {  // each exchange its own turn, as the GPU's kernels pay them (topology.h)
    b.end = b.first + 1;
    return b;
  }
  b.end =
      static_cast<size_t>(cutExchangeBatch(pc, static_cast<int>(s.groupEnd), [&](int i, ByteSpan* src, ByteSpan* dst) {
        const Step& st = steps[i];
        if (st.count > slotElems_ || st.recvCount > slotElems_) return false;
        *src = spanOf(st.src, st.count, es_);
        *dst = spanOf(st.dst, st.recvCount, es_);
        return true;
      }));
  return b;
}

// A batch (batchAt), or one exchange: every send progresses whenever its peer has a free slot, one after another
// through the rank's send engine, and every receive whenever its slice is there, so no direction of any step
// waits on another.
bool Simulation::runBatch(int r, const Program& p, double now) {
  RankSim& s = ranks_[static_cast<size_t>(r)];
  if (!s.inBatch) {
    s.inBatch = true;
    s.batch = batchAt(r, p);
    s.sendEngine = s.recvEngine = s.engine;
  }
  Batch& b = s.batch;
  bool progressed = false, done = true;
  double next = kNever;
  for (size_t i = b.first; i < b.end; ++i) {
    const Step& st = p.steps[i];
    uint64_t& sent = b.sent[i - b.first];
    if (sent >= st.count) continue;
    done = false;
    Conn& c = conn(r, st.sendPeer);
    if (!slotKnown(c)) {
      c.sendWaits = true;
      continue;
    }
    const double ready = portsFree(r, st.sendPeer, std::max(s.sendEngine, slotTime(r, st.sendPeer, c)));
    if (ready > now) {
      next = std::min(next, ready);
      continue;
    }
    const uint64_t k = std::min(slice_, st.count - sent);
    s.sendEngine = send(r, st.sendPeer, static_cast<double>(k) * es_, now, 0);
    sent += k;
    progressed = true;
  }
  for (size_t i = b.first; i < b.end; ++i) {
    const Step& st = p.steps[i];
    uint64_t& received = b.received[i - b.first];
    if (received >= st.recvCount) continue;
    done = false;
    Conn& c = conn(st.recvPeer, r);
    if (c.consumed >= c.posted) {
      c.recvWaits = true;
      continue;
    }
    const double ready = std::max(s.recvEngine, arrival(st.recvPeer, r, c));
    if (ready > now) {
      next = std::min(next, ready);
      continue;
    }
    const uint64_t k = std::min(slice_, st.recvCount - received);
    const double bytes = static_cast<double>(k) * es_;
    s.recvEngine = now + bytes * (st.op == StepOp::kSendRecvReduce ? topo_.gamma : copyGamma_);
    consume(st.recvPeer, r, s.recvEngine);
    received += k;
    progressed = true;
  }
  if (done) {
    s.engine = std::max(s.sendEngine, s.recvEngine);
    s.inBatch = false;
    s.pc = b.end;
    s.batch = Batch{};  // b with it
    return true;
  }
  if (progressed) return true;
  if (next != kNever) schedule(r, next);
  return false;
}

// Runs rank r at time `now` until it has to wait.
void Simulation::advance(int r, double now) {
  RankSim& s = ranks_[static_cast<size_t>(r)];
  while (s.round < rounds_) {
    const Program& p = program(r, s.round);
    if (s.pc >= p.steps.size()) {
      roundEnd_[s.round] = std::max(roundEnd_[s.round], s.engine);
      s.pc = 0;
      s.groupEnd = 0;
      if (++s.round == rounds_) ++finished_;
      continue;
    }
    const Step& st = p.steps[s.pc];
    if (s.inBatch || stepIsExchange(st.op)) {  // an exchange, or the rest of a batch
      if (!runBatch(r, p, now)) return;
      continue;
    }
    if (st.op == StepOp::kCopy || st.op == StepOp::kReduce) {
      // Local work needs no one: it just occupies the rank.
      s.engine += static_cast<double>(st.count) * es_ * (st.op == StepOp::kReduce ? topo_.gamma : copyGamma_);
      ++s.pc;
      continue;
    }
    if (st.count == 0) {  // moves nothing, as in the executors
      ++s.pc;
      continue;
    }
    if (!forward(r, st, now)) return;
  }
}

// A program the simulation can run: every peer it talks to is a rank.
Status checkPeers(const Program& p) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& s = p.steps[i];
    const bool badSend = (s.sent() != 0 || s.op == StepOp::kPutPeer) && (s.sendPeer < 0 || s.sendPeer >= p.nranks);
    const bool badRecv = s.received() != 0 && (s.recvPeer < 0 || s.recvPeer >= p.nranks);
    const bool badRanks =
        s.op == StepOp::kReducePeers && (s.recvPeer < 0 || s.peerCount < 1 || s.peerCount > p.nranks - s.recvPeer);
    if (badSend || badRecv || badRanks)
      return Status::error(collieInternalError, "simulator: %s %s rank %d step %zu talks to rank %d of %d",
                           p.algorithm.c_str(), collectiveName(p.collective), p.rank, i,
                           badSend ? s.sendPeer : s.recvPeer + (badRanks ? s.peerCount - 1 : 0), p.nranks);
  }
  return Status();
}

bool anyDirect(const std::vector<Program>& programs) {
  for (const Program& p : programs)
    if (hasDirectSteps(p)) return true;
  return false;
}

// One round of direct programs (program.h, "Direct steps"), epoch by epoch. An epoch is bulk-synchronous (every
// rank starts it when the barrier before it lets them all through), so it is modelled as a roofline rather than
// event by event: each rank's epoch takes the longest of its local work (a copy 2/3 gamma per byte, a reduce of
// k operands in one pass (k+1)/3 gamma, as gamma prices the 3 bytes of memory traffic of a two-operand reduce)
// and the load of each of its ports (a put of b bytes holds the putter's outgoing and the peer's incoming port of
// their link class for b * beta; a read of a peer's b bytes the peer's outgoing and the reader's incoming port),
// all overlapping, as a kernel's loads and stores do; the epoch is its slowest rank plus one alpha of the slowest
// link class it used (the first byte's latency). A barrier costs one alpha of the slowest class among the ranks:
// each rank posts a flag to every other and waits for theirs, all at once. *transfers counts puts and reads of a
// peer's buffer, *barriers a rank's barriers.
Status simulateDirect(const std::vector<Program>& programs, const Topology& topo, double es, double* seconds,
                      uint64_t* transfers, uint64_t* barriers) {
  const int n = static_cast<int>(programs.size());
  const double copyGamma = topo.gamma * 2.0 / 3.0;
  const double barrierAlpha =
      n < 2 ? 0.0 : std::max(topo.link(topo.intra).alpha, n > topo.ranksPerNode ? topo.link(topo.inter).alpha : 0.0);
  std::vector<size_t> pc(static_cast<size_t>(n), 0);
  // Per rank: local seconds, then the outgoing and incoming port loads [node link, network].
  std::vector<double> local(static_cast<size_t>(n)), out(static_cast<size_t>(n) * 2), in(static_cast<size_t>(n) * 2);
  auto portOf = [&](int r, int q) { return static_cast<size_t>(r) * 2 + (topo.sameNode(r, q) ? 0 : 1); };
  *seconds = 0;
  *transfers = *barriers = 0;
  for (;;) {
    std::fill(local.begin(), local.end(), 0.0);
    std::fill(out.begin(), out.end(), 0.0);
    std::fill(in.begin(), in.end(), 0.0);
    double alpha = 0;
    auto remote = [&](int from, int to, double b) {  // b bytes leave `from`'s memory for `to`'s
      const LinkCost& l = topo.link(topo.classBetween(from, to));
      out[portOf(from, to)] += b * l.beta;
      in[portOf(to, from)] += b * l.beta;
      alpha = std::max(alpha, l.alpha);
      ++*transfers;
    };
    int atBarrier = 0, done = 0;
    for (int r = 0; r < n; ++r) {
      const Program& p = programs[static_cast<size_t>(r)];
      size_t& i = pc[static_cast<size_t>(r)];
      for (; i < p.steps.size() && p.steps[i].op != StepOp::kBarrier; ++i) {
        const Step& st = p.steps[i];
        const double b = static_cast<double>(st.count) * es;
        if (st.count == 0) continue;
        switch (st.op) {
          case StepOp::kCopy:
            if (st.src.buffer != st.dst.buffer || st.src.offset != st.dst.offset) local[r] += b * copyGamma;
            break;
          case StepOp::kReduce:
            local[r] += b * topo.gamma;
            break;
          case StepOp::kPutPeer:
            if (st.sendPeer == r) {
              local[r] += b * copyGamma;
            } else {
              remote(r, st.sendPeer, b);
            }
            break;
          case StepOp::kReducePeers:
            for (int q = st.recvPeer; q < st.recvPeer + st.peerCount; ++q)
              if (q != r) remote(q, r, b);
            local[r] += b * topo.gamma * (st.peerCount + 1) / 3.0;
            break;
          default:
            return Status::error(collieInternalError,
                                 "simulator: %s %s rank %d step %zu (%s) sends or receives through slots in a "
                                 "direct program",
                                 p.algorithm.c_str(), collectiveName(p.collective), r, i, stepOpName(st.op));
        }
      }
      if (i < p.steps.size()) {
        ++atBarrier;
      } else {
        ++done;
      }
    }
    double slowest = 0;
    for (size_t r = 0; r < static_cast<size_t>(n); ++r)
      slowest = std::max({slowest, local[r], out[2 * r], out[2 * r + 1], in[2 * r], in[2 * r + 1]});
    *seconds += slowest + alpha;
    if (done == n) return Status();
    if (atBarrier != n) {
      const Program& p = programs[0];
      return Status::error(collieInternalError,
                           "simulation of %s %s, nranks %d deadlocked: %d ranks wait at a barrier the others never "
                           "reach",
                           p.algorithm.c_str(), collectiveName(p.collective), n, atBarrier);
    }
    for (size_t& i : pc) ++i;  // every rank through the barrier
    *seconds += barrierAlpha;
    ++*barriers;
  }
}

Status Simulation::run() {
  for (int r = 0; r < n_; ++r) schedule(r, 0.0);
  while (!queue_.empty()) {
    const Event e = queue_.top();
    queue_.pop();
    RankSim& s = ranks_[static_cast<size_t>(e.rank)];
    if (e.time != s.scheduled) continue;  // superseded by an earlier wake-up
    s.scheduled = kNever;
    advance(e.rank, e.time);
  }
  return finished_ == n_ ? Status() : deadlock();
}

Status Simulation::deadlock() const {
  for (int r = 0; r < n_; ++r) {
    const RankSim& s = ranks_[static_cast<size_t>(r)];
    if (s.round >= rounds_) continue;
    const Program& p = program(r, s.round);
    const Step& st = p.steps[std::min(s.pc, p.steps.size() - 1)];
    return Status::error(collieInternalError,
                         "simulation of %s %s, nranks %d deadlocked: rank %d waits in round %llu step %zu (%s, send "
                         "to %d, receive from %d)",
                         p.algorithm.c_str(), collectiveName(p.collective), n_, r,
                         static_cast<unsigned long long>(s.round), s.pc, stepOpName(st.op), st.sendPeer, st.recvPeer);
  }
  return Status::error(collieInternalError, "simulation stopped early");
}

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

Status checkTopology(const Topology& t) {
  if (t.ranksPerNode < 1 || t.slots < 2 || t.slots > kMaxSlots || t.slotBytes < 8 || !(t.gamma > 0) ||
      !std::isfinite(t.gamma) || !(t.sharedMemoryBeta >= 0) || !std::isfinite(t.sharedMemoryBeta))
    return Status::error(collieInvalidArgument,
                         "topology %s: needs ranks_per_node >= 1, 2..%u slots, slot_bytes >= 8, a positive gamma "
                         "and a shared memory bandwidth of 0 or more",
                         t.name.c_str(), kMaxSlots);
  for (const LinkCost& l : t.links)
    if (!(l.alpha >= 0) || !(l.beta > 0) || !std::isfinite(l.alpha) || !std::isfinite(l.beta))
      return Status::error(collieInvalidArgument, "topology %s: every link class needs alpha >= 0 and beta > 0",
                           t.name.c_str());
  return Status();
}

}  // namespace

bool hasRankBlocks(Collective c) {
  return c == Collective::kAllGather || c == Collective::kReduceScatter || c == Collective::kAllToAll ||
         c == Collective::kAllToAllv || c == Collective::kGather || c == Collective::kScatter;
}

uint64_t collectiveBytes(Collective c, uint64_t count, int nranks, size_t elemBytes) {
  return count * elemBytes * (hasRankBlocks(c) ? static_cast<uint64_t>(nranks) : 1);
}

double busBandwidthFactor(Collective c, int nranks) {
  const double n = nranks;
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
    case Collective::kAllToAll:
    case Collective::kAllToAllv:
    case Collective::kGather:
    case Collective::kScatter:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

Status predict(const AlgorithmInfo& algo, const ProgramArgs& call, size_t elemBytes, const Topology& topo,
               Prediction* out) {
  const int n = call.nranks;
  if (n < 1 || n > kMaxSimulatedRanks)
    return Status::error(collieInvalidArgument, "simulator: %d ranks (1..%d supported)", n, kMaxSimulatedRanks);
  if (elemBytes < 1 || elemBytes > 16)
    return Status::error(collieInvalidArgument, "simulator: element size %zu bytes (1..16 supported)", elemBytes);
  if (call.collective != algo.collective)
    return Status::error(collieInvalidArgument, "simulator: %s is an algorithm of %s, not of %s", algo.name,
                         collectiveName(algo.collective), collectiveName(call.collective));
  if (rooted(call.collective) && (call.root < 0 || call.root >= n))
    return Status::error(collieInvalidArgument, "simulator: root %d is not one of %d ranks", call.root, n);
  COLLIE_RETURN_IF_ERROR(checkTopology(topo));
  if (topo.slotBytes < elemBytes)
    return Status::error(collieInvalidArgument, "simulator: a slot of %llu bytes holds no %zu-byte element",
                         static_cast<unsigned long long>(topo.slotBytes), elemBytes);
  const uint64_t un = static_cast<uint64_t>(n);
  const uint64_t maxCount = (uint64_t{1} << 50) / (un * elemBytes);
  const bool vCounts = call.collective == Collective::kAllToAllv && call.sendCounts.size() == un;
  if (call.count > maxCount)
    return Status::error(collieInvalidArgument, "simulator: count %llu too large (at most %llu here)",
                         static_cast<unsigned long long>(call.count), static_cast<unsigned long long>(maxCount));
  if (vCounts)
    for (uint64_t c : call.sendCounts)
      if (c > maxCount / un)
        return Status::error(collieInvalidArgument, "simulator: all-to-all-v count %llu too large",
                             static_cast<unsigned long long>(c));

  const uint64_t slotElems = topo.slotBytes / elemBytes;
  std::vector<Program> full(un), last(un);
  uint64_t rounds = 1, bytes = 0;
  ProgramArgs args;
  args.collective = call.collective;
  args.nranks = n;
  args.root = call.root;
  args.ranksPerNode = topo.ranksPerNode;  // node-aware algorithms follow the topology's nodes
  if (call.collective == Collective::kAllToAllv) {
    // One program per rank, with every rank's counts (see the header).
    uint64_t total = 0;
    for (int r = 0; r < n; ++r) {
      args.rank = r;
      args.count = call.count;
      args.sendCounts.assign(un, call.count);
      args.recvCounts.assign(un, call.count);
      if (vCounts)
        for (int j = 0; j < n; ++j) {
          args.sendCounts[static_cast<size_t>(j)] = call.sendCounts[static_cast<size_t>((j - r + n) % n)];
          args.recvCounts[static_cast<size_t>(j)] = call.sendCounts[static_cast<size_t>((r - j + n) % n)];
        }
      args.sendDispls.assign(un, 0);
      args.recvDispls.assign(un, 0);
      for (size_t j = 1; j < un; ++j) {
        args.sendDispls[j] = args.sendDispls[j - 1] + args.sendCounts[j - 1];
        args.recvDispls[j] = args.recvDispls[j - 1] + args.recvCounts[j - 1];
      }
      total = std::max(total, args.sendDispls[un - 1] + args.sendCounts[un - 1]);
      last[static_cast<size_t>(r)] = buildProgram(algo, args);
    }
    bytes = total * elemBytes;
  } else {
    // Rounds as core/collectives.cc cuts them: the same program for every full
    // round (only the buffers' offsets differ), and the last one's remainder.
    const uint64_t perRound = roundCount(algo, n, slotElems, topo.ranksPerNode);
    uint64_t lastCount = call.count;
    if (call.count > perRound) {
      rounds = ceilDiv(call.count, perRound);
      lastCount = call.count - (rounds - 1) * perRound;
    }
    args.stride = call.count;
    for (int r = 0; r < n; ++r) {
      args.rank = r;
      args.count = lastCount;
      last[static_cast<size_t>(r)] = buildProgram(algo, args);
      if (rounds > 1) {
        args.count = perRound;
        full[static_cast<size_t>(r)] = buildProgram(algo, args);
      }
    }
    bytes = collectiveBytes(call.collective, call.count, n, elemBytes);
  }

  for (const std::vector<Program>* set : {&full, &last})
    if (set == &last || rounds > 1)
      for (const Program& p : *set) COLLIE_RETURN_IF_ERROR(checkPeers(p));

  Prediction p;
  double seconds = 0;
  if (anyDirect(last) || (rounds > 1 && anyDirect(full))) {
    // Direct programs (program.h, "Direct steps"): an epoch model per round, rounds one after another.
    double fullSeconds = 0, lastSeconds = 0;
    uint64_t transfers = 0, barriers = 0;
    if (rounds > 1) {
      COLLIE_RETURN_IF_ERROR(
          simulateDirect(full, topo, static_cast<double>(elemBytes), &fullSeconds, &transfers, &barriers));
      p.slices = (rounds - 1) * transfers;
      p.barriers = (rounds - 1) * barriers;
    }
    COLLIE_RETURN_IF_ERROR(
        simulateDirect(last, topo, static_cast<double>(elemBytes), &lastSeconds, &transfers, &barriers));
    p.slices += transfers;
    p.barriers += barriers;
    seconds = static_cast<double>(rounds - 1) * fullSeconds + lastSeconds;
    p.roundsSimulated = rounds;
  } else {
    // How much to simulate (see the file comment).
    const uint64_t perFull = rounds > 1 ? std::max<uint64_t>(sliceCount(full, slotElems), 1) : 0;
    const uint64_t perLast = std::max<uint64_t>(sliceCount(last, slotElems), 1);
    uint64_t simulated = rounds;
    if (rounds > 1 && (rounds > kMaxRounds || (rounds - 1) * perFull + perLast > kSliceBudget))
      simulated = std::min(rounds, std::max(kMinRounds, std::min(kMaxRounds, kSliceBudget / perFull)));
    uint64_t slice = slotElems;
    auto work = [&](uint64_t s) {
      return (simulated > 1 ? (simulated - 1) * sliceCount(full, s) : 0) + sliceCount(last, s);
    };
    for (uint64_t w = work(slice); w > kSliceBudget && slice < (uint64_t{1} << 40);) {
      const uint64_t coarser = work(slice * 2);
      if (coarser == w) break;  // every step is one slice already
      slice *= 2;
      w = coarser;
    }

    // Two time records per slot of every connection (n x n x slots).
    if (un * un * topo.slots > (uint64_t{1} << 22))
      return Status::error(collieInvalidArgument,
                           "simulator: %d ranks x %d ranks x %u slots is more than 4M slot records; use fewer slots", n,
                           n, topo.slots);
    Simulation sim(topo, n, elemBytes, slice, full, last, simulated);
    COLLIE_RETURN_IF_ERROR(sim.run());
    const std::vector<double>& ends = sim.roundEnds();
    seconds = ends.back();
    if (simulated < rounds) {
      // Steady state: the middle half of the simulated full rounds (the first
      // ones fill the pipeline; the last ones drain it, as they will in the end).
      const uint64_t m = simulated - 1, lo = m / 4, hi = 3 * m / 4;
      const double perRoundTime = (ends[hi] - ends[lo]) / static_cast<double>(hi - lo);
      seconds += static_cast<double>(rounds - simulated) * perRoundTime;
    }

    p.roundsSimulated = simulated;
    p.sliceBytes = slice * elemBytes;
    p.slices = sim.slices();
  }

  std::vector<uint64_t> nodeTraffic(static_cast<size_t>((n + topo.ranksPerNode - 1) / topo.ranksPerNode));
  for (size_t r = 0; r < un; ++r) {
    const uint64_t fullElems = rounds > 1 ? memoryTrafficElems(full[r]) : 0;
    const uint64_t traffic =
        ((rounds - 1) * fullElems + memoryTrafficElems(last[r])) * static_cast<uint64_t>(elemBytes);
    p.trafficBytes = std::max(p.trafficBytes, traffic);
    nodeTraffic[r / static_cast<size_t>(topo.ranksPerNode)] += traffic;
  }
  p.nodeTrafficBytes = *std::max_element(nodeTraffic.begin(), nodeTraffic.end());
  // Ranks that share one memory (one GPU) cannot together move more than it does, whatever each link allows.
  const double memorySeconds = static_cast<double>(p.nodeTrafficBytes) * topo.sharedMemoryBeta;
  p.memoryBound = memorySeconds > seconds;
  seconds = std::max(seconds, memorySeconds);
  p.seconds = seconds;
  p.bytes = bytes;
  p.algbw = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  p.busbw = p.algbw * busBandwidthFactor(call.collective, n);
  p.rounds = rounds;
  *out = p;
  return Status();
}

}  // namespace collie
