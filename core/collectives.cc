// The collectives of the C API: argument checks, then the call is cut into
// rounds and each round's Program runs on the communicator's executor.
//
// Rounds: a Program means "the collective on `count` elements". The executor
// moves a step's range in slices through the receiver's slot FIFO; if a ring
// step moved more slices than the receiver has slots, every rank would block in
// its first send while its successor does the same (the deadlock that tests
// with tiny slots found). So each round gives every step at most one slice:
// allreduce rounds are nranks slots long (its steps move 1/nranks of the round),
// the other collectives' rounds one slot of each block. Successive rounds of a
// chain or ring overlap through the FIFO, which is the pipelining.
#pragma GCC visibility push(default)
#include "collie.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "base/cuda_check.h"
#include "base/hash.h"
#include "base/log.h"
#include "core/api_checks.h"
#include "core/call_check.h"
#include "core/group.h"
#include "core/redop.h"
#include "executor/executor.h"
#include "executor/protocol.h"

using collie::Collective;
using collie::Status;
using collie::api::checkBuffer;
using collie::api::checkComm;
using collie::api::checkOp;
using collie::api::checkType;
using collie::api::guarded;

namespace {

// The program for (collective, round count, block stride, root), built once:
// a call repeated with the same size (benchmarks, training loops) builds nothing.
const collie::Program& programFor(collieComm_t comm, const collie::AlgorithmInfo& algo,
                                  const collie::ProgramArgs& args) {
  const collie::CommProgramKey key{&algo, args.count, args.blockStride(), args.root};
  auto it = comm->programs.find(key);
  if (it != comm->programs.end()) return it->second;
  return comm->programs.emplace(key, buildProgram(algo, args)).first->second;
}

struct Call {
  const char* name;
  Collective collective;
  const void* input;
  void* output;
  uint64_t count;  // the collective's count argument
  collieDataType_t type;
  collieRedOp_t op;  // collieSum for collectives without one
  int root;
  collieStream_t stream = nullptr;  // CUDA backend: where the kernels go
  // All-to-all-v: per-peer counts and displacements, copied so the call can wait in a group.
  std::vector<uint64_t> sendCounts, sendDispls, recvCounts, recvDispls;
  collie::VExtents extents;  // how far its blocks reach in sendbuff and recvbuff (splits)
  // Looked up once per call: by COLLIE_CHECK's comparison when it is on, else when the call runs.
  const collie::AlgorithmInfo* algo = nullptr;
  // A pre-multiplied sum whose executor scales the input as part of the launch (executeScaled).
  collie::ExecArgs::Scale scale;

