// OpenMPI as a baseline on host buffers (MPI_Allreduce and friends), and the
// MPI world the Team uses when mpirun started the job. Built only with
// COLLIE_WITH_MPI; otherwise every entry point says MPI is not built in.
#include <climits>
#include <cstring>

#include "bench/impl.h"
#include "bench/launch.h"
#include "bench/options.h"

#ifdef COLLIE_BENCH_WITH_MPI
// The C API only: OpenMPI's mpi.h would otherwise pull in its C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace collie {
namespace bench {

#ifdef COLLIE_BENCH_WITH_MPI

namespace {

MPI_Op mpiOp(collieRedOp_t op) {
  switch (op) {
    case collieProd:
      return MPI_PROD;
    case collieMax:
      return MPI_MAX;
    case collieMin:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

// The MPI type of a reducing call; MPI_DATATYPE_NULL where MPI has none.
MPI_Datatype reduceType(collieDataType_t t) {
  switch (t) {
    case collieInt8:
      return MPI_INT8_T;
    case collieUint8:
      return MPI_UINT8_T;
    case collieInt32:
      return MPI_INT32_T;
    case collieUint32:
      return MPI_UINT32_T;
    case collieInt64:
      return MPI_INT64_T;
    case collieUint64:
      return MPI_UINT64_T;
    case collieFloat32:
      return MPI_FLOAT;
    case collieFloat64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

class MpiImpl : public Impl {
 public:
  MpiImpl() {
    label_ = "mpi";
    baseline_ = true;
    // Collectives that only move data take any element size as raw bytes.
    for (int es : {1, 2, 4, 8}) {
      MPI_Datatype t;
      MPI_Type_contiguous(es, MPI_BYTE, &t);
      MPI_Type_commit(&t);
      bytes_[es] = t;
    }
  }
  ~MpiImpl() override {
    for (MPI_Datatype& t : bytes_)
      if (t != MPI_DATATYPE_NULL) MPI_Type_free(&t);
  }

  std::string unsupported(const Case& c, bool inPlace) const override {
    if (inPlace && !collInfo(c.coll).inPlace) return "no in-place form";
    if (collInfo(c.coll).reduces) {
      if (reduceType(c.type) == MPI_DATATYPE_NULL) return "MPI has no reduction for this type";
      if (c.op == collieAvg) return "MPI has no average operator";
    }
    if (inPlace && c.coll == Coll::kReduceScatter)
      return "MPI_Reduce_scatter_block in place leaves the result at the start of the buffer, not at this rank's block";
    if (c.sendElems > INT_MAX || c.recvElems > INT_MAX) return "counts beyond INT_MAX";
    return "";
  }

  std::string issue(const Call& call) override {
    const Case& c = *call.cases[0];
    const void* s = call.send[0];
    void* r = call.recv[0];
    const int count = static_cast<int>(c.count);
    const MPI_Datatype red = reduceType(c.type);
    const MPI_Datatype dt = bytes_[c.typeBytes()];
    const MPI_Op op = mpiOp(c.op);
    const bool root = c.rank == c.root;
    MPI_Comm w = MPI_COMM_WORLD;
    int rc = MPI_SUCCESS;
    switch (c.coll) {
      case Coll::kAllReduce:
        rc = MPI_Allreduce(call.inPlace ? MPI_IN_PLACE : s, r, count, red, op, w);
        break;
      case Coll::kAllGather:
        rc = MPI_Allgather(call.inPlace ? MPI_IN_PLACE : s, count, dt, r, count, dt, w);
        break;
      case Coll::kReduceScatter:
        rc = MPI_Reduce_scatter_block(s, r, count, red, op, w);
        break;
      case Coll::kBroadcast:
        // One buffer in MPI: out of place, the root first copies its input to its output.
        if (!call.inPlace && root) memcpy(r, s, c.count * c.typeBytes());
        rc = MPI_Bcast(r, count, dt, c.root, w);
        break;
      case Coll::kReduce:
        rc = MPI_Reduce(call.inPlace && root ? MPI_IN_PLACE : s, r, count, red, op, c.root, w);
        break;
      case Coll::kAllToAll:
        rc = MPI_Alltoall(s, count, dt, r, count, dt, w);
        break;
      case Coll::kAllToAllv: {
        std::vector<int> sc, sd, rcn, rd;
        for (size_t p = 0; p < c.sendCounts.size(); ++p) {
          sc.push_back(static_cast<int>(c.sendCounts[p]));
          sd.push_back(static_cast<int>(c.sendDispls[p]));
          rcn.push_back(static_cast<int>(c.recvCounts[p]));
          rd.push_back(static_cast<int>(c.recvDispls[p]));
        }
        rc = MPI_Alltoallv(s, sc.data(), sd.data(), dt, r, rcn.data(), rd.data(), dt, w);
        break;
      }
      case Coll::kGather:
        rc = MPI_Gather(call.inPlace && root ? MPI_IN_PLACE : s, count, dt, r, count, dt, c.root, w);
        break;
      case Coll::kScatter:
        rc = MPI_Scatter(s, count, dt, call.inPlace && root ? MPI_IN_PLACE : r, count, dt, c.root, w);
        break;
      case Coll::kSendRecv: {
        const int n = c.nranks;
        rc = MPI_Sendrecv(s, count, dt, (c.rank + 1) % n, 0, r, count, dt, (c.rank + n - 1) % n, 0, w,
                          MPI_STATUS_IGNORE);
        break;
      }
    }
    if (rc == MPI_SUCCESS) return "";
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return std::string("mpi: ") + text;
  }

 private:
  MPI_Datatype bytes_[9] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL,
                            MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL,
                            MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
};

}  // namespace

bool mpiBuilt() { return true; }

bool mpiInit(int* rank, int* size, std::string* err) {
  int provided = 0;
  // Only worker 0 (the main thread) ever calls MPI.
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    *err = "MPI_Init_thread failed";
    return false;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return true;
}

void mpiFinalize() {
  int done = 0;
  MPI_Finalized(&done);
  if (!done) MPI_Finalize();
}

void mpiBroadcast(void* data, size_t bytes) { MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD); }

void mpiAllreduce(double* v, int n, RedKind kind) {
  const MPI_Op op = kind == RedKind::kSum ? MPI_SUM : (kind == RedKind::kMax ? MPI_MAX : MPI_MIN);
  MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, MPI_COMM_WORLD);
}

std::string mpiUnavailable(const Team& team) {
  if (!team.mpiActive())
    return "MPI is not running in these processes: use -np N (collie-bench then starts itself under mpirun) or "
           "start it with mpirun, not collie-run or srun";
  if (team.threads() * team.perThread() != 1) return "MPI has one rank per process: -t and -g must be 1";
  return "";
}

std::unique_ptr<Impl> makeMpiImpl(Team&, int, const Options&, std::string*) { return std::make_unique<MpiImpl>(); }

std::string mpiVersion() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<size_t>(len));
  const size_t cut = v.find_first_of(",\n");
  return cut == std::string::npos ? v : v.substr(0, cut);
}

#else  // !COLLIE_BENCH_WITH_MPI

bool mpiBuilt() { return false; }
bool mpiInit(int*, int*, std::string* err) {
  *err = "built without MPI";
  return false;
}
void mpiFinalize() {}
void mpiBroadcast(void*, size_t) {}
void mpiAllreduce(double*, int, RedKind) {}
std::string mpiUnavailable(const Team&) {
  return "this collie-bench was built without MPI (COLLIE_WITH_MPI=OFF, or OpenMPI was missing when CMake ran: "
         "install libopenmpi-dev and reconfigure)";
}
std::unique_ptr<Impl> makeMpiImpl(Team&, int, const Options&, std::string* err) {
  *err = "built without MPI";
  return nullptr;
}
std::string mpiVersion() { return ""; }

#endif

}  // namespace bench
}  // namespace collie
