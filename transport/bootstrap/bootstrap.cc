// The bootstrap network: the rendezvous root thread, Bootstrap::create (hello to
// the root, then the ring), and the ring's allgather, broadcast and barrier.
//
// Wire formats (all integers big-endian):
//   root protocol frame: u32 magic, u32 type, u32 payload length, payload
//     hello  (rank -> root): secret[16] u32 rank u32 nranks u32 infoBytes u16 family u16 port addr[16] info
//     table  (root -> rank): u32 nranks u32 infoBytes, per rank: u16 family u16 port addr[16] info
//     error  (root -> rank): u32 result code, text
//   ring authentication (rank -> next): u32 magic secret[16] u32 from u32 to u32 nranks
//   ring message: u32 magic u32 op u32 aux u32 reserved u64 length, payload
// Every length is checked against a bound before anything is allocated for it.
#include "transport/bootstrap/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "core/log.h"
#include "transport/bootstrap/socket.h"

namespace collie {

namespace {

constexpr uint32_t kHelloMagic = 0x434c4248;     // "CLBH"
constexpr uint32_t kReplyMagic = 0x434c4252;     // "CLBR"
constexpr uint32_t kRingAuthMagic = 0x434c4241;  // "CLBA"
constexpr uint32_t kRingMsgMagic = 0x434c424d;   // "CLBM"
constexpr uint32_t kTypeHello = 1, kTypeTable = 2, kTypeError = 3;
constexpr uint32_t kOpAllGather = 1, kOpBroadcast = 2, kOpBarrier = 3;

constexpr size_t kFrameHeaderBytes = 12;
constexpr size_t kHelloFixedBytes = 16 + 4 + 4 + 4 + 2 + 2 + 16;
constexpr size_t kAddrEntryBytes = 2 + 2 + 16;
constexpr size_t kRingAuthBytes = 4 + 16 + 4 + 4 + 4;
constexpr size_t kRingHeaderBytes = 24;
constexpr size_t kMaxInfoBytes = 64 * 1024;
constexpr size_t kMaxTableBytes = size_t{1} << 30;
constexpr int kMaxRanks = 1 << 20;
constexpr size_t kMaxErrorText = 4096;
constexpr size_t kMaxPending = 256;        // unauthenticated connections the root holds at once
constexpr double kHelloTimeoutSec = 10;    // a connection must deliver its whole hello within this
constexpr double kReplySendSec = 30;       // bound on the root's sending of the table or the error
constexpr double kRootReplyMarginSec = 2;  // a rank waits this much longer than the root's own timeout
constexpr double kRingAuthTimeoutSec = 5;  // per accepted ring connection, so a silent stranger cannot stall us

// Compares without an early exit, so timing does not reveal how much of a guessed secret was right.
bool secretEquals(const uint8_t* a, const uint8_t* b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < sizeof(Secret::bytes); ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

std::vector<uint8_t> frame(uint32_t magic, uint32_t type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  out.reserve(kFrameHeaderBytes + payload.size());
  putBe32(&out, magic);
  putBe32(&out, type);
  putBe32(&out, static_cast<uint32_t>(payload.size()));
  putBytes(&out, payload.data(), payload.size());
  return out;
}

std::vector<uint8_t> errorFrame(collieResult_t code, const std::string& text) {
  std::vector<uint8_t> payload;
  putBe32(&payload, static_cast<uint32_t>(code));
  putBytes(&payload, text.data(), std::min(text.size(), kMaxErrorText));
  return frame(kReplyMagic, kTypeError, payload);
}

const char* opName(uint32_t op) {
  static const char* const kNames[] = {"an unknown operation", "allGather", "broadcast", "barrier"};
  return op <= kOpBarrier ? kNames[op] : kNames[0];
}

// ---------------------------------------------------------------- rendezvous root

// Serves one rendezvous from a single thread: a poll loop over the listener, the
// connections still delivering their hello, and the ranks that have joined, so
// that no connection, however slow or hostile, can hold up the others.
class RendezvousRoot {
 public:
  RendezvousRoot(Socket listener, std::string addr, const Secret& secret, double initTimeoutSec)
      : listener_(std::move(listener)), addr_(std::move(addr)), secret_(secret), initTimeoutSec_(initTimeoutSec) {}

  void run();

 private:
  struct Pending {
    Socket sock;
    std::string peer;
    std::vector<uint8_t> buf;  // bytes of the hello so far
    size_t need = kFrameHeaderBytes;
    Clock::time_point since;
  };
  struct Member {
    Socket sock;
    std::string peer;
    uint8_t listenRaw[kAddrEntryBytes] = {0};  // family, port, address as they go into the table
    std::vector<uint8_t> info;
  };

  void acceptNew();
  // Reads what is available of a pending hello; false when the connection is finished (dropped or joined).
  bool readPending(Pending* p);
  void processHello(Pending* p);
  void drop(const std::string& peer, const std::string& reason);
  void reject(Socket* sock, const std::string& peer, collieResult_t code, const std::string& reason);
  void watchMember(int rank);
  void sendToMembers(const std::vector<uint8_t>& bytes, const char* what);
  void finishWithTable();
  void finishWithTimeout();

  Socket listener_;
  std::string addr_;
  Secret secret_;
  double initTimeoutSec_;
  std::vector<Pending> pending_;
  bool started_ = false;  // the first valid hello arrived; nranks_ and infoBytes_ are fixed
  int nranks_ = 0;
  uint32_t infoBytes_ = 0;
  Deadline deadline_ = Deadline::max();
  std::vector<Member> members_;  // by rank; sock invalid = not (or no longer) joined
  int joined_ = 0;
  bool acceptFailureLogged_ = false;
};

void RendezvousRoot::drop(const std::string& peer, const std::string& reason) {
  COLLIE_WARN("rendezvous root %s: dropped the connection from %s: %s", addr_.c_str(), peer.c_str(), reason.c_str());
}

void RendezvousRoot::reject(Socket* sock, const std::string& peer, collieResult_t code, const std::string& reason) {
  drop(peer, reason);
  // The peer proved it knows the secret, so it is a real rank with a wrong argument: tell it why.
  std::vector<uint8_t> msg = errorFrame(code, "this rank was refused: " + reason);
  (void)sendAll(sock->fd(), msg.data(), msg.size(), deadlineAfter(1.0), nullptr, peer);
  sock->close();
}

void RendezvousRoot::acceptNew() {
  // Take everything the backlog holds; the listener is non-blocking.
  for (;;) {
    SockAddr peer;
    peer.len = sizeof(peer.storage);
    int fd =
        accept4(listener_.fd(), reinterpret_cast<sockaddr*>(&peer.storage), &peer.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR || err == ECONNABORTED || err == EPROTO) return;
      // Out of fds or memory: keep serving what we have; the connection waits in the backlog.
      if (!acceptFailureLogged_) {
        COLLIE_WARN("rendezvous root %s: accept failed: %s; still serving", addr_.c_str(), strerror(err));
        acceptFailureLogged_ = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return;
    }
    if (pending_.size() >= kMaxPending) {
      drop(pending_.front().peer, "too many connections are still sending their hello; dropping the oldest");
      pending_.erase(pending_.begin());
    }
    Pending p;
    p.sock = Socket(fd);
    p.peer = peer.toString();
    p.since = Clock::now();
    pending_.push_back(std::move(p));
  }
}

bool RendezvousRoot::readPending(Pending* p) {
  size_t have = p->buf.size();
  p->buf.resize(p->need);
  ssize_t k = recv(p->sock.fd(), p->buf.data() + have, p->need - have, MSG_DONTWAIT);
  if (k < 0) {
    p->buf.resize(have);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return true;
    drop(p->peer, std::string("receive failed: ") + strerror(errno));
    return false;
  }
  if (k == 0) {
    p->buf.resize(have);
    drop(p->peer, "it closed the connection after " + std::to_string(have) + " bytes, before a whole hello");
    return false;
  }
  p->buf.resize(have + static_cast<size_t>(k));
  if (p->buf.size() < p->need) return true;
  if (p->need == kFrameHeaderBytes) {
    uint32_t magic = getBe32(p->buf.data());
    uint32_t type = getBe32(p->buf.data() + 4);
    uint32_t len = getBe32(p->buf.data() + 8);
    if (magic != kHelloMagic || type != kTypeHello) {
      char hex[64];
      snprintf(hex, sizeof(hex), "%02x %02x %02x %02x", p->buf[0], p->buf[1], p->buf[2], p->buf[3]);
      drop(p->peer, std::string("it is not speaking the Collie bootstrap protocol (first bytes ") + hex + ")");
      return false;
    }
    if (len < kHelloFixedBytes || len > kHelloFixedBytes + kMaxInfoBytes) {
      drop(p->peer, "it announced a " + std::to_string(len) + "-byte hello; a hello has " +
                        std::to_string(kHelloFixedBytes) + " to " + std::to_string(kHelloFixedBytes + kMaxInfoBytes) +
                        " bytes");
      return false;
    }
    p->need = kFrameHeaderBytes + len;
    return true;
  }
  processHello(p);
  return false;
}

void RendezvousRoot::processHello(Pending* p) {
  const uint8_t* h = p->buf.data() + kFrameHeaderBytes;
  const size_t len = p->buf.size() - kFrameHeaderBytes;
  if (!secretEquals(h, secret_.bytes)) {
    drop(p->peer, "wrong secret (a rank of another communicator, or a stranger)");
    return;
  }
  const uint32_t rank = getBe32(h + 16);
  const uint32_t nranks = getBe32(h + 20);
  const uint32_t infoBytes = getBe32(h + 24);
  const uint8_t* listenRaw = h + 28;
  char why[256];
  if (nranks < 1 || nranks > static_cast<uint32_t>(kMaxRanks)) {
    snprintf(why, sizeof(why), "nranks %u is not in 1..%d", nranks, kMaxRanks);
    return reject(&p->sock, p->peer, collieInvalidArgument, why);
  }
  if (rank >= nranks) {
    snprintf(why, sizeof(why), "rank %u is not in 0..%u", rank, nranks - 1);
    return reject(&p->sock, p->peer, collieInvalidArgument, why);
  }
  if (infoBytes > kMaxInfoBytes || len != kHelloFixedBytes + infoBytes) {
    snprintf(why, sizeof(why), "the hello of rank %u is %zu bytes but announces a %u-byte info block", rank, len,
             infoBytes);
    return reject(&p->sock, p->peer, collieInvalidArgument, why);
  }
  if (static_cast<uint64_t>(nranks) * (kAddrEntryBytes + infoBytes) + 8 > kMaxTableBytes) {
    snprintf(why, sizeof(why), "%u ranks with %u-byte info blocks exceed the %zu-byte table limit", nranks, infoBytes,
             kMaxTableBytes);
    return reject(&p->sock, p->peer, collieInvalidArgument, why);
  }
  const uint16_t family = getBe16(listenRaw);
  const uint16_t port = getBe16(listenRaw + 2);
  if (nranks > 1 && ((family != 4 && family != 6) || port == 0)) {
    snprintf(why, sizeof(why), "rank %u announced an unusable listen address (family %u, port %u)", rank, family, port);
    return reject(&p->sock, p->peer, collieInvalidArgument, why);
  }
  if (started_ && static_cast<int>(nranks) != nranks_) {
    snprintf(why, sizeof(why), "rank %u says there are %u ranks, but the first rank to arrive said %d", rank, nranks,
             nranks_);
    return reject(&p->sock, p->peer, collieInvalidUsage, why);
  }
  if (started_ && infoBytes != infoBytes_) {
    snprintf(why, sizeof(why), "rank %u shares a %u-byte info block, but the first rank to arrive shared %u bytes",
             rank, infoBytes, infoBytes_);
    return reject(&p->sock, p->peer, collieInvalidUsage, why);
  }
  if (started_ && members_[rank].sock.valid()) {
    snprintf(why, sizeof(why), "rank %u has already joined from %s", rank, members_[rank].peer.c_str());
    return reject(&p->sock, p->peer, collieInvalidUsage, why);
  }
  if (!started_) {
    started_ = true;
    nranks_ = static_cast<int>(nranks);
    infoBytes_ = infoBytes;
    members_.resize(nranks);
    deadline_ = deadlineAfter(initTimeoutSec_);
  }
  Member& m = members_[rank];
  m.sock = std::move(p->sock);
  m.peer = p->peer;
  memcpy(m.listenRaw, listenRaw, kAddrEntryBytes);
  m.info.assign(h + kHelloFixedBytes, h + kHelloFixedBytes + infoBytes);
  ++joined_;
  COLLIE_INFO("rendezvous root %s: rank %u of %d joined from %s (%d of %d in)", addr_.c_str(), rank, nranks_,
              m.peer.c_str(), joined_, nranks_);
}

void RendezvousRoot::watchMember(int rank) {
  // A joined rank sends nothing more; readability means it went away (or broke the protocol), and its
  // slot is freed so that a restarted rank may take it.
  Member& m = members_[rank];
  char byte;
  ssize_t k = recv(m.sock.fd(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  drop(m.peer, "rank " + std::to_string(rank) +
                   (k > 0 ? " sent bytes after its hello" : " closed its connection before all ranks joined"));
  m.sock.close();
  --joined_;
}

void RendezvousRoot::sendToMembers(const std::vector<uint8_t>& bytes, const char* what) {
  // Sends to all ranks at once, so one rank that does not read cannot delay the others.
  struct Out {
    int rank;
    size_t off;
  };
  std::vector<Out> outs;
  for (int r = 0; r < nranks_; ++r)
    if (members_[r].sock.valid()) outs.push_back({r, 0});
  const Deadline deadline = deadlineAfter(kReplySendSec);
  while (!outs.empty()) {
    std::vector<pollfd> fds;
    for (const Out& o : outs) fds.push_back(pollfd{members_[o.rank].sock.fd(), POLLOUT, 0});
    int rc = poll(fds.data(), fds.size(), kPollSliceMs);
    if (rc < 0 && errno != EINTR) {
      COLLIE_WARN("rendezvous root %s: poll failed while sending the %s: %s", addr_.c_str(), what, strerror(errno));
      return;
    }
    std::vector<Out> left;
    for (size_t i = 0; i < outs.size(); ++i) {
      Out o = outs[i];
      Member& m = members_[o.rank];
      if (rc > 0 && fds[i].revents != 0) {
        ssize_t k = send(m.sock.fd(), bytes.data() + o.off, bytes.size() - o.off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
          o.off += static_cast<size_t>(k);
        } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          COLLIE_WARN("rendezvous root %s: could not send the %s to rank %d (%s): %s", addr_.c_str(), what, o.rank,
                      m.peer.c_str(), strerror(errno));
          continue;
        }
      }
      if (o.off < bytes.size()) {
        if (Clock::now() >= deadline) {
          COLLIE_WARN("rendezvous root %s: rank %d (%s) did not take the %s within %.0f s", addr_.c_str(), o.rank,
                      m.peer.c_str(), what, kReplySendSec);
          continue;
        }
        left.push_back(o);
      }
    }
    outs.swap(left);
  }
}

void RendezvousRoot::finishWithTable() {
  std::vector<uint8_t> payload;
  payload.reserve(8 + static_cast<size_t>(nranks_) * (kAddrEntryBytes + infoBytes_));
  putBe32(&payload, static_cast<uint32_t>(nranks_));
  putBe32(&payload, infoBytes_);
  for (const Member& m : members_) {
    putBytes(&payload, m.listenRaw, kAddrEntryBytes);
    putBytes(&payload, m.info.data(), m.info.size());
  }
  sendToMembers(frame(kReplyMagic, kTypeTable, payload), "address table");
  COLLIE_INFO("rendezvous root %s: all %d ranks joined; served", addr_.c_str(), nranks_);
}

void RendezvousRoot::finishWithTimeout() {
  std::vector<int> missing;
  for (int r = 0; r < nranks_; ++r)
    if (!members_[r].sock.valid()) missing.push_back(r);
  std::string list;
  const size_t kListed = 32;  // a sentence, not a dump, when thousands are missing
  for (size_t i = 0; i < missing.size() && i < kListed; ++i) list += (i ? ", " : "") + std::to_string(missing[i]);
  if (missing.size() > kListed) list += ", ... (" + std::to_string(missing.size()) + " in all)";
  char text[kMaxErrorText];
  snprintf(text, sizeof(text), "%s %s of %d never joined within %.1f s", missing.size() == 1 ? "rank" : "ranks",
           list.c_str(), nranks_, initTimeoutSec_);
  COLLIE_WARN("rendezvous root %s: %s", addr_.c_str(), text);
  sendToMembers(errorFrame(collieTimeout, text), "timeout notice");
}

void RendezvousRoot::run() {
  for (;;) {
    if (started_ && joined_ == nranks_) return finishWithTable();
    if (started_ && Clock::now() >= deadline_) return finishWithTimeout();

    std::vector<pollfd> fds;
    fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
    for (const Pending& p : pending_) fds.push_back(pollfd{p.sock.fd(), POLLIN, 0});
    std::vector<int> watched;
    for (int r = 0; r < nranks_; ++r) {
      if (!members_[r].sock.valid()) continue;
      watched.push_back(r);
      fds.push_back(pollfd{members_[r].sock.fd(), POLLIN, 0});
    }
    double timeoutMs = kPollSliceMs * 5;
    if (started_) timeoutMs = std::min(timeoutMs, secondsLeft(deadline_) * 1000 + 1);
    int rc = poll(fds.data(), fds.size(), static_cast<int>(timeoutMs));
    if (rc < 0) {
      if (errno == EINTR) continue;
      COLLIE_WARN("rendezvous root %s: poll failed: %s; giving up", addr_.c_str(), strerror(errno));
      return;
    }
    // Pending connections first (their pollfds follow the listener's), then members, then new ones,
    // so that the indices still match the vectors they were built from.
    std::vector<Pending> still;
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      bool keep = true;
      if (fds[1 + i].revents != 0) keep = readPending(&p);
      if (keep && std::chrono::duration<double>(now - p.since).count() > kHelloTimeoutSec) {
        drop(p.peer, "it sent " + std::to_string(p.buf.size()) + " bytes, not a whole hello, within " +
                         std::to_string(static_cast<int>(kHelloTimeoutSec)) + " s");
        keep = false;
      }
      if (keep) still.push_back(std::move(p));
    }
    const size_t memberBase = 1 + pending_.size();
    pending_.swap(still);
    for (size_t i = 0; i < watched.size(); ++i) {
      if (fds[memberBase + i].revents != 0 && members_[watched[i]].sock.valid()) watchMember(watched[i]);
    }
    if (fds[0].revents != 0) acceptNew();
  }
}

// ---------------------------------------------------------------- ring helpers

std::vector<uint8_t> ringAuth(const Secret& secret, int from, int to, int nranks) {
  std::vector<uint8_t> out;
  putBe32(&out, kRingAuthMagic);
  putBytes(&out, secret.bytes, sizeof(secret.bytes));
  putBe32(&out, static_cast<uint32_t>(from));
  putBe32(&out, static_cast<uint32_t>(to));
  putBe32(&out, static_cast<uint32_t>(nranks));
  return out;
}

void ringHeader(uint8_t out[kRingHeaderBytes], uint32_t op, uint32_t aux, uint64_t length) {
  std::vector<uint8_t> v;
  putBe32(&v, kRingMsgMagic);
  putBe32(&v, op);
  putBe32(&v, aux);
  putBe32(&v, 0);
  putBe64(&v, length);
  memcpy(out, v.data(), kRingHeaderBytes);
}

// A mismatch means the ranks called different operations or sizes, i.e. a bug above us.
Status checkRingHeader(const uint8_t h[kRingHeaderBytes], uint32_t op, uint32_t aux, uint64_t length,
                       const std::string& peer) {
  if (getBe32(h) != kRingMsgMagic) {
    return Status::error(collieInternalError, "%s sent a malformed message header; the ring is out of step",
                         peer.c_str());
  }
  if (getBe32(h + 4) != op) {
    return Status::error(collieInternalError,
                         "%s is running %s while this rank runs %s; ranks disagree on the order of bootstrap calls",
                         peer.c_str(), opName(getBe32(h + 4)), opName(op));
  }
  if (getBe32(h + 8) != aux) {
    const char* what = op == kOpBroadcast ? "root" : "step";
    return Status::error(collieInternalError, "%s used %s %u where this rank used %u; ranks disagree", peer.c_str(),
                         what, getBe32(h + 8), aux);
  }
  if (getBe64(h + 16) != length) {
    return Status::error(collieInternalError,
                         "%s sent %llu bytes where this rank expected %llu; ranks disagree on the size", peer.c_str(),
                         static_cast<unsigned long long>(getBe64(h + 16)), static_cast<unsigned long long>(length));
  }
  return Status();
}

}  // namespace

// ---------------------------------------------------------------- startRendezvousRoot

Status startRendezvousRoot(const std::string& bindHost, int port, const Secret& secret, double initTimeoutSec,
                           collieUniqueId* id) {
  if (id == nullptr) return Status::error(collieInvalidArgument, "startRendezvousRoot: id is NULL");
  Socket listener;
  SockAddr bound;
  COLLIE_RETURN_IF_ERROR(
      listenOn(bindHost, port, SOMAXCONN, &listener, &bound).withContext("cannot start the rendezvous root"));
  SockAddr advertised = bound;
  if (bound.isWildcard()) {
    // A wildcard cannot be connected to from another host; advertise the interface address instead.
    SockAddr iface;
    if (defaultInterfaceAddress(&iface).ok() && iface.family() == bound.family()) {
      advertised = iface;
    } else {
      (void)resolveAddress(bound.family() == AF_INET6 ? "::1" : "127.0.0.1", 0, &advertised);
    }
    advertised.setPort(bound.port());
  }
  UniqueIdInfo info;
  info.host = advertised.host();
  info.port = advertised.port();
  info.secret = secret;
  encodeUniqueId(info, id);
  std::string addr = advertised.toString();
  COLLIE_INFO("rendezvous root listening on %s", addr.c_str());
  try {
    auto root = std::make_shared<RendezvousRoot>(std::move(listener), addr, secret, initTimeoutSec);
    std::thread([root, addr] {
      setThreadLogRank(-1);
      // Nothing may escape a detached thread: it would terminate the whole program.
      try {
        root->run();
      } catch (const std::exception& e) {
        COLLIE_WARN("rendezvous root %s stopped: %s", addr.c_str(), e.what());
      } catch (...) {
        COLLIE_WARN("rendezvous root %s stopped on an unknown exception", addr.c_str());
      }
    }).detach();
  } catch (const std::exception& e) {
    return Status::error(collieSystemError, "cannot start the rendezvous root thread: %s", e.what());
  }
  return Status();
}

// ---------------------------------------------------------------- Bootstrap::create

// Holds the steps of create() so that they can reach Bootstrap's private members.
class BootstrapBuilder {
 public:
  static Status create(const collieUniqueId& id, int rank, int nranks, const void* info, size_t infoBytes,
                       double timeoutSec, std::unique_ptr<Bootstrap>* out);