  Call(const char* name_, Collective collective_, const void* input_, void* output_, uint64_t count_,
       collieDataType_t type_, collieRedOp_t op_, int root_)
      : name(name_),
        collective(collective_),
        input(input_),
        output(output_),
        count(count_),
        type(type_),
        op(op_),
        root(root_) {}
};

// What every rank's call must agree on, carried by each slice it sends for the receiver to compare with its own
// (executor/protocol.h, signature[][][]): collective, type, op, count, root and algorithm. All-to-all-v's per-peer
// counts differ by design, so only COLLIE_CHECK compares those; an in-place call may meet an out-of-place one.
uint64_t callSignature(const Call& call, const collie::AlgorithmInfo& algo, uint64_t collectiveSeq) {
  const uint64_t count = call.collective == Collective::kAllToAllv ? 0 : call.count;
  const int32_t fields[4] = {static_cast<int32_t>(call.collective), static_cast<int32_t>(call.type),
                             static_cast<int32_t>(call.op), call.root};
  uint64_t h = collie::fnv1a(fields, sizeof(fields));
  h = collie::fnv1a(&count, sizeof(count), h);
  h = collie::fnv1a(algo.name, strlen(algo.name), h);
  return collie::callSignature(collectiveSeq, h);
}

// Runs `call` in rounds (see the file comment) and marks the communicator
// broken when a round fails, since its counters no longer match its peers'.
// The executor gets every round at once: the CUDA executor makes one launch of them.
Status executeCall(collieComm_t comm, const Call& call) {
  collie::ScopedLogRank logRank(comm->rank);
  collie::ExecArgs exec;
  exec.type = call.type;
  collie::toReduceOp(call.op, &exec.op);
  exec.divisor = call.op == collieAvg ? comm->nranks : 0;
  exec.stream = call.stream;
  exec.scale = call.scale;
  COLLIE_TRACE("%s #%llu count %llu %s %s root %d", call.name, static_cast<unsigned long long>(comm->seq),
               static_cast<unsigned long long>(call.count), collie::typeName(call.type), collie::opName(call.op),
               call.root);
  const size_t es = collie::typeSize(call.type);
  if (comm->nranks == 1) {
    // One rank: every collective is output = input (an average divides by 1), so no program runs. The executor
    // copies in the order of its other work (on the GPU with the copy engine, several times faster than the
    // program kernel's copy), or nothing happens in place.
    const char* in = static_cast<const char*>(call.input);
    char* out = static_cast<char*>(call.output);
    uint64_t n = call.count;
    if (call.collective == Collective::kAllToAllv) {
      // Its own block only: the checks made sure it is sent and received with one count.
      in += call.sendDispls[0] * es;
      out += call.recvDispls[0] * es;
      n = call.recvCounts[0];
    }
    exec.seq = comm->seq++;
    exec.collectiveSeq = comm->collectives++;
    Status st = n == 0 ? Status() : comm->executor->localCopy(out, in, n * es, call.stream);
    if (!st.ok()) comm->breakWith(st.withContext(call.name));
    return st.withContext(call.name);
  }
  const collie::AlgorithmInfo* chosen =
      call.algo ? call.algo : comm->algorithmForCall(call.collective, call.count, call.type, call.op);
  if (chosen == nullptr)
    return Status::error(collieInternalError, "%s: no algorithm is registered for %s", call.name,
                         collie::collectiveName(call.collective));
  const collie::AlgorithmInfo& algo = *chosen;
  // A program file's offsets are in chunks of the count: a count they do not divide has no program.
  const uint64_t quantum = algo.file != nullptr ? algo.file->chunks : 1;
  if (call.count % quantum != 0)
    return Status::error(collieInvalidArgument,
                         "%s: count %llu is not a multiple of the %llu chunks of %s (COLLIE_ALGO), which it needs",
                         call.name, static_cast<unsigned long long>(call.count),
                         static_cast<unsigned long long>(quantum), algo.description);
  // And a rooted collective's file holds the programs of one root.
  if (algo.file != nullptr && call.root != algo.file->root &&
      (call.collective == Collective::kBroadcast || call.collective == Collective::kReduce ||
       call.collective == Collective::kGather || call.collective == Collective::kScatter))
    return Status::error(collieInvalidArgument, "%s: root %d, but %s (COLLIE_ALGO) is for root %d", call.name,
                         call.root, algo.description, algo.file->root);
  // A direct algorithm's call the executor cannot run is refused before it is numbered, so the communicator goes
  // on: every rank refuses alike what the call's count and type decide; a buffer that is outside every window and
  // too large for the staging buffer is this rank's own refusal (collieCommWindowRegister), whose peers' waits
  // then fail the call there.
  if (algo.mapsPeers) {
    const bool v = call.collective == Collective::kAllToAllv;
    const uint64_t directCount = v ? std::max(call.extents.input, call.extents.output) : call.count;
    COLLIE_RETURN_IF_ERROR(comm->executor
                               ->checkDirect(call.collective, algo.name, directCount, call.type, exec.op, call.input,
                                             call.output, call.scale.active, call.stream, call.extents)
                               .withContext(call.name));
  }
  exec.seq = comm->seq++;
  exec.collectiveSeq = comm->collectives++;
  exec.callSignature = callSignature(call, algo, exec.collectiveSeq);
  const int perNode = comm->topology.ranksPerNode;
  uint64_t roundCount = collie::roundCount(algo, comm->nranks, comm->executor->roundElems(es), perNode);
  if (collie::takesLowLatency(*comm, algo, call.collective, call.count, es)) {
    exec.lowLatency = true;
    roundCount = std::max<uint64_t>(call.count, 1);
  }
  collie::ProgramArgs args;
  args.collective = call.collective;
  args.nranks = comm->nranks;
  args.rank = comm->rank;
  args.stride = call.count;
  args.root = call.root;
  args.ranksPerNode = comm->topology.ranksPerNode;
  if (call.collective == Collective::kAllToAllv) {
    // Per-peer counts make each call's program its own; it is O(nranks) steps to build.
    args.sendCounts = call.sendCounts;
    args.sendDispls = call.sendDispls;
    args.recvCounts = call.recvCounts;
    args.recvDispls = call.recvDispls;
    exec.input = call.input;
    exec.output = call.output;
    Status st;
    if (algo.mapsPeers) {
      // Whole, as the other direct calls below: one program, run as the kernel written for it.
      const collie::Program program = buildProgram(algo, args);
      collie::RoundPlan plan;
      plan.rounds = 1;
      plan.last.push_back(collie::ChannelWork{&program, 0});
      st = comm->executor->runRounds(plan, exec);
    } else {
      // Its steps never read what an earlier step wrote, so channels may split each step.
      st = comm->executor->runSplit(buildProgram(algo, args), exec);
    }
    if (!st.ok()) comm->breakWith(st.withContext(call.name));
    return st.withContext(call.name);
  }
  // Channels: a round is cut again into one part per channel, each a complete
  // collective on its part of every block (as rounds are), in 16-byte units (and whole chunks of a program file).
  const uint64_t channels = static_cast<uint64_t>(comm->executor->channels());
  const uint64_t align = std::max<uint64_t>(1, 16 / es) * quantum;
  auto partOf = [&](uint64_t round) { return ((round + channels - 1) / channels + align - 1) / align * align; };
  auto cut = [&](uint64_t round, uint64_t per, std::vector<collie::ChannelWork>* work) {
    for (uint64_t off = 0; off == 0 || off < round; off += per) {
      args.count = std::min<uint64_t>(per, round - off);
      work->push_back(collie::ChannelWork{&programFor(comm, algo, args), off});
      if (round == 0) break;
    }
  };
  // Every round but the last carries roundCount elements; each runs on the buffers advanced by its offset
  // (blocks keep their full-count stride, and each round takes the same part of each).
  collie::RoundPlan plan;
  plan.rounds = call.count <= roundCount ? 1 : 1 + (call.count - 1) / roundCount;
  plan.stride = plan.rounds > 1 ? roundCount : 0;
  // A call needs at most four programs (two kinds of round, each with full channel parts and the last);
  // the cache is bounded (the sizes of one sweep) and emptied before, never between, lookups.
  if (comm->programs.size() >= 60) comm->programs.clear();
  // After full rounds the last one is cut in the full rounds' parts: its full parts reuse their program, so a
  // launch carries two or three programs, which stay inline in the launch (kInlineSteps) for rings up to ten.
  const uint64_t lastCount = call.count - (plan.rounds - 1) * plan.stride;
  if (algo.mapsPeers) {
    // A direct algorithm's call goes whole to the executor, which runs it as a kernel written for it or refuses it
    // (executor/cuda_executor.h, "Direct algorithms"): its programs use no slots, so no rounds, and no channel parts.
    args.count = call.count;
    plan.rounds = 1;
    plan.stride = 0;
    plan.last.push_back(collie::ChannelWork{&programFor(comm, algo, args), 0});
  } else {
    if (plan.rounds > 1) cut(roundCount, partOf(roundCount), &plan.full);
    cut(lastCount, plan.rounds > 1 ? partOf(roundCount) : partOf(lastCount), &plan.last);
  }
  exec.input = call.input;
  exec.output = call.output;
  Status st = comm->executor->runRounds(plan, exec);
  if (!st.ok()) {
    comm->breakWith(st.withContext(call.name));
    return st.withContext(call.name);
  }
  return Status();
}

// A pre-multiplied sum: an ordinary sum over a scaled copy of the input (core/redop.cc).
Status executeScaled(collieComm_t comm, const Call& call, const collie::ScaleArgs& scale) {
  const uint64_t n = call.count * (call.collective == Collective::kReduceScatter ? comm->nranks : 1);
  Call sum = call;
  sum.op = collieSum;
  if (comm->backend == collieBackendCuda) {
    // The scaling kernel and its staging on the communicator's GPU (a group's threads start on device 0).
    collie::DeviceGuard guard(comm->cudaDevice);
    if (comm->nranks > 1 && comm->executor->scalesInput()) {
      // The kernels' executor scales as part of its launch, into a buffer of its own. An allocation before the
      // sum and a free after it on the caller's stream would each hold back peers' kernels whose streams share a
      // hardware queue with it: the free waits for our kernel, which waits for theirs, queued behind the free
      // (docs/cuda-executor.md, "Ranks sharing hardware queues").
      Status st = collie::resolveScalar(scale, &sum.scale.deviceScalar, sum.scale.hostScalar);
      if (!st.ok()) {
        comm->breakWith(st.withContext(call.name));  // the peers go on without this rank
        return st.withContext(call.name);
      }
      sum.scale.active = true;
      sum.scale.count = n;
      return executeCall(comm, sum);
    }
    void* staging = nullptr;
    Status st = collie::scaleInputDevice(scale, call.input, n, call.stream, comm->executor->devicePool(), &staging);
    if (!st.ok()) {
      comm->breakWith(st.withContext(call.name));  // the peers go on without this rank
      return st.withContext(call.name);
    }
    if (staging != nullptr) sum.input = staging;
    st = executeCall(comm, sum);
    // Freed in stream order after the sum that reads it, also when that failed.
    Status freed = collie::releaseInputDevice(staging, call.stream);
    return st.ok() ? freed.withContext(call.name) : st;
  }
  std::vector<uint8_t> staging;
  Status st = collie::scaleInput(scale, call.input, n, &staging);
  if (!st.ok()) {
    comm->breakWith(st.withContext(call.name));  // the peers go on without this rank
    return st.withContext(call.name);
  }
  sum.input = staging.data();
  return executeCall(comm, sum);
}

Status checkRoot(int root, collieComm_t comm, const char* call) {
  if (root < 0 || root >= comm->nranks)
    return Status::error(collieInvalidArgument, "%s: root %d is not a rank of this %d-rank communicator", call, root,
                         comm->nranks);
  return Status();
}

// count * nranks elements, refused when it overflows.
Status blockTotal(size_t count, collieComm_t comm, const char* call, size_t* total) {
  if (count > SIZE_MAX / static_cast<size_t>(comm->nranks))
    return Status::error(collieInvalidArgument, "%s: count %zu times %d ranks overflows", call, count, comm->nranks);
  *total = count * static_cast<size_t>(comm->nranks);
  return Status();
}

// All-to-all cannot run in place: a block would be overwritten before it is sent.
Status checkDisjoint(const void* a, size_t aBytes, const void* b, size_t bBytes, const char* call) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  if (aBytes != 0 && bBytes != 0 && a != nullptr && b != nullptr && x < y + bBytes && y < x + aBytes)
    return Status::error(collieInvalidArgument, "%s: sendbuff and recvbuff overlap; all-to-all has no in-place form",
                         call);
  return Status();
}

