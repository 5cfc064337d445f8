// Windows of peers on other hosts, which this process cannot map: the host
// executor reaches them through this interface; transport/ucx implements it
// with messages whose handler writes into the receiver's window. The protocol
// is the one of executor/protocol.h, unchanged: a sender puts a slice into the
// receiver's slot and then the new `ready` value into the receiver's window;
// the receiver puts `credit` back into the sender's. Every rank still polls only its own window, where remote writes
// land. Only what differs from a mapped peer lives behind this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace collie {

class RemoteWindows {
 public:
  /// One transfer, owned by the caller and opaque to it. It (and the source
  /// of its data) must stay untouched from put() until idle() says so.
  struct Op {
    void* request = nullptr;         // the transport's request in flight
    uint64_t header[3] = {0, 0, 0};  // the transport's message header, kept while it is in flight
    int peer = -1;
    int stage = 0;  // 0: idle
  };

  virtual ~RemoteWindows() = default;

  /// Starts writing `bytes` from `src` to `offset` in `peer`'s window and then,
  /// once those bytes have landed, the u64 `value` to `flagOffset` there.
  /// bytes == 0: just the flag. Values of one flag are consecutive (1, 2, 3,
  /// ...); the peer's counter moves to v only once every value below v has
  /// landed with its data, whatever order the transport delivers them in.
  virtual void put(int peer, const void* src, size_t bytes, uint64_t offset, uint64_t flagOffset, uint64_t value,
                   Op* op) = 0;
  /// The op (and its source) may be reused. Also true once its peer failed().
  virtual bool idle(const Op& op) const = 0;
  /// Moves transfers along, ours and those peers make into our window: every
  /// wait calls it, since a transport may need this process's help for both.
  virtual void progress() = 0;
  /// Every put so far to a peer that has not failed has left this process:
  /// what a collective must reach before it returns, because its peers may
  /// wait for those flags and nothing moves them while no call of ours runs.
  virtual bool quiet() const = 0;
  /// `peer` was lost (its process died or left, its connection broke) or a
  /// transfer to it failed. Only waits on that peer give up: a peer that
  /// finished the collective and destroyed its communicator looks the same.
  virtual bool failed(int peer) const = 0;
  /// What failed, for the error sentence ("" while `peer` has not).
  virtual std::string failure(int peer) const = 0;
  /// Memory that lives as long as the transport, zero-filled: staging slots
  /// and ops, which transfers in flight may still use after the executor
  /// that asked for them is gone.
  virtual uint8_t* allocate(size_t bytes) = 0;
  /// Before destruction; not collective. Waits, bounded (longer when
  /// `healthy`: the communicator did not fail), until the peers have taken
  /// in everything we put, then closes the connections.
  virtual void shutdown(bool healthy) = 0;
  /// The transport can move CUDA device memory itself (UCX built with CUDA
  /// support). Detected and logged; device buffers still go through host
  /// staging (executor/staged_executor.h) until the kernels use the proxy
  /// (executor/remote_proxy.h).
  virtual bool cudaMemory() const { return false; }
};

}  // namespace collie