 private:
  // Hello to the root, then the table: fills b's infos_ and addrs_, and `peers` with every listen address.
  static Status rendezvous(Bootstrap* b, const UniqueIdInfo& root, const Socket& listener, const SockAddr& listenAddr,
                           const void* info, double timeoutSec, std::vector<SockAddr>* peers);
  static Status buildRing(Bootstrap* b, const Socket& listener, const std::vector<SockAddr>& peers, double timeoutSec);
};

Status BootstrapBuilder::rendezvous(Bootstrap* b, const UniqueIdInfo& rootInfo, const Socket& listener,
                                    const SockAddr& listenAddr, const void* info, double timeoutSec,
                                    std::vector<SockAddr>* peers) {
  SockAddr rootAddr;
  COLLIE_RETURN_IF_ERROR(resolveAddress(rootInfo.host, rootInfo.port, &rootAddr));
  const std::string root = "the rendezvous root at " + rootAddr.toString();
  const Deadline deadline = deadlineAfter(timeoutSec);

  const Clock::time_point start = Clock::now();
  Socket sock;
  COLLIE_RETURN_IF_ERROR(connectTo(rootAddr, deadline, nullptr, &sock).withContext("cannot reach the rendezvous root"));

  std::vector<uint8_t> hello;
  putBytes(&hello, b->secret_.bytes, sizeof(b->secret_.bytes));
  putBe32(&hello, static_cast<uint32_t>(b->rank_));
  putBe32(&hello, static_cast<uint32_t>(b->nranks_));
  putBe32(&hello, static_cast<uint32_t>(b->infoBytes_));
  uint8_t family = 0, raw[16] = {0};
  if (listener.valid()) addressToRaw(listenAddr, &family, raw);
  putBe16(&hello, family);
  putBe16(&hello, static_cast<uint16_t>(listener.valid() ? listenAddr.port() : 0));
  putBytes(&hello, raw, sizeof(raw));
  putBytes(&hello, info, b->infoBytes_);
  std::vector<uint8_t> msg = frame(kHelloMagic, kTypeHello, hello);
  COLLIE_RETURN_IF_ERROR(
      sendAll(sock.fd(), msg.data(), msg.size(), deadline, nullptr, root).withContext("sending the hello"));

  // The root's clock starts at the first hello, possibly before ours: allow a margin past our own deadline.
  const Deadline replyDeadline = deadlineAfter(secondsLeft(deadline) + kRootReplyMarginSec);
  uint8_t header[kFrameHeaderBytes];
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
  const uint32_t type = getBe32(header + 4);
  const uint32_t len = getBe32(header + 8);
  const size_t tableBytes = 8 + static_cast<size_t>(b->nranks_) * (kAddrEntryBytes + b->infoBytes_);
  if (getBe32(header) != kReplyMagic || (type != kTypeTable && type != kTypeError) ||
      (type == kTypeError && (len < 4 || len > 4 + kMaxErrorText)) || (type == kTypeTable && len != tableBytes)) {
    return Status::error(collieInternalError,
                         "%s sent a malformed reply (type %u, %u bytes; expected a %zu-byte table); does it run the "
                         "same Collie version?",
                         root.c_str(), type, len, tableBytes);
  }
  std::vector<uint8_t> payload(len);
  COLLIE_RETURN_IF_ERROR(
      recvAll(sock.fd(), payload.data(), len, replyDeadline, nullptr, root).withContext("receiving the address table"));
  if (type == kTypeError) {
    uint32_t code = getBe32(payload.data());
    std::string text(payload.begin() + 4, payload.end());
    if (code == collieSuccess || code >= collieNumResults) code = collieInternalError;
    return Status::error(static_cast<collieResult_t>(code), "rendezvous failed: %s (reported by %s)", text.c_str(),
                         root.c_str());
  }
  if (getBe32(payload.data()) != static_cast<uint32_t>(b->nranks_) ||
      getBe32(payload.data() + 4) != static_cast<uint32_t>(b->infoBytes_)) {
    return Status::error(collieInternalError,
                         "%s sent a table for %u ranks with %u-byte info blocks; this rank expected %d and %zu",
                         root.c_str(), getBe32(payload.data()), getBe32(payload.data() + 4), b->nranks_, b->infoBytes_);
  }
  b->infos_.resize(static_cast<size_t>(b->nranks_) * b->infoBytes_);
  b->addrs_.resize(b->nranks_);
  peers->resize(b->nranks_);
  const uint8_t* p = payload.data() + 8;
  for (int r = 0; r < b->nranks_; ++r, p += kAddrEntryBytes + b->infoBytes_) {
    if (b->nranks_ > 1) {
      COLLIE_RETURN_IF_ERROR(
          addressFromRaw(static_cast<uint8_t>(getBe16(p)), p + 4, getBe16(p + 2), &(*peers)[r])
              .withContext("the table from " + root + " has a bad address for rank " + std::to_string(r)));
      b->addrs_[r] = (*peers)[r].toString();
    }
    if (b->infoBytes_ > 0) {
      memcpy(b->infos_.data() + static_cast<size_t>(r) * b->infoBytes_, p + kAddrEntryBytes, b->infoBytes_);
    }
  }
  return Status();
}

Status BootstrapBuilder::buildRing(Bootstrap* b, const Socket& listener, const std::vector<SockAddr>& peers,
                                   double timeoutSec) {
  const int n = b->nranks_;
  const int next = (b->rank_ + 1) % n;
  const int prev = (b->rank_ + n - 1) % n;
  // Every rank has the table by now, so a fresh deadline: the rendezvous may have used up most of the first.
  const Deadline deadline = deadlineAfter(timeoutSec);

  // Connect first: the connection completes in next's backlog and the small hello fits in the socket
  // buffer, so this does not wait for next to accept, and every rank can then go on to accept.
  Socket nextSock;
  COLLIE_RETURN_IF_ERROR(connectTo(peers[next], deadline, &b->aborted_, &nextSock)
                             .withContext("cannot connect to " + b->peerName(next) + ", next in the ring"));
  std::vector<uint8_t> auth = ringAuth(b->secret_, b->rank_, next, n);
  COLLIE_RETURN_IF_ERROR(sendAll(nextSock.fd(), auth.data(), auth.size(), deadline, &b->aborted_, b->peerName(next))
                             .withContext("ring setup"));

  Socket prevSock;
  for (;;) {
    Socket conn;
    SockAddr from;
    Status st = acceptOne(listener, deadline, &b->aborted_, &conn, &from);
    if (st.code() == collieTimeout) {
      return Status::error(collieTimeout, "%s, previous in the ring, did not connect within %.1f s",
                           b->peerName(prev).c_str(), timeoutSec);
    }
    COLLIE_RETURN_IF_ERROR(st.withContext("ring setup"));
    uint8_t got[kRingAuthBytes];
    const Deadline authDeadline = std::min(deadline, deadlineAfter(kRingAuthTimeoutSec));
    st = recvAll(conn.fd(), got, sizeof(got), authDeadline, &b->aborted_, from.toString());
    std::string reason;
    if (!st.ok()) {
      reason = st.message();
    } else if (getBe32(got) != kRingAuthMagic || !secretEquals(got + 4, b->secret_.bytes)) {
      reason = "it did not present this communicator's secret";
    } else if (getBe32(got + 20) != static_cast<uint32_t>(prev) ||
               getBe32(got + 24) != static_cast<uint32_t>(b->rank_) || getBe32(got + 28) != static_cast<uint32_t>(n)) {
      reason = "it claims to be rank " + std::to_string(getBe32(got + 20)) + " of " +
               std::to_string(getBe32(got + 28)) + " connecting to rank " + std::to_string(getBe32(got + 24)) +
               ", but rank " + std::to_string(prev) + " of " + std::to_string(n) + " was expected";
    }
    if (reason.empty()) {
      prevSock = std::move(conn);
      break;
    }
    if (b->aborted_.load()) return Status::error(collieRemoteError, "ring setup was aborted");
    COLLIE_WARN("bootstrap rank %d: dropped a ring connection from %s: %s", b->rank_, from.toString().c_str(),
                reason.c_str());
  }
  b->nextFd_ = nextSock.release();
  b->prevFd_ = prevSock.release();
  return Status();
}

Status BootstrapBuilder::create(const collieUniqueId& id, int rank, int nranks, const void* info, size_t infoBytes,
                                double timeoutSec, std::unique_ptr<Bootstrap>* out) {
  if (out == nullptr) return Status::error(collieInvalidArgument, "bootstrap: out is NULL");
  if (nranks < 1 || nranks > kMaxRanks) {
    return Status::error(collieInvalidArgument, "bootstrap: nranks %d is not in 1..%d", nranks, kMaxRanks);
  }
  if (rank < 0 || rank >= nranks) {
    return Status::error(collieInvalidArgument, "bootstrap: rank %d is not in 0..%d", rank, nranks - 1);
  }
  if (infoBytes > kMaxInfoBytes || (infoBytes > 0 && info == nullptr)) {
    return Status::error(collieInvalidArgument, "bootstrap: the info block (%zu bytes at %p) is NULL or over %zu bytes",
                         infoBytes, info, kMaxInfoBytes);
  }
  if (static_cast<uint64_t>(nranks) * (kAddrEntryBytes + infoBytes) + 8 > kMaxTableBytes) {
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
  std::vector<SockAddr> peers;
  COLLIE_RETURN_IF_ERROR(rendezvous(b.get(), rootInfo, listener, listenAddr, info, timeoutSec, &peers));
  if (nranks > 1) COLLIE_RETURN_IF_ERROR(buildRing(b.get(), listener, peers, timeoutSec));
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
  if (r >= 0 && r < static_cast<int>(addrs_.size()) && !addrs_[r].empty()) {
    return "rank " + std::to_string(r) + " (" + addrs_[r] + ")";
  }
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
    uint8_t mine[kRingHeaderBytes], theirs[kRingHeaderBytes];
    ringHeader(mine, op, static_cast<uint32_t>(s), bytesPerRank);
    Status st =
        sendRecv(nextFd_, mine, sizeof(mine), nextName, prevFd_, theirs, sizeof(theirs), prevName, deadline, &aborted_);
    if (st.ok()) st = checkRingHeader(theirs, op, static_cast<uint32_t>(s), bytesPerRank, prevName);
    if (st.ok()) {
      st = sendRecv(nextFd_, base + static_cast<size_t>(sendBlock) * bytesPerRank, bytesPerRank, nextName, prevFd_,
                    base + static_cast<size_t>(recvBlock) * bytesPerRank, bytesPerRank, prevName, deadline, &aborted_);
    }
    if (!st.ok()) return st.withContext(std::string("bootstrap ") + what + " on rank " + std::to_string(rank_));
  }
  return Status();
}

Status Bootstrap::allGather(void* data, size_t bytesPerRank) {
  return ringAllGather(data, bytesPerRank, kOpAllGather, "allGather");
}

Status Bootstrap::barrier() {
  std::vector<uint8_t> bytes(static_cast<size_t>(nranks_), 0);
  return ringAllGather(bytes.data(), 1, kOpBarrier, "barrier");
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
  uint8_t header[kRingHeaderBytes];
  // The message travels root -> root+1 -> ... and stops before it would return to root.
  if (rank_ != root) {
    const std::string prevName = peerName(prev);
    Status st = recvAll(prevFd_, header, sizeof(header), deadline, &aborted_, prevName);
    if (st.ok()) st = checkRingHeader(header, kOpBroadcast, static_cast<uint32_t>(root), bytes, prevName);
    if (st.ok()) st = recvAll(prevFd_, data, bytes, deadline, &aborted_, prevName);
    if (!st.ok()) return st.withContext(context);
  }
  if (next != root) {
    const std::string nextName = peerName(next);
    ringHeader(header, kOpBroadcast, static_cast<uint32_t>(root), bytes);
    Status st = sendAll(nextFd_, header, sizeof(header), deadline, &aborted_, nextName);
    if (st.ok()) st = sendAll(nextFd_, data, bytes, deadline, &aborted_, nextName);
    if (!st.ok()) return st.withContext(context);
  }
  return Status();
}

}  // namespace collie