// Copies an all-to-all-v split (nranks counts and displacements) and the
// extent of the buffer it describes, refusing NULL arrays and overflow.
Status splits(collieComm_t comm, const char* call, const char* side, const size_t* counts, const size_t* displs,
              std::vector<uint64_t>* outCounts, std::vector<uint64_t>* outDispls, size_t* extent) {
  if (counts == nullptr || displs == nullptr)
    return Status::error(collieInvalidArgument, "%s: %scounts and the %s displacements must be arrays of %d entries",
                         call, side, side, comm->nranks);
  *extent = 0;
  for (int p = 0; p < comm->nranks; ++p) {
    if (displs[p] > SIZE_MAX - counts[p])
      return Status::error(collieInvalidArgument, "%s: %s displacement %zu + count %zu for rank %d overflows", call,
                           side, displs[p], counts[p], p);
    if (counts[p] != 0) *extent = std::max(*extent, displs[p] + counts[p]);
    outCounts->push_back(counts[p]);
    outDispls->push_back(displs[p]);
  }
  return Status();
}

// What the ranks compare under COLLIE_CHECK (core/call_check.h). The algorithm
// it looks up is kept in call->algo, so running the call does not look again.
collie::CallShape shapeOf(collieComm_t comm, Call* callp, bool valid) {
  Call& call = *callp;
  collie::CallShape shape;
  shape.call = call.name;
  shape.collective = call.collective;
  shape.type = call.type;
  // Each rank has its own pre-multiplied sum (its own scalar, maybe its own id): compare the kind.
  shape.op = call.op >= collieNumOps ? collieNumOps : call.op;
  shape.root = call.root;
  const bool v = call.collective == Collective::kAllToAllv;
  shape.count = v ? 0 : call.count;
  shape.sendCounts = &call.sendCounts;
  shape.recvCounts = &call.recvCounts;
  if (valid) {
    call.algo = comm->algorithmForCall(call.collective, call.count, call.type, call.op);
    if (call.algo != nullptr) shape.algorithm = call.algo->name;
  }
  return shape;
}

