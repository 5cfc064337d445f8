#include "executor/direct_sends.h"

#include <algorithm>
#include <deque>
#include <string>

#include "algorithms/registry.h"
#include "base/env.h"

namespace collie {

namespace {

struct Bytes {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  bool empty() const { return begin == end; }
  bool overlaps(const Bytes& o) const { return !empty() && !o.empty() && begin < o.end && o.begin < end; }
  bool operator==(const Bytes& o) const { return begin == o.begin && end == o.end; }
};

Bytes bytesOf(void* const* bufs, const Range& r, uint64_t count, size_t elemSize) {
  const uint8_t* base = static_cast<const uint8_t*>(bufs[static_cast<int>(r.buffer)]);
  if (base == nullptr || count == 0) return Bytes{};
  return Bytes{base + r.offset * elemSize, base + (r.offset + count) * elemSize};
}

// What step `s` writes in the rank's own memory (a copy onto itself writes nothing).
Bytes written(const Step& s, void* const* bufs, size_t elemSize) {
  switch (s.op) {
    case StepOp::kCopy:
    case StepOp::kCopySend: {
      const Bytes d = bytesOf(bufs, s.dst, s.count, elemSize);
      return d == bytesOf(bufs, s.src, s.count, elemSize) ? Bytes{} : d;
    }
    case StepOp::kSendRecv:
    case StepOp::kSendRecvReduce:
      return bytesOf(bufs, s.dst, s.recvCount, elemSize);
    case StepOp::kRecv:
    case StepOp::kRecvReduceCopy:
    case StepOp::kRecvCopySend:
    case StepOp::kRecvReduceCopySend:
    case StepOp::kReduce:
      return bytesOf(bufs, s.dst, s.count, elemSize);
    case StepOp::kReducePeers:
      return bytesOf(bufs, s.dst, s.count, elemSize);
    case StepOp::kSend:
    case StepOp::kRecvReduceSend:
    case StepOp::kPutPeer:  // writes a peer's memory, not ours
    case StepOp::kBarrier:
      return Bytes{};
  }
  return Bytes{};
}

// What a receiver would read in place for step `s`, or nothing when it cannot.
Bytes sent(const Step& s, void* const* bufs, size_t elemSize, int divisor) {
  switch (s.op) {
    case StepOp::kSend:
    case StepOp::kCopySend:
    case StepOp::kSendRecv:
    case StepOp::kSendRecvReduce:
      return s.src.buffer == Buffer::kScratch ? Bytes{} : bytesOf(bufs, s.src, s.count, elemSize);
    case StepOp::kRecvCopySend:
      // It forwards what it received; with avg's division what it wrote differs.
      if (s.finalize && divisor > 0) return Bytes{};
      return s.dst.buffer == Buffer::kScratch ? Bytes{} : bytesOf(bufs, s.dst, s.count, elemSize);
    case StepOp::kRecvReduceCopySend:
      return s.dst.buffer == Buffer::kScratch ? Bytes{} : bytesOf(bufs, s.dst, s.count, elemSize);
    default:
      return Bytes{};  // kRecvReduceSend keeps its sum in registers only: it must go through a slot
  }
}

// readOrderFrom of every rank's program, kept for the shapes this thread called last: a loop of calls of one
// size asks once. Keyed by what everyRanksProgram rebuilds from; per thread, as each rank thread asks for its
// own programs, so no lock. Up to kCausalRanks ranks it costs tens of microseconds to work out.
const ReadOrder* cachedReadOrder(const Program& p) {
  struct Entry {
    Collective collective;
    std::string algorithm;
    int nranks, rank, root;
    uint64_t count, stride;
    ReadOrder order;
  };
  thread_local std::deque<Entry> cache;
  for (const Entry& e : cache)
    if (e.collective == p.collective && e.algorithm == p.algorithm && e.nranks == p.nranks && e.rank == p.rank &&
        e.root == p.root && e.count == p.count && e.stride == p.stride)
      return &e.order;
  std::vector<Program> all;
  ReadOrder order;
  if (everyRanksProgram(p, &all)) order = readOrderFrom(all, p.rank);
  if (cache.size() >= 16) cache.pop_front();
  cache.push_back(Entry{p.collective, p.algorithm, p.nranks, p.rank, p.root, p.count, p.stride, std::move(order)});
  return &cache.back().order;
}

}  // namespace

bool everyRanksProgram(const Program& mine, std::vector<Program>* all) {
  if (mine.collective == Collective::kAllToAllv || mine.collective == Collective::kSendRecv) return false;
  const AlgorithmInfo* algo = findAlgorithm(mine.collective, mine.algorithm.c_str());
  if (algo == nullptr || algo->nodeAware || mine.nranks < 1 || mine.rank < 0 || mine.rank >= mine.nranks) return false;
  all->clear();
  for (int r = 0; r < mine.nranks; ++r) {
    ProgramArgs args;
    args.collective = mine.collective;
    args.nranks = mine.nranks;
    args.rank = r;
    args.count = mine.count;
    args.stride = mine.stride;
    args.root = mine.root;
    all->push_back(buildProgram(*algo, args));
  }
  return sameSteps((*all)[static_cast<size_t>(mine.rank)].steps, mine.steps);
}

ReadOrder readOrderFrom(const std::vector<Program>& all, int me) {
  const int n = static_cast<int>(all.size());
  if (me < 0 || me >= n) return {};
  // Per ordered pair of ranks, the steps that send (received) elements, in program order: the k-th send of s to
  // r is the k-th receive of r from s (slot FIFOs). matched[r][t]: the sender's step that r's step t receives.
  std::vector<std::vector<std::vector<int>>> sends(n, std::vector<std::vector<int>>(n)),
      recvs(n, std::vector<std::vector<int>>(n));
  for (int r = 0; r < n; ++r) {
    const std::vector<Step>& steps = all[static_cast<size_t>(r)].steps;
    for (int t = 0; t < static_cast<int>(steps.size()); ++t) {
      const Step& s = steps[static_cast<size_t>(t)];
      if (s.sent() > 0) {
        if (s.sendPeer < 0 || s.sendPeer >= n) return {};
        sends[r][s.sendPeer].push_back(t);
      }
      if (s.received() > 0) {
        if (s.recvPeer < 0 || s.recvPeer >= n) return {};
        recvs[r][s.recvPeer].push_back(t);
      }
    }
  }
  std::vector<std::vector<int>> matched(n);
  for (int r = 0; r < n; ++r) matched[r].assign(all[static_cast<size_t>(r)].steps.size(), -1);
  for (int s = 0; s < n; ++s)
    for (int r = 0; r < n; ++r) {
      if (sends[s][r].size() != recvs[r][s].size()) return {};
      for (size_t k = 0; k < sends[s][r].size(); ++k) matched[r][static_cast<size_t>(recvs[r][s][k])] = sends[s][r][k];
    }
  // Vector clocks: start[r][t][x] = how many of rank x's first steps are done before rank r starts step t, and
  // seen[r][t] the same for what r's step t writes and, where it forwards, sends. A step starts once the rank's
  // steps before it are done; what a receive writes comes after its sender posted the slice, which the sender
  // does after its earlier steps and, in a step that forwards (kRecv*Send), after the slice it forwards arrived.
  // An exchange's send waits for no receive. Clocks only grow, so sweeping until nothing changes ends.
  //
  // A group of joined steps (program.h) runs as one step where slices are read in place (Simple, the host): its
  // steps all start when the group does, and what it writes comes after every one of its receives' senders
  // posted, so they share one start clock, and one clock for what they write. An exchange group (program.h,
  // exchangeGroupEnd) may run as a batch: its steps may all start when the group does, but each writes only
  // what its own receive brought. Either group ends when all its steps are done. groupEnd[r][t]: one past the
  // last step of the group step t heads; 0 for a step inside another's group. joint[r][t]: whether that group
  // is joined.
  std::vector<std::vector<size_t>> groupEnd(n);
  std::vector<std::vector<bool>> joint(n);
  std::vector<std::vector<std::vector<int>>> start(n), seen(n);
  for (int r = 0; r < n; ++r) {
    const std::vector<Step>& steps = all[static_cast<size_t>(r)].steps;
    const int count = static_cast<int>(steps.size());
    groupEnd[r].assign(steps.size(), 0);
    joint[r].assign(steps.size(), false);
    start[r].assign(steps.size() + 1, std::vector<int>(static_cast<size_t>(n), 0));
    for (int t = 0; t <= count; ++t) start[r][t][static_cast<size_t>(r)] = t;
    for (int t = 0; t < count;) {
      const int joinedEnd = joinedGroupEnd(steps.data(), count, t);
      const int end = joinedEnd > t + 1 ? joinedEnd : exchangeGroupEnd(steps.data(), count, t);
      groupEnd[r][t] = static_cast<size_t>(end);
      joint[r][t] = joinedEnd > t + 1;
      for (int u = t + 1; u < end; ++u) start[r][u][static_cast<size_t>(r)] = t;  // the group's steps start with it
      t = end;
    }
    seen[r].assign(steps.size(), std::vector<int>(static_cast<size_t>(n), 0));
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int r = 0; r < n; ++r) {
      const std::vector<Step>& steps = all[static_cast<size_t>(r)].steps;
      for (size_t t = 0; t < steps.size(); ++t) {
        const size_t end = groupEnd[r][t];
        if (end == 0) continue;  // inside a group: done with the step that heads it
        const std::vector<int> begin = start[r][t];
        for (size_t u = t + 1; u < end; ++u)
          if (start[r][u] != begin) {
            start[r][u] = begin;
            changed = true;
          }
        // What step u writes comes after its receive's sender posted; a joined group's writes after all of them.
        auto after = [&](size_t u, std::vector<int>* w) {
          const int from = matched[r][u];
          if (from < 0) return;
          const size_t p = static_cast<size_t>(steps[u].recvPeer), s = static_cast<size_t>(from);
          const Step& sent = all[p].steps[s];
          const bool forwards = stepReceives(sent.op) && !stepIsExchange(sent.op);
          const std::vector<int>& sender = forwards ? seen[p][s] : start[p][s];
          for (int x = 0; x < n; ++x) (*w)[x] = std::max((*w)[x], sender[x]);
        };
        std::vector<int> every = begin, w;
        for (size_t u = t; u < end; ++u) after(u, &every);
        for (size_t u = t; u < end; ++u) {
          if (joint[r][t]) {
            w = every;
          } else {
            w = begin;
            after(u, &w);
          }
          for (int x = 0; x < n; ++x)
            if (w[x] > seen[r][u][x]) {
              seen[r][u][x] = w[x];
              changed = true;
            }
        }
        std::vector<int>& next = start[r][end];
        for (int x = 0; x < n; ++x)
          if (x != r && every[x] > next[x]) {
            next[x] = every[x];
            changed = true;
          }
      }
    }
  }
  const std::vector<std::vector<int>>& writes = seen[static_cast<size_t>(me)];
  // stepDone[i]: the first later step whose writes come after the receiver finished its matching receive.
  // Clocks grow along a program, so the first such step is followed by ordered ones only.
  // sliceChain[i]: a receiver that forwards (kRecv*Send) posts each slice after reading the same slice of ours;
  // forwards of the same count pass slice k on as slice k, so the step of ours at the end of such a chain
  // writes each slice after the receiver read that slice, and ends after it read them all.
  const std::vector<Step>& mine = all[static_cast<size_t>(me)].steps;
  ReadOrder order;
  order.stepDone.assign(mine.size(), -1);
  order.sliceChain.assign(mine.size(), -1);
  auto forwards = [](const Step& s) { return stepSends(s.op) && stepReceives(s.op) && !stepIsExchange(s.op); };
  for (int q = 0; q < n; ++q)
    for (size_t k = 0; k < sends[me][q].size(); ++k) {
      const int i = sends[me][q][k], read = recvs[q][me][k];
      int& first = order.stepDone[static_cast<size_t>(i)];
      first = INT_MAX;
      for (size_t j = static_cast<size_t>(i) + 1; j < mine.size(); ++j)
        if (writes[j][static_cast<size_t>(q)] > read) {
          first = static_cast<int>(j);
          break;
        }
      const uint64_t count = mine[static_cast<size_t>(i)].sent();
      int rank = q, step = read;
      for (int hops = 0; hops <= n; ++hops) {
        const Step& s = all[static_cast<size_t>(rank)].steps[static_cast<size_t>(step)];
        if (!forwards(s) || s.count != count) break;
        // Where this step's slices go: the receive it matches there.
        const int to = s.sendPeer;
        const std::vector<int>& ours = sends[rank][to];
        const size_t at = static_cast<size_t>(std::find(ours.begin(), ours.end(), step) - ours.begin());
        const int next = recvs[to][rank][at];
        if (to == me) {
          if (next > i && mine[static_cast<size_t>(next)].received() == count)
            order.sliceChain[static_cast<size_t>(i)] = next;
          break;
        }
        rank = to;
        step = next;
      }
    }
  return order;
}

