#include "transport/cuda_ipc/buffer_windows.h"

#include <cuda.h>  // the driver's types, for the one entry point reached through the runtime
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <utility>

#include "base/cuda_check.h"
#include "transport/bootstrap/bootstrap.h"

namespace collie {

namespace {

// What each rank publishes about its window. Raw bytes over the bootstrap.
struct RangeRecord {
  cudaIpcMemHandle_t handle;
  uint64_t base;  // the range, valid only inside the publishing process
  uint64_t bytes;
  uint64_t allocStart;  // its allocation's start, which an opened handle maps to (0: unknown)
  uint64_t freeMask;    // the window numbers free on this rank
  int32_t failed;       // 1: this rank cannot offer its range (its own error says why)
  int32_t unused;
};

// The start of the device allocation holding [p, p + bytes), as the driver knows it (cuMemGetAddressRange,
// reached through the runtime, so that Collie links no driver library); null where it knows no such allocation.
const void* driverAllocationStart(const void* p, uint64_t bytes) {
  using GetRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      fn == nullptr || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  CUdeviceptr start = 0;
  size_t size = 0;
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  if (reinterpret_cast<GetRange>(fn)(&start, &size, static_cast<CUdeviceptr>(a)) != CUDA_SUCCESS) return nullptr;
  if (a < start || a - start > size || bytes > size - (a - start)) return nullptr;
  return reinterpret_cast<const void*>(static_cast<uintptr_t>(start));
}

}  // namespace

BufferWindows::BufferWindows(Bootstrap* bootstrap, const std::vector<PeerInfo>& peers, int device, int maxWindows)
    : bootstrap_(bootstrap),
      device_(device),
      used_(static_cast<size_t>(maxWindows), false),
      holds_(static_cast<size_t>(maxWindows)) {
  used_[0] = true;  // the staging buffer's
  const int n = bootstrap_->nranks(), rank = bootstrap_->rank();
  peerProcess_.assign(static_cast<size_t>(n), false);
  for (int r = 0; r < n; ++r)
    peerProcess_[static_cast<size_t>(r)] = r != rank && sameHost(peers, r, rank) && !sameProcess(peers, r, rank);
}

BufferWindows::~BufferWindows() {
  DeviceGuard guard(device_);
  for (const Opened& o : opened_) (void)cudaIpcCloseMemHandle(o.local);
  (void)cudaGetLastError();
}

Status BufferWindows::add(const void* base, uint64_t bytes, const void* allocStart, const Status& refusal, int* number,
                          std::vector<PeerRange>* ranges) {
  const int n = bootstrap_->nranks(), rank = bootstrap_->rank();
  const int most = static_cast<int>(used_.size());
  bool offered = false;
  for (int r = 0; r < n; ++r) offered = offered || peerProcess_[static_cast<size_t>(r)];
  DeviceGuard guard(device_);
  COLLIE_RETURN_IF_ERROR(guard.status());
  std::vector<RangeRecord> records(static_cast<size_t>(n));
  RangeRecord& mine = records[static_cast<size_t>(rank)];
  memset(&mine, 0, sizeof(mine));
  mine.base = reinterpret_cast<uint64_t>(base);
  mine.bytes = bytes;
  for (int w = 0; w < most; ++w)
    if (!used_[static_cast<size_t>(w)]) mine.freeMask |= uint64_t{1} << w;
  // A failure of our own still goes through the exchange, so that no peer waits for us in vain.
  Status own = refusal;
  if (own.ok() && offered && allocStart == nullptr) allocStart = driverAllocationStart(base, bytes);
  mine.allocStart = reinterpret_cast<uint64_t>(allocStart);
  if (own.ok() && offered && allocStart == nullptr) {
    own = Status::error(collieInvalidArgument,
                        "rank %d's window at %p (%llu bytes) does not lie inside one device allocation: across "
                        "processes a window must, so that its allocation can be handed to the peers (cudaIpc)",
                        rank, base, static_cast<unsigned long long>(bytes));
  } else if (own.ok() && offered && cudaIpcGetMemHandle(&mine.handle, const_cast<void*>(allocStart)) != cudaSuccess) {
    (void)cudaGetLastError();
    own = Status::error(collieInvalidArgument,
                        "rank %d's window at %p lies in memory that cudaIpc cannot hand to other processes (a "
                        "stream-ordered pool's, from cudaMallocAsync, or cuMemCreate's): across processes a window "
                        "must lie in memory from cudaMalloc or collieMemAlloc",
                        rank, base);
  }
  mine.failed = own.ok() ? 0 : 1;
  COLLIE_RETURN_IF_ERROR(bootstrap_->allGather(records.data(), sizeof(RangeRecord)));
  COLLIE_RETURN_IF_ERROR(own);
  uint64_t freeAll = ~uint64_t{0};
  for (int r = 0; r < n; ++r) {
    const RangeRecord& rec = records[static_cast<size_t>(r)];
    if (rec.failed != 0)
      return Status::error(collieRemoteError, "rank %d could not offer its window (its own error says why)", r);
    freeAll &= rec.freeMask;
  }
  int chosen = -1;
  for (int w = 1; w < most && chosen < 0; ++w)
    if ((freeAll >> w & 1) != 0) chosen = w;
  if (chosen < 0)
    return Status::error(collieInvalidUsage,
                         "a communicator of peer processes holds at most %d windows at once: deregister one first",
                         most - 1);
  ranges->assign(static_cast<size_t>(n), PeerRange{});
  std::vector<std::pair<int, uint64_t>> held;
  Status st;
  for (int r = 0; r < n && st.ok(); ++r) {
    if (!peerProcess_[static_cast<size_t>(r)]) continue;
    const RangeRecord& rec = records[static_cast<size_t>(r)];
    void* local = nullptr;
    for (Opened& o : opened_)
      if (o.peer == r && o.remoteStart == rec.allocStart) {
        ++o.windows;
        local = o.local;
      }
    if (local == nullptr) {
      st = cudaStatus(cudaIpcOpenMemHandle(&local, rec.handle, cudaIpcMemLazyEnablePeerAccess),
                      "cudaIpcOpenMemHandle of a peer's window")
               .withContext("rank " + std::to_string(r));
      if (!st.ok()) break;
      opened_.push_back(Opened{r, rec.allocStart, local, 1});
    }
    held.emplace_back(r, rec.allocStart);
    (*ranges)[static_cast<size_t>(r)] = PeerRange{rec.allocStart, reinterpret_cast<uint64_t>(local)};
  }
  // Every rank must agree that the window exists: one that could not map a peer's fails them all.
  int32_t ok = st.ok() ? 1 : 0;
  std::vector<int32_t> oks(static_cast<size_t>(n));
  oks[static_cast<size_t>(rank)] = ok;
  Status agreed = bootstrap_->allGather(oks.data(), sizeof(int32_t));
  int bad = -1;
  for (int r = 0; r < n && agreed.ok(); ++r)
    if (oks[static_cast<size_t>(r)] == 0 && bad < 0) bad = r;
  if (!st.ok() || !agreed.ok() || bad >= 0) {
    for (const auto& h : held) release(h.first, h.second);
    if (!st.ok()) return st;
    if (!agreed.ok()) return agreed;
    return Status::error(collieRemoteError, "rank %d could not map its peers' windows (its own error says why)", bad);
  }
  used_[static_cast<size_t>(chosen)] = true;
  holds_[static_cast<size_t>(chosen)] = std::move(held);
  *number = chosen;
  return Status();
}

void BufferWindows::release(int peer, uint64_t remoteStart) {
  for (size_t i = 0; i < opened_.size(); ++i) {
    Opened& o = opened_[i];
    if (o.peer != peer || o.remoteStart != remoteStart) continue;
    if (--o.windows == 0) {
      DeviceGuard guard(device_);
      (void)cudaIpcCloseMemHandle(o.local);
      (void)cudaGetLastError();
      opened_.erase(opened_.begin() + static_cast<long>(i));
    }
    return;
  }
}

void BufferWindows::remove(int number) {
  if (number < 0 || number >= static_cast<int>(used_.size()) || !used_[static_cast<size_t>(number)]) return;
  for (const auto& h : holds_[static_cast<size_t>(number)]) release(h.first, h.second);
  holds_[static_cast<size_t>(number)].clear();
  used_[static_cast<size_t>(number)] = false;
}

}  // namespace collie
