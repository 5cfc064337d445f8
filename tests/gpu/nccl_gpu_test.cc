// The drop-in libnccl.so.2 on the CUDA backend, from a program written only
// against nccl.h: ranks as threads of one process sharing the GPUs there are
// (ncclCommInitAll with a devlist that may repeat a device), device buffers
// from cudaMalloc and ncclMemAlloc, each rank on its own stream: allreduce,
// pre-multiplied sums (host and device scalars), allgather, broadcast and an
// all-to-all-v from grouped send/recv, checked
// after the streams are synchronised. Exits 77 (ctest: skipped) with the reason
// when no GPU is usable or the communicators did not land on one.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

int failures = 0;

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    ncclResult_t r_ = (call);                                                                              \
    if (r_ != ncclSuccess) {                                                                               \
      std::fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, ncclGetErrorString(r_), \
                   ncclGetLastError(nullptr));                                                             \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

#define CUDA(call)                                                                                     \
  do {                                                                                                 \
    cudaError_t e_ = (call);                                                                           \
    if (e_ != cudaSuccess) {                                                                           \
      std::fprintf(stderr, "FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)

void expectEq(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) wrong += got[i] != want[i];
  if (wrong != 0) {
    std::fprintf(stderr, "FAIL: %s: %zu of %zu wrong\n", what.c_str(), wrong, want.size());
    ++failures;
  }
}

}  // namespace

int main() {
  int gpus = 0;  // left unwritten without a driver
  const cudaError_t e = cudaGetDeviceCount(&gpus);
  if (e != cudaSuccess || gpus == 0) {
    std::printf("SKIP: no usable GPU: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  // A libnccl.so.2 found first on the library path (CUDA 13's toolkit ships NVIDIA's in lib64) would make
  // this a test of that library, which refuses several ranks on one GPU: say so instead.
  int version = 0;
  CHECK(ncclGetVersion(&version));
  if (version != NCCL_VERSION_CODE) {
    std::fprintf(stderr,
                 "FAIL: the libnccl.so.2 loaded is version %d, not Collie's %d: another NCCL comes first on the "
                 "library path\n",
                 version, NCCL_VERSION_CODE);
    return 1;
  }
  const int n = 4;
  std::vector<int> devlist(n);
  for (int r = 0; r < n; ++r) devlist[r] = r % gpus;
  std::vector<ncclComm_t> comms(n);
  CHECK(ncclCommInitAll(comms.data(), n, devlist.data()));
  int device = -1;
  CHECK(ncclCommCuDevice(comms[0], &device));
  if (device < 0) {
    std::printf("SKIP: the communicators run on the host backend (COLLIE_DEVICE=host?)\n");
    for (ncclComm_t c : comms) CHECK(ncclCommDestroy(c));
    return 77;
  }
  // The device memory each communicator holds, all of it allocated at init and none suspendable.
  uint64_t total = 0, persist = 0, suspendable = 1;
  CHECK(ncclCommMemStats(comms[0], ncclStatGpuMemTotal, &total));
  CHECK(ncclCommMemStats(comms[0], ncclStatGpuMemPersist, &persist));
  CHECK(ncclCommMemStats(comms[0], ncclStatGpuMemSuspend, &suspendable));
  if (total == 0 || persist != total || suspendable != 0) {
    std::printf("FAIL: ncclCommMemStats: total %llu, persistent %llu, suspendable %llu bytes\n",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(persist),
                static_cast<unsigned long long>(suspendable));
    return 1;
  }
  std::printf("ncclCommMemStats: %llu bytes of device memory per communicator\n",
              static_cast<unsigned long long>(total));
  const size_t count = 1 << 20;
  std::vector<cudaStream_t> streams(n);
  std::vector<float*> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    CUDA(cudaSetDevice(devlist[r]));
    CUDA(cudaStreamCreate(&streams[r]));
    void* p = nullptr;
    CHECK(ncclMemAlloc(&p, count * n * sizeof(float)));  // device memory here
    send[r] = static_cast<float*>(p);
    CUDA(cudaMalloc(&recv[r], count * n * sizeof(float)));
    std::vector<float> host(count * n);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(r + static_cast<int>(i % 13));
    CUDA(cudaMemcpy(send[r], host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  auto fetch = [&](int r, size_t elems) {
    std::vector<float> host(elems);
    CUDA(cudaSetDevice(devlist[r]));
    CUDA(cudaStreamSynchronize(streams[r]));
    CUDA(cudaMemcpy(host.data(), recv[r], elems * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  };
  // Every receive buffer all NaN (bytes 0xff) before each collective, so a call that writes nothing fails its
  // check instead of leaving the previous call's result (the two pre-multiplied sums expect the same values).
  auto poison = [&]() {
    for (int r = 0; r < n; ++r) {
      CUDA(cudaSetDevice(devlist[r]));
      CUDA(cudaMemset(recv[r], 0xff, count * n * sizeof(float)));
      CUDA(cudaDeviceSynchronize());
    }
  };

  poison();
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) CHECK(ncclAllReduce(send[r], recv[r], count, ncclFloat32, ncclSum, comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 13));
    expectEq(fetch(r, count), want, "allreduce rank " + std::to_string(r));
  }

  // Pre-multiplied sums, the scalar r + 1 host-immediate and then in device
  // memory, each operator destroyed right after the call naming it.
  std::vector<float*> deviceScalar(n);
  for (int r = 0; r < n; ++r) {
    CUDA(cudaSetDevice(devlist[r]));
    CUDA(cudaMalloc(&deviceScalar[r], sizeof(float)));
    const float value = static_cast<float>(r + 1);
    CUDA(cudaMemcpy(deviceScalar[r], &value, sizeof(float), cudaMemcpyHostToDevice));
  }
  for (ncclScalarResidence_t residence : {ncclScalarHostImmediate, ncclScalarDevice}) {
    poison();
    CHECK(ncclGroupStart());
    for (int r = 0; r < n; ++r) {
      float value = static_cast<float>(r + 1);
      void* scalar = residence == ncclScalarDevice ? static_cast<void*>(deviceScalar[r]) : &value;
      ncclRedOp_t op;
      CHECK(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat32, residence, comms[r]));
      CHECK(ncclAllReduce(send[r], recv[r], count, ncclFloat32, op, comms[r], streams[r]));
      CHECK(ncclRedOpDestroy(op, comms[r]));
    }
    CHECK(ncclGroupEnd());
    for (int r = 0; r < n; ++r) {
      std::vector<float> want(count, 0.0f);
      for (size_t i = 0; i < count; ++i)
        for (int q = 0; q < n; ++q) want[i] += static_cast<float>((q + 1) * (q + static_cast<int>(i % 13)));
      expectEq(fetch(r, count), want,
               std::string("pre-multiplied sum (") + (residence == ncclScalarDevice ? "device" : "host") +
                   " scalar) rank " + std::to_string(r));
    }
  }
  for (int r = 0; r < n; ++r) CUDA(cudaFree(deviceScalar[r]));

  poison();
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) CHECK(ncclAllGather(send[r], recv[r], count, ncclFloat32, comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    std::vector<float> want(count * n);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = static_cast<float>(static_cast<int>(i / count) + static_cast<int>(i % count % 13));
    expectEq(fetch(r, count * n), want, "allgather rank " + std::to_string(r));
  }

  poison();
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) CHECK(ncclBroadcast(send[r], recv[r], count, ncclFloat32, 2, comms[r], streams[r]));
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    std::vector<float> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = static_cast<float>(2 + static_cast<int>(i % 13));
    expectEq(fetch(r, count), want, "broadcast rank " + std::to_string(r));
  }

  // All-to-all-v: rank s sends (s + d) % 3 * 1000 elements to d, from offset 0 of its send buffer.
  auto pair = [](int s, int d) { return static_cast<size_t>((s + d) % 3 * 1000); };
  poison();
  CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    size_t roff = 0;
    for (int p = 0; p < n; ++p) {
      CHECK(ncclSend(send[r], pair(r, p), ncclFloat32, p, comms[r], streams[r]));
      CHECK(ncclRecv(recv[r] + roff, pair(p, r), ncclFloat32, p, comms[r], streams[r]));
      roff += pair(p, r);
    }
  }
  CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    std::vector<float> want;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < pair(p, r); ++i) want.push_back(static_cast<float>(p + static_cast<int>(i % 13)));
    expectEq(fetch(r, want.size()), want, "all-to-all-v rank " + std::to_string(r));
  }

  for (int r = 0; r < n; ++r) {
    CUDA(cudaSetDevice(devlist[r]));
    CHECK(ncclMemFree(send[r]));
    CUDA(cudaFree(recv[r]));
    CUDA(cudaStreamDestroy(streams[r]));
    CHECK(ncclCommDestroy(comms[r]));
  }
  if (failures != 0) return 1;
  std::printf("PASS: nccl_gpu_test, %d ranks on %d GPU(s)\n", n, gpus);
  return 0;
}
