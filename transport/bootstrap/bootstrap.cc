// Bootstrap::create (hello to the rendezvous root, then the ring) and the ring's allgather,
// broadcast and barrier. The root itself is in bootstrap_root.cc, the wire format in wire.h.
#include "transport/bootstrap/bootstrap.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "transport/bootstrap/socket.h"
#include "transport/bootstrap/wire.h"

namespace collie {

namespace {

constexpr double kRootReplyMarginSec = 2;  // a rank waits this much longer than the root's own timeout
constexpr double kRingAuthTimeoutSec = 5;  // per accepted ring connection, so a silent stranger cannot stall us

}  // namespace

// ---------------------------------------------------------------- Bootstrap::create

// Holds the steps of create() so that they can reach Bootstrap's private members.
class BootstrapBuilder {
 public:
  static Status create(const collieUniqueId& id, int rank, int nranks, const void* info, size_t infoBytes,
                       double timeoutSec, std::unique_ptr<Bootstrap>* out);

 private:
  // Hello to the root, then the table: fills b's infos_ and peerAddrs_ (every listen address).
  static Status rendezvous(Bootstrap* b, const UniqueIdInfo& root, const Socket& listener, const SockAddr& listenAddr,
                           const void* info, double timeoutSec);
  static Status buildRing(Bootstrap* b, const Socket& listener, double timeoutSec);
};

Status BootstrapBuilder::rendezvous(Bootstrap* b, const UniqueIdInfo& rootInfo, const Socket& listener,
                                    const SockAddr& listenAddr, const void* info, double timeoutSec) {
  SockAddr rootAddr;
  COLLIE_RETURN_IF_ERROR(resolveAddress(rootInfo.host, rootInfo.port, &rootAddr));
  const std::string root = "the rendezvous root at " + rootAddr.toString();
  const Deadline deadline = deadlineAfter(timeoutSec);

  const Clock::time_point start = Clock::now();
  Socket sock;
  COLLIE_RETURN_IF_ERROR(connectTo(rootAddr, deadline, nullptr, &sock).withContext("cannot reach the rendezvous root"));

  uint8_t family = 0, raw[16] = {0};
  if (listener.valid()) addressToRaw(listenAddr, &family, raw);
  const std::vector<uint8_t> hello =
      wire::helloPayload(b->secret_, b->rank_, b->nranks_, b->infoBytes_, family,
                         static_cast<uint16_t>(listener.valid() ? listenAddr.port() : 0), raw, info);
  std::vector<uint8_t> msg = wire::frame(wire::kHelloMagic, wire::kTypeHello, hello);
  COLLIE_RETURN_IF_ERROR(
      sendAll(sock.fd(), msg.data(), msg.size(), deadline, nullptr, root).withContext("sending the hello"));

  // The root's clock starts at the first hello, possibly before ours: allow a margin past our own deadline.
  const Deadline replyDeadline = deadlineAfter(secondsLeft(deadline) + kRootReplyMarginSec);
  uint8_t header[wire::kFrameHeaderBytes];
  Status st = recvAll(sock.fd(), header, sizeof(header), replyDeadline, nullptr, root);
  if (st.code() == collieTimeout) {
    return Status::error(collieTimeout, "%s did not answer within %.1f s (no table and no error from it)", root.c_str(),
                         std::chrono::duration<double>(Clock::now() - start).count());
  }
  if (st.code() == collieRemoteError) {
    return Status::error(collieRemoteError,
                         "%s closed the connection without answering (a wrong secret, or a root that already "
                         "served its rendezvous?)",
                         root.c_str());
  }
  COLLIE_RETURN_IF_ERROR(st);
  uint32_t type = 0;
  size_t len = 0;
  COLLIE_RETURN_IF_ERROR(wire::parseReplyHeader(header, b->nranks_, b->infoBytes_, root, &type, &len));
  std::vector<uint8_t> payload(len);
  COLLIE_RETURN_IF_ERROR(
      recvAll(sock.fd(), payload.data(), len, replyDeadline, nullptr, root).withContext("receiving the address table"));
  if (type == wire::kTypeError) return wire::parseErrorReply(payload.data(), len, root);
  wire::Table table;
  COLLIE_RETURN_IF_ERROR(wire::parseTable(payload.data(), len, b->nranks_, b->infoBytes_, root, &table));
  b->infos_ = std::move(table.infos);
  b->peerAddrs_ = std::move(table.peers);
  return Status();
}

Status BootstrapBuilder::buildRing(Bootstrap* b, const Socket& listener, double timeoutSec) {
  const int n = b->nranks_;
  const int next = (b->rank_ + 1) % n;
  const int prev = (b->rank_ + n - 1) % n;
  // Every rank has the table by now, so a fresh deadline: the rendezvous may have used up most of the first.
  const Deadline deadline = deadlineAfter(timeoutSec);

  // Connect first: the connection completes in next's backlog and the small hello fits in the socket
  // buffer, so this does not wait for next to accept, and every rank can then go on to accept.
  Socket nextSock;
  COLLIE_RETURN_IF_ERROR(connectTo(b->peerAddrs_[next], deadline, &b->aborted_, &nextSock)
                             .withContext("cannot connect to " + b->peerName(next) + ", next in the ring"));
  std::vector<uint8_t> auth = wire::ringAuth(b->secret_, b->rank_, next, n);
  COLLIE_RETURN_IF_ERROR(sendAll(nextSock.fd(), auth.data(), auth.size(), deadline, &b->aborted_, b->peerName(next))
                             .withContext("ring setup"));

  Socket prevSock;
  const Status st = b->acceptFrom(listener, prev, deadline, "ring setup", &prevSock);
  if (st.code() == collieTimeout)
    return Status::error(collieTimeout, "%s, previous in the ring, did not connect within %.1f s",
                         b->peerName(prev).c_str(), timeoutSec);
  COLLIE_RETURN_IF_ERROR(st);
  b->nextFd_ = nextSock.release();
  b->prevFd_ = prevSock.release();
  return Status();
}

Status BootstrapBuilder::create(const collieUniqueId& id, int rank, int nranks, const void* info, size_t infoBytes,
                                double timeoutSec, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return Status::error(collieInvalidArgument, "bootstrap: out is NULL");
  if (nranks < 1 || nranks > wire::kMaxRanks) {
    return Status::error(collieInvalidArgument, "bootstrap: nranks %d is not in 1..%d", nranks, wire::kMaxRanks);
  }
  if (rank < 0 || rank >= nranks) {
    return Status::error(collieInvalidArgument, "bootstrap: rank %d is not in 0..%d", rank, nranks - 1);
  }
  if (infoBytes > wire::kMaxInfoBytes || (infoBytes > 0 && info == nullptr)) {
    return Status::error(collieInvalidArgument, "bootstrap: the info block (%zu bytes at %p) is NULL or over %zu bytes",
                         infoBytes, info, wire::kMaxInfoBytes);
  }
  if (static_cast<uint64_t>(nranks) * (wire::kAddrEntryBytes + infoBytes) + 8 > wire::kMaxTableBytes) {
    return Status::error(collieInvalidArgument, "bootstrap: %d ranks with %zu-byte info blocks exceed the table limit",
                         nranks, infoBytes);
  }
  ScopedLogRank logRank(rank);
  UniqueIdInfo rootInfo;
  COLLIE_RETURN_IF_ERROR(decodeUniqueId(id, &rootInfo));

  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->infoBytes_ = infoBytes;
  b->secret_ = rootInfo.secret;

  // Our own listener, on the interface peers on other hosts can reach; none is needed for one rank.
  Socket listener;
  SockAddr listenAddr;
  if (nranks > 1) {
    SockAddr iface;
    COLLIE_RETURN_IF_ERROR(defaultInterfaceAddress(&iface).withContext("bootstrap"));
    COLLIE_RETURN_IF_ERROR(listenOn(iface, 64, &listener, &listenAddr).withContext("bootstrap"));
  }
  COLLIE_RETURN_IF_ERROR(rendezvous(b.get(), rootInfo, listener, listenAddr, info, timeoutSec));
  if (nranks > 1) COLLIE_RETURN_IF_ERROR(buildRing(b.get(), listener, timeoutSec));
  b->listener_ = std::move(listener);  // for recvFrom, until the communicator is destroyed
  COLLIE_INFO("bootstrap: rank %d of %d is connected", rank, nranks);
  *out = std::move(b);
  return Status();
}

Status Bootstrap::create(const collieUniqueId& id, int rank, int nranks, const void* info, size_t infoBytes,
                         double timeoutSec, std::unique_ptr<Bootstrap>* out) {
  return BootstrapBuilder::create(id, rank, nranks, info, infoBytes, timeoutSec, out);
}

// ---------------------------------------------------------------- Bootstrap operations

Bootstrap::~Bootstrap() {
  // Adopted by Sockets only to be closed by them.
  Socket next(nextFd_);
  Socket prev(prevFd_);
}

std::string Bootstrap::peerName(int r) const {
  if (r >= 0 && r < static_cast<int>(peerAddrs_.size()))
    return "rank " + std::to_string(r) + " (" + peerAddrs_[r].toString() + ")";
  return "rank " + std::to_string(r);
}

Status Bootstrap::checkUsable(const char* what) const {
  if (aborted_.load()) return Status::error(collieInvalidUsage, "bootstrap %s: the bootstrap was aborted", what);
  return Status();
}

Status Bootstrap::ringAllGather(void* data, size_t bytesPerRank, uint32_t op, const char* what) {
  COLLIE_RETURN_IF_ERROR(checkUsable(what));
  if (data == nullptr && bytesPerRank > 0) {
    return Status::error(collieInvalidArgument, "bootstrap %s: data is NULL", what);
  }
  if (nranks_ == 1) return Status();
  if (bytesPerRank > SIZE_MAX / static_cast<size_t>(nranks_)) {
    return Status::error(collieInvalidArgument, "bootstrap %s: %zu bytes per rank overflow", what, bytesPerRank);
  }
  const int n = nranks_;
  const int next = (rank_ + 1) % n;
  const int prev = (rank_ + n - 1) % n;
  const std::string nextName = peerName(next);
  const std::string prevName = peerName(prev);
  const Deadline deadline = deadlineAfter(timeoutSec_);
  uint8_t* base = static_cast<uint8_t*>(data);
  for (int s = 0; s < n - 1; ++s) {
    // Each step forwards the block received in the previous one, so after n-1 steps all have arrived.
    const int sendBlock = (rank_ - s + n) % n;
    const int recvBlock = (rank_ - s - 1 + 2 * n) % n;
    uint8_t mine[wire::kRingHeaderBytes], theirs[wire::kRingHeaderBytes];
    wire::ringHeader(mine, op, static_cast<uint32_t>(s), bytesPerRank);
    Status st =
        sendRecv(nextFd_, mine, sizeof(mine), nextName, prevFd_, theirs, sizeof(theirs), prevName, deadline, &aborted_);
    if (st.ok()) st = wire::checkRingHeader(theirs, op, static_cast<uint32_t>(s), bytesPerRank, prevName);
    if (st.ok()) {
      st = sendRecv(nextFd_, base + static_cast<size_t>(sendBlock) * bytesPerRank, bytesPerRank, nextName, prevFd_,
                    base + static_cast<size_t>(recvBlock) * bytesPerRank, bytesPerRank, prevName, deadline, &aborted_);
    }
    if (!st.ok()) return st.withContext(std::string("bootstrap ") + what + " on rank " + std::to_string(rank_));
  }
  return Status();
}

Status Bootstrap::allGather(void* data, size_t bytesPerRank) {
  return ringAllGather(data, bytesPerRank, wire::kOpAllGather, "allGather");
}

Status Bootstrap::barrier() {
  std::vector<uint8_t> bytes(static_cast<size_t>(nranks_), 0);
  return ringAllGather(bytes.data(), 1, wire::kOpBarrier, "barrier");
}

Status Bootstrap::broadcast(void* data, size_t bytes, int root) {
  COLLIE_RETURN_IF_ERROR(checkUsable("broadcast"));
  if (root < 0 || root >= nranks_) {
    return Status::error(collieInvalidArgument, "bootstrap broadcast: root %d is not in 0..%d", root, nranks_ - 1);
  }
  if (data == nullptr && bytes > 0) return Status::error(collieInvalidArgument, "bootstrap broadcast: data is NULL");
  if (nranks_ == 1) return Status();
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  const Deadline deadline = deadlineAfter(timeoutSec_);
  const std::string context =
      "bootstrap broadcast from root " + std::to_string(root) + " on rank " + std::to_string(rank_);
  uint8_t header[wire::kRingHeaderBytes];
  // The message travels root -> root+1 -> ... and stops before it would return to root.
  if (rank_ != root) {
    const std::string prevName = peerName(prev);
    Status st = recvAll(prevFd_, header, sizeof(header), deadline, &aborted_, prevName);
    if (st.ok()) st = wire::checkRingHeader(header, wire::kOpBroadcast, static_cast<uint32_t>(root), bytes, prevName);
    if (st.ok()) st = recvAll(prevFd_, data, bytes, deadline, &aborted_, prevName);
    if (!st.ok()) return st.withContext(context);
  }
  if (next != root) {
    const std::string nextName = peerName(next);
    wire::ringHeader(header, wire::kOpBroadcast, static_cast<uint32_t>(root), bytes);
    Status st = sendAll(nextFd_, header, sizeof(header), deadline, &aborted_, nextName);
    if (st.ok()) st = sendAll(nextFd_, data, bytes, deadline, &aborted_, nextName);
    if (!st.ok()) return st.withContext(context);
  }
  return Status();
}

// ---------------------------------------------------------------- direct messages

Status Bootstrap::acceptFrom(const Socket& listener, int from, Deadline deadline, const char* what, Socket* out) {
  for (;;) {
    Socket conn;
    SockAddr peer;
    Status st = acceptOne(listener, deadline, &aborted_, &conn, &peer);
    if (st.code() == collieTimeout) return st;
    COLLIE_RETURN_IF_ERROR(st.withContext(what));
    uint8_t got[wire::kRingAuthBytes];
    const Deadline authDeadline = std::min(deadline, deadlineAfter(kRingAuthTimeoutSec));
    st = recvAll(conn.fd(), got, sizeof(got), authDeadline, &aborted_, peer.toString());
    if (st.ok()) st = wire::checkRingAuth(got, secret_, from, rank_, nranks_);
    if (st.ok()) {
      *out = std::move(conn);
      return Status();
    }
    if (aborted_.load()) return Status::error(collieRemoteError, "%s was aborted", what);
    COLLIE_WARN("bootstrap rank %d: dropped a connection from %s during %s: %s", rank_, peer.toString().c_str(), what,
                st.message().c_str());
  }
}

Status Bootstrap::sendTo(int to, uint32_t tag, const void* data, size_t bytes, double timeoutSec) {
  COLLIE_RETURN_IF_ERROR(checkUsable("sendTo"));
  if (to < 0 || to >= nranks_ || to == rank_ || to >= static_cast<int>(peerAddrs_.size()))
    return Status::error(collieInvalidArgument, "bootstrap sendTo: rank %d is not a peer of rank %d of %d", to, rank_,
                         nranks_);
  if (data == nullptr && bytes > 0) return Status::error(collieInvalidArgument, "bootstrap sendTo: data is NULL");
  const std::string name = peerName(to);
  const std::string context = "bootstrap message to " + name;
  const Deadline deadline = deadlineAfter(timeoutSec);
  Socket sock;
  COLLIE_RETURN_IF_ERROR(connectTo(peerAddrs_[to], deadline, &aborted_, &sock).withContext(context));
  const std::vector<uint8_t> auth = wire::ringAuth(secret_, rank_, to, nranks_);
  uint8_t header[wire::kRingHeaderBytes];
  wire::ringHeader(header, wire::kOpDirect, tag, bytes);
  Status st = sendAll(sock.fd(), auth.data(), auth.size(), deadline, &aborted_, name);
  if (st.ok()) st = sendAll(sock.fd(), header, sizeof(header), deadline, &aborted_, name);
  if (st.ok()) st = sendAll(sock.fd(), data, bytes, deadline, &aborted_, name);
  return st.withContext(context);
}

Status Bootstrap::recvFrom(int from, uint32_t tag, void* data, size_t bytes, double timeoutSec) {
  COLLIE_RETURN_IF_ERROR(checkUsable("recvFrom"));
  if (from < 0 || from >= nranks_ || from == rank_ || !listener_.valid())
    return Status::error(collieInvalidArgument, "bootstrap recvFrom: rank %d is not a peer of rank %d of %d", from,
                         rank_, nranks_);
  if (data == nullptr && bytes > 0) return Status::error(collieInvalidArgument, "bootstrap recvFrom: data is NULL");
  const std::string name = peerName(from);
  const Deadline deadline = deadlineAfter(timeoutSec);
  const std::string context = "bootstrap message from " + name;
  Socket conn;
  Status st = acceptFrom(listener_, from, deadline, context.c_str(), &conn);
  if (st.code() == collieTimeout)
    return Status::error(collieTimeout, "bootstrap: %s sent nothing within %.1f s", name.c_str(), timeoutSec);
  COLLIE_RETURN_IF_ERROR(st);
  uint8_t header[wire::kRingHeaderBytes];
  st = recvAll(conn.fd(), header, sizeof(header), deadline, &aborted_, name);
  if (st.ok()) st = wire::checkRingHeader(header, wire::kOpDirect, tag, bytes, name);
  if (st.ok()) st = recvAll(conn.fd(), data, bytes, deadline, &aborted_, name);
  return st.withContext(context);
}

}  // namespace collie