// Every collective of the C API: checks the communicator, lets `build` check
// the arguments and describe the call, then runs it now, or at collieGroupEnd
// when a group is open on this thread. A pre-multiplied sum's operator is
// captured now: it may be destroyed before GroupEnd.
template <typename Build>
collieResult_t submit(collieComm_t comm, const char* name, collieStream_t stream, Build build) {
  return guarded(comm, [&] {
    COLLIE_RETURN_IF_ERROR(checkComm(comm, name));
    Call call(name, Collective::kAllReduce, nullptr, nullptr, 0, collieUint8, collieSum, 0);
    Status local = build(&call);
    call.stream = stream;
    if (local.ok()) local = collie::api::checkPlacement(comm, call.input, name, "sendbuff");
    if (local.ok()) local = collie::api::checkPlacement(comm, call.output, name, "recvbuff");
    if (local.ok()) local = collie::api::checkStream(comm, stream, name);
    collie::ScaleArgs scale;
    if (local.ok()) local = collie::captureRedOp(comm, call.op, call.type, name, &scale);
    // COLLIE_CHECK: the ranks compare where the call runs (inside a group, at
    // GroupEnd, when one thread may drive several communicators). A rank whose
    // arguments failed takes part too, so its peers learn why at once.
    const bool check = comm->checkCalls;
    if (!check) COLLIE_RETURN_IF_ERROR(local);
    auto run = [comm, call = std::move(call), scale, local, check]() mutable {
      if (check) COLLIE_RETURN_IF_ERROR(collie::checkAcrossRanks(comm, shapeOf(comm, &call, local.ok()), local));
      return scale.active ? executeScaled(comm, call, scale) : executeCall(comm, call);
    };
    if (collie::group::active()) {
      collie::group::enqueue(comm, std::move(run));
      return local;
    }
    return run();
  });
}

}  // namespace

