// The rendezvous root: startRendezvousRoot and the thread it starts, which collects every
// rank's hello and answers with the address table (or with the ranks that never came).
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"
#include "transport/bootstrap/wire.h"

namespace collie {

namespace {

constexpr size_t kMaxPending = 256;      // unauthenticated connections the root holds at once
constexpr double kHelloTimeoutSec = 10;  // a connection must deliver its whole hello within this
constexpr double kReplySendSec = 30;     // bound on the root's sending of the table or the error

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
    size_t need = wire::kFrameHeaderBytes;
    Clock::time_point since;
  };
  struct Member {
    Socket sock;
    std::string peer;
    uint8_t listenRaw[wire::kAddrEntryBytes] = {0};  // family, port, address as they go into the table
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
  std::vector<uint8_t> msg = wire::errorFrame(code, "this rank was refused: " + reason);
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
  if (p->need == wire::kFrameHeaderBytes) {
    size_t len = 0;
    Status st = wire::parseHelloHeader(p->buf.data(), &len);
    if (!st.ok()) {
      drop(p->peer, st.message());
      return false;
    }
    p->need = wire::kFrameHeaderBytes + len;
    return true;
  }
  processHello(p);
  return false;
}

void RendezvousRoot::processHello(Pending* p) {
  wire::Hello hello;
  bool authenticated = false;
  Status st = wire::parseHello(p->buf.data() + wire::kFrameHeaderBytes, p->buf.size() - wire::kFrameHeaderBytes,
                               secret_, &hello, &authenticated);
  if (!authenticated) return drop(p->peer, st.message());
  if (!st.ok()) return reject(&p->sock, p->peer, st.code(), st.message());
  // The hello is well formed; what is left is its agreement with the ranks that came before it.
  const uint32_t rank = hello.rank;
  const uint32_t nranks = hello.nranks;
  const uint32_t infoBytes = hello.infoBytes;
  char why[256];
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
  memcpy(m.listenRaw, hello.listenRaw, wire::kAddrEntryBytes);
  m.info.assign(hello.info, hello.info + infoBytes);
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
  payload.reserve(8 + static_cast<size_t>(nranks_) * (wire::kAddrEntryBytes + infoBytes_));
  putBe32(&payload, static_cast<uint32_t>(nranks_));
  putBe32(&payload, infoBytes_);
  for (const Member& m : members_) {
    putBytes(&payload, m.listenRaw, wire::kAddrEntryBytes);
    putBytes(&payload, m.info.data(), m.info.size());
  }
  sendToMembers(wire::frame(wire::kReplyMagic, wire::kTypeTable, payload), "address table");
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
  char text[wire::kMaxErrorText];
  snprintf(text, sizeof(text), "%s %s of %d never joined within %.1f s", missing.size() == 1 ? "rank" : "ranks",
           list.c_str(), nranks_, initTimeoutSec_);
  COLLIE_WARN("rendezvous root %s: %s", addr_.c_str(), text);
  sendToMembers(wire::errorFrame(collieTimeout, text), "timeout notice");
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

}  // namespace

// ---------------------------------------------------------------- startRendezvousRoot

namespace {
std::atomic<int> liveRoots{0};
}  // namespace

int liveRendezvousRoots() { return liveRoots.load(); }

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
    liveRoots.fetch_add(1);
    try {
      // The thread holds the only reference: the root closes its sockets when the thread lets go.
      std::thread([root = std::move(root), addr]() mutable {
        setThreadLogRank(-1);
        // Nothing may escape a detached thread: it would terminate the whole program.
        try {
          root->run();
        } catch (const std::exception& e) {
          COLLIE_WARN("rendezvous root %s stopped: %s", addr.c_str(), e.what());
        } catch (...) {
          COLLIE_WARN("rendezvous root %s stopped on an unknown exception", addr.c_str());
        }
        root.reset();  // its sockets close here, before the thread counts as finished
        liveRoots.fetch_sub(1);
      }).detach();
    } catch (...) {
      liveRoots.fetch_sub(1);
      throw;
    }
  } catch (const std::exception& e) {
    return Status::error(collieSystemError, "cannot start the rendezvous root thread: %s", e.what());
  }
  return Status();
}

}  // namespace collie