bool markDirectSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                     const std::vector<bool>& inProcess, uint64_t minBytes, std::vector<uint8_t>* marks, bool causal,
                     const ReadOrder* order) {
  const size_t n = p.steps.size();
  marks->assign(n, 0);
  // Every call of a communicator with peers in the process comes here: small ones leave before any other work.
  bool large = false;
  for (size_t i = 0; i < n && !large; ++i) large = p.steps[i].count * elemSize >= minBytes;
  if (!large) return false;
  bool any = false;
  bool causalTried = false;
  if (order != nullptr && (order->stepDone.size() != n || order->sliceChain.size() != n)) order = nullptr;
  std::vector<Bytes> writes(n);
  for (size_t i = 0; i < n; ++i) writes[i] = written(p.steps[i], bufs, elemSize);
  for (size_t i = 0; i < n; ++i) {
    const Step& s = p.steps[i];
    if (!stepSends(s.op) || s.sendPeer < 0 || static_cast<size_t>(s.sendPeer) >= inProcess.size() ||
        !inProcess[static_cast<size_t>(s.sendPeer)] || s.count * elemSize < minBytes)
      continue;
    const Bytes out = sent(s, bufs, elemSize, divisor);
    if (out.empty()) continue;
    // The step's own write is the data it sends for the forwarding kinds; an exchange or a copy elsewhere must
    // not land on it.
    const bool forwards = s.op == StepOp::kRecvCopySend || s.op == StepOp::kRecvReduceCopySend;
    bool stable = forwards || !out.overlaps(writes[i]);
    size_t j = i + 1;
    while (stable && j < n && !out.overlaps(writes[j])) ++j;
    if (stable && j < n) {
      // Step j writes what step i sent: fine if the receiver is known to have read it by then (direct_sends.h).
      if (order == nullptr && causal && !causalTried && p.nranks <= kCausalRanks) {
        causalTried = true;
        order = cachedReadOrder(p);
        if (order->stepDone.size() != n) order = nullptr;
      }
      const int after = order != nullptr ? order->stepDone[i] : -1;
      const int chain = order != nullptr ? order->sliceChain[i] : -1;
      stable = (after >= 0 && static_cast<size_t>(after) <= j) ||
               (chain >= 0 && static_cast<size_t>(chain) == j && writes[j] == out);
    }
    (*marks)[i] = stable ? 1 : 0;
    any = any || stable;
  }
  return any;
}

void placeholderBuffers(bool inPlace, int64_t outputShiftBytes, void* bufs[3]) {
  const uintptr_t base = uintptr_t{1} << 44;  // a shift below 2^42 either way keeps the three apart
  bufs[0] = reinterpret_cast<void*>(base);
  bufs[1] =
      reinterpret_cast<void*>(inPlace ? base + static_cast<uintptr_t>(outputShiftBytes) : base + (uintptr_t{1} << 42));
  bufs[2] = reinterpret_cast<void*>(base + (uintptr_t{2} << 42));
}

Status readDirectReadBytes(int64_t* out) {
  bool bad = false;
  *out = env::getInt("COLLIE_DIRECT_READ_BYTES", 131072, &bad);
  if (bad)
    return Status::error(collieInvalidArgument,
                         "COLLIE_DIRECT_READ_BYTES must be a whole number of bytes (0: every send; negative: none)");
  return Status();
}

}  // namespace collie