extern "C" {

collieResult_t collieAllReduce(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                               collieRedOp_t op, collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieAllReduce", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    COLLIE_RETURN_IF_ERROR(checkOp(op, name));
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, count, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, count, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0};
    return Status();
  });
}

collieResult_t collieReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collieDataType_t datatype,
                                   collieRedOp_t op, collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieReduceScatter", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    COLLIE_RETURN_IF_ERROR(checkOp(op, name));
    size_t total = 0;
    COLLIE_RETURN_IF_ERROR(blockTotal(recvcount, comm, name, &total));
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, total, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, recvcount, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0};
    return Status();
  });
}

collieResult_t collieAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collieDataType_t datatype,
                               collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieAllGather", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    size_t total = 0;
    COLLIE_RETURN_IF_ERROR(blockTotal(sendcount, comm, name, &total));
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, sendcount, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, total, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kAllGather, sendbuff, recvbuff, sendcount, datatype, collieSum, 0};
    return Status();
  });
}

collieResult_t collieBroadcast(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype, int root,
                               collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieBroadcast", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    COLLIE_RETURN_IF_ERROR(checkRoot(root, comm, name));
    // As in NCCL, sendbuff is read on the root only.
    const bool isRoot = comm->rank == root;
    if (isRoot) COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, count, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, count, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kBroadcast, isRoot ? sendbuff : nullptr, recvbuff, count, datatype, collieSum, root};
    return Status();
  });
}

collieResult_t collieReduce(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                            collieRedOp_t op, int root, collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieReduce", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    COLLIE_RETURN_IF_ERROR(checkOp(op, name));
    COLLIE_RETURN_IF_ERROR(checkRoot(root, comm, name));
    // As in NCCL, recvbuff is written on the root only.
    const bool isRoot = comm->rank == root;
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, count, datatype, name, "sendbuff"));
    if (isRoot) COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, count, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kReduce, sendbuff, isRoot ? recvbuff : nullptr, count, datatype, op, root};
    return Status();
  });
}

collieResult_t collieBarrier(collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieBarrier", stream, [&](Call* call) {
    // An allreduce of one byte: no rank can finish it before every rank has
    // started it. The byte is the communicator's, since in a group the call runs later.
    // On a GPU communicator the byte is in device memory.
    void* token = comm->deviceToken != nullptr ? comm->deviceToken : &comm->barrierToken;
    *call = Call{call->name, Collective::kAllReduce, token, token, 1, collieUint8, collieSum, 0};
    return Status();
  });
}

