// A small TCP layer for the bootstrap: an fd-owning Socket, addresses, interface
// selection and deadline-bounded, abortable connect/accept/send/recv.
//
// Every blocking call polls in slices of at most kPollSliceMs, so an abort flag
// set by another thread is noticed promptly, and every call takes an absolute
// deadline so that a composite operation cannot overrun by summing timeouts.
// Sockets are non-blocking after creation; sends use MSG_NOSIGNAL, so a peer
// that goes away yields collieRemoteError and never SIGPIPE.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace collie {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

/// now + seconds; a non-positive or non-finite value (or one too large to represent) means no deadline.
Deadline deadlineAfter(double seconds);
/// Seconds left until `deadline` (0 when passed); very large for "no deadline".
double secondsLeft(Deadline deadline);

constexpr int kPollSliceMs = 100;

/// An IPv4 or IPv6 socket address.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  int family() const { return storage.ss_family; }
  int port() const;
  void setPort(int port);
  /// Numeric host ("10.0.0.1", "fd00::2").
  std::string host() const;
  /// "10.0.0.1:1234" or "[fd00::2]:1234".
  std::string toString() const;
  bool isWildcard() const;
  bool isLoopback() const;
};

/// Builds an address from a numeric IPv4/IPv6 host or, failing that, a host name (getaddrinfo, IPv4 preferred).
Status resolveAddress(const std::string& host, int port, SockAddr* out);

/// Splits "host:port" (COLLIE_ROOT, NCCL_COMM_ID) at its last ':'; "[v6]:port" loses its brackets.
/// False unless the host is non-empty and the port a number in 1..65535. Resolves nothing.
bool parseHostPort(const std::string& text, std::string* host, int* port);

/// Packs/unpacks an address into the 16 raw bytes + family (4 or 6) used on the wire.
void addressToRaw(const SockAddr& addr, uint8_t* family, uint8_t raw[16]);
Status addressFromRaw(uint8_t family, const uint8_t raw[16], int port, SockAddr* out);

/// Picks the address to listen on from an interface spec in COLLIE_SOCKET_IFNAME syntax:
/// comma-separated name prefixes, "^" in front to exclude them instead, "=" in front for exact names.
/// nullopt: the first non-loopback IPv4 interface that is up, else 127.0.0.1.
/// IPv4 addresses are preferred over IPv6 ones; IPv6 link-local addresses are skipped.
/// `ifname` (optional) receives the interface name.
Status findInterfaceAddress(const std::optional<std::string>& spec, SockAddr* out, std::string* ifname = nullptr);
/// findInterfaceAddress with COLLIE_SOCKET_IFNAME (read on every call, so a launcher may set it late).
Status defaultInterfaceAddress(SockAddr* out, std::string* ifname = nullptr);

/// Owns one file descriptor; closes it on destruction. Movable, not copyable.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership and returns the fd.
  int release();
  void close();

 private:
  int fd_ = -1;
};

/// Listens on addr (port 0 = any free port) with SO_REUSEADDR; `bound` receives the actual address.
Status listenOn(const SockAddr& addr, int backlog, Socket* out, SockAddr* bound);
/// As above for a host string: "" = defaultInterfaceAddress(), else resolveAddress(host, port).
Status listenOn(const std::string& host, int port, int backlog, Socket* out, SockAddr* bound);

/// Connects to addr, retrying with backoff while the peer refuses or is unreachable, until the deadline
/// (collieTimeout naming the address and the last error). `abort` may be null.
Status connectTo(const SockAddr& addr, Deadline deadline, const std::atomic<bool>* abort, Socket* out);

/// Accepts one connection on listener before the deadline; `peer` (optional) receives its address.
Status acceptOne(const Socket& listener, Deadline deadline, const std::atomic<bool>* abort, Socket* out,
                 SockAddr* peer = nullptr);

/// Sends/receives exactly `bytes`. `peer` names the other side in error sentences ("rank 3 (10.0.0.2:5000)").
/// Failures: collieTimeout (deadline), collieRemoteError (peer closed/reset, or aborted), collieSystemError.
Status sendAll(int fd, const void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abort,
               const std::string& peer);
Status recvAll(int fd, void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abort,
               const std::string& peer);

/// Sends sendBytes on sendFd while receiving recvBytes on recvFd, whichever can make progress, so that a
/// ring of ranks all doing this at once never deadlocks on full socket buffers.
Status sendRecv(int sendFd, const void* sendData, size_t sendBytes, const std::string& sendPeer, int recvFd,
                void* recvData, size_t recvBytes, const std::string& recvPeer, Deadline deadline,
                const std::atomic<bool>* abort);

/// Sets TCP_NODELAY (best effort: the bootstrap's messages are small and latency-bound).
void setNoDelay(const Socket& socket);

/// The local/remote address of a connected or listening socket.
Status localAddress(const Socket& socket, SockAddr* out);

// Big-endian encoding for the bootstrap's wire formats, so that hosts of any byte order interoperate.
inline void putBe16(std::vector<uint8_t>* v, uint16_t x) {
  v->push_back(static_cast<uint8_t>(x >> 8));
  v->push_back(static_cast<uint8_t>(x));
}
inline void putBe32(std::vector<uint8_t>* v, uint32_t x) {
  putBe16(v, static_cast<uint16_t>(x >> 16));
  putBe16(v, static_cast<uint16_t>(x));
}
inline void putBe64(std::vector<uint8_t>* v, uint64_t x) {
  putBe32(v, static_cast<uint32_t>(x >> 32));
  putBe32(v, static_cast<uint32_t>(x));
}
inline void putBytes(std::vector<uint8_t>* v, const void* p, size_t n) {
  if (n > 0) v->insert(v->end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
}
inline uint16_t getBe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t getBe32(const uint8_t* p) { return static_cast<uint32_t>(getBe16(p)) << 16 | getBe16(p + 2); }
inline uint64_t getBe64(const uint8_t* p) { return static_cast<uint64_t>(getBe32(p)) << 32 | getBe32(p + 4); }

}  // namespace collie
