// Bootstrap: the out-of-band TCP network every communicator is born on.
//
// collieGetUniqueId (or rank 0 of an environment init) starts a rendezvous root:
// a thread that listens on a TCP port and serves one rendezvous. The unique id
// carries the root's address and a 128-bit random secret. Each rank opens a
// listening socket of its own, connects to the root and sends a hello (secret,
// rank, nranks, its listen address and an opaque info block). When all nranks
// hellos are in, the root sends every rank the table of all addresses and info
// blocks and exits; when they are not in within the init timeout, it tells the
// ranks that came which ranks never did, and exits.
//
// The ranks then connect in a ring (rank r -> r+1), every connection starting
// with the secret, and the ring carries the out-of-band allgather, broadcast
// and barrier that later layers use to exchange transport addresses.
//
// Each rank keeps its listening socket open for the communicator's life. The
// ring needs every rank, so when some ranks leave (collieCommShrink) the others
// reach each other with messages of their own: sendTo connects to the peer's
// listener, and recvFrom accepts there. Such a connection starts with the
// secret, as a ring connection does.
//
// Every message is length-prefixed and bounded; a connection with a wrong
// secret, a short, oversized or malformed message is dropped and logged, and
// the root goes on serving. Every blocking operation has a deadline.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "collie.h"
#include "transport/bootstrap/socket.h"

namespace collie {

/// The 128-bit shared secret of one communicator.
struct Secret {
  uint8_t bytes[16];
};

/// Fills `secret` from the kernel's random source.
Status randomSecret(Secret* secret);

/// Parses 32 hex digits (COLLIE_SECRET); false when malformed.
bool parseSecretHex(const std::string& hex, Secret* secret);
std::string secretToHex(const Secret& secret);

/// The decoded content of a collieUniqueId.
struct UniqueIdInfo {
  std::string host;  // numeric address of the root, IPv4 or IPv6
  int port = 0;
  Secret secret{};
};

/// Encodes/decodes a unique id (magic + version + address + port + secret).
/// decode fails with collieInvalidArgument on a wrong magic/version or a malformed address.
void encodeUniqueId(const UniqueIdInfo& info, collieUniqueId* id);
Status decodeUniqueId(const collieUniqueId& id, UniqueIdInfo* info);

/// Starts a rendezvous root in a detached thread and returns its id.
///  bindHost: numeric address or host name to listen on; "" = the address of
///            COLLIE_SOCKET_IFNAME, else the first non-loopback IPv4 interface that is up, else 127.0.0.1.
///  port:     0 = any free port.
///  initTimeoutSec: how long the root waits, counted from the first hello, for the rest.
/// The root thread waits for its first hello without a bound (an id may be made
/// long before it is used) and exits after serving one rendezvous.
Status startRendezvousRoot(const std::string& bindHost, int port, const Secret& secret, double initTimeoutSec,
                           collieUniqueId* id);

/// Root threads of this process not yet finished: each exits on its own after
/// its rendezvous (when the ranks' init has returned, or after its timeout)
/// and holds its sockets until then. For tests that count descriptors.
int liveRendezvousRoots();

class Bootstrap {
 public:
  /// Joins the rendezvous named by `id` as `rank` of `nranks`, sharing `info`
  /// (infoBytes, the same size on every rank). Retries the connection to the
  /// root until the deadline, because in an environment init rank 0 may start
  /// its root a little after the others try to connect. Fails with
  /// collieTimeout naming the missing ranks when the root reports them, or
  /// naming the root when it never answers within timeoutSec.
  static Status create(const collieUniqueId& id, int rank, int nranks, const void* info, size_t infoBytes,
                       double timeoutSec, std::unique_ptr<Bootstrap>* out);

  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  /// The info block rank r passed to create (infoBytes bytes).
  const void* info(int r) const { return infos_.data() + static_cast<size_t>(r) * infoBytes_; }
  const Secret& secret() const { return secret_; }

  /// data holds nranks blocks of bytesPerRank; block `rank` is ours, the others are filled in.
  Status allGather(void* data, size_t bytesPerRank);
  /// root's `bytes` at data are copied to every rank's data.
  Status broadcast(void* data, size_t bytes, int root);
  Status barrier();

  /// Sends `bytes` at `data` to rank `to` over a connection of its own (to's listener), tagged with `tag`;
  /// retries while `to` refuses, until timeoutSec. For ranks that cannot use the ring (collieCommShrink).
  Status sendTo(int to, uint32_t tag, const void* data, size_t bytes, double timeoutSec);
  /// Waits on our listener for rank `from`'s sendTo with `tag` and exactly `bytes`. A connection that does not
  /// present the secret as `from` is dropped and logged, and the wait goes on; a mismatched tag or size fails.
  Status recvFrom(int from, uint32_t tag, void* data, size_t bytes, double timeoutSec);

  /// Makes every pending and future operation fail promptly (with collieRemoteError/InvalidUsage).
  void abort() { aborted_.store(true); }

  /// Deadline applied to every operation after init (seconds).
  void setTimeout(double seconds) { timeoutSec_ = seconds; }

 private:
  Bootstrap() = default;

  /// "rank 3 (10.0.0.2:41234)", for error sentences.
  std::string peerName(int r) const;
  /// Fails when the bootstrap was aborted; `what` names the operation.
  Status checkUsable(const char* what) const;
  /// Accepts connections on `listener` until one presents the secret as rank `from` connecting to us, dropping
  /// (and logging) the others; collieTimeout at the deadline, as acceptOne gives it. `what` names the wait.
  Status acceptFrom(const Socket& listener, int from, Deadline deadline, const char* what, Socket* out);
  /// The ring allgather behind allGather and barrier; `op` tags its messages so that ranks calling
  /// different operations are told so instead of exchanging mismatched bytes.
  Status ringAllGather(void* data, size_t bytesPerRank, uint32_t op, const char* what);

  int rank_ = 0;
  int nranks_ = 1;
  size_t infoBytes_ = 0;
  std::vector<uint8_t> infos_;
  Secret secret_{};
  int nextFd_ = -1;  // connection to rank+1
  int prevFd_ = -1;  // connection from rank-1
  Socket listener_;  // our listener, kept for recvFrom (none for one rank)
  // Every rank's listen address, for the ring's set-up, sendTo and error sentences (none for one rank).
  std::vector<SockAddr> peerAddrs_;
  double timeoutSec_ = 300;
  std::atomic<bool> aborted_{false};

  friend class BootstrapBuilder;  // implementation detail of create()
};

}  // namespace collie