collieResult_t collieAllToAll(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype,
                              collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieAllToAll", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    size_t total = 0;
    COLLIE_RETURN_IF_ERROR(blockTotal(count, comm, name, &total));
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, total, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, total, datatype, name, "recvbuff"));
    COLLIE_RETURN_IF_ERROR(checkDisjoint(sendbuff, total * collie::typeSize(datatype), recvbuff,
                                         total * collie::typeSize(datatype), name));
    *call = Call{name, Collective::kAllToAll, sendbuff, recvbuff, count, datatype, collieSum, 0};
    return Status();
  });
}

collieResult_t collieAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                               const size_t* recvcounts, const size_t* rdispls, collieDataType_t datatype,
                               collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieAllToAllv", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    *call = Call{name, Collective::kAllToAllv, sendbuff, recvbuff, 0, datatype, collieSum, 0};
    size_t sendExtent = 0, recvExtent = 0;
    COLLIE_RETURN_IF_ERROR(
        splits(comm, name, "send", sendcounts, sdispls, &call->sendCounts, &call->sendDispls, &sendExtent));
    COLLIE_RETURN_IF_ERROR(
        splits(comm, name, "recv", recvcounts, rdispls, &call->recvCounts, &call->recvDispls, &recvExtent));
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, sendExtent, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, recvExtent, datatype, name, "recvbuff"));
    // The one pair of counts a rank can check alone: what it sends itself.
    // COLLIE_CHECK=1 compares the others across ranks (core/call_check.h).
    const size_t me = static_cast<size_t>(comm->rank);
    if (call->sendCounts[me] != call->recvCounts[me])
      return Status::error(collieInvalidArgument,
                           "%s: sendcounts[%d] = %llu but recvcounts[%d] = %llu (this rank's own block)", name,
                           comm->rank, static_cast<unsigned long long>(call->sendCounts[me]), comm->rank,
                           static_cast<unsigned long long>(call->recvCounts[me]));
    const size_t es = collie::typeSize(datatype);
    COLLIE_RETURN_IF_ERROR(checkDisjoint(sendbuff, sendExtent * es, recvbuff, recvExtent * es, name));
    call->extents = collie::VExtents{sendExtent, recvExtent};
    for (uint64_t c : call->sendCounts) call->count += c;  // what the algorithm choice sees
    return Status();
  });
}

collieResult_t collieGather(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype, int root,
                            collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieGather", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    COLLIE_RETURN_IF_ERROR(checkRoot(root, comm, name));
    size_t total = 0;
    COLLIE_RETURN_IF_ERROR(blockTotal(count, comm, name, &total));
    // recvbuff is the root's only; in place when sendbuff == recvbuff + root * count.
    const bool isRoot = comm->rank == root;
    COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, count, datatype, name, "sendbuff"));
    if (isRoot) COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, total, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kGather, sendbuff, isRoot ? recvbuff : nullptr, count, datatype, collieSum, root};
    return Status();
  });
}

collieResult_t collieScatter(const void* sendbuff, void* recvbuff, size_t count, collieDataType_t datatype, int root,
                             collieComm_t comm, collieStream_t stream) {
  return submit(comm, "collieScatter", stream, [&](Call* call) {
    const char* name = call->name;
    COLLIE_RETURN_IF_ERROR(checkType(datatype, name));
    COLLIE_RETURN_IF_ERROR(checkRoot(root, comm, name));
    size_t total = 0;
    COLLIE_RETURN_IF_ERROR(blockTotal(count, comm, name, &total));
    // sendbuff is the root's only; in place when recvbuff == sendbuff + root * count.
    const bool isRoot = comm->rank == root;
    if (isRoot) COLLIE_RETURN_IF_ERROR(checkBuffer(sendbuff, total, datatype, name, "sendbuff"));
    COLLIE_RETURN_IF_ERROR(checkBuffer(recvbuff, count, datatype, name, "recvbuff"));
    *call = Call{name, Collective::kScatter, isRoot ? sendbuff : nullptr, recvbuff, count, datatype, collieSum, root};
    return Status();
  });
}

}  // extern "C"
