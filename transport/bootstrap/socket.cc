// The bootstrap's TCP layer: addresses, interface selection, and deadline-bounded
// socket calls built on non-blocking fds and poll (see socket.h).
#include "transport/bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/log.h"

namespace collie {

// ---------------------------------------------------------------- deadlines

Deadline deadlineAfter(double seconds) {
  // 1e9 s (30 years) keeps the conversion below far from overflowing the clock's representation.
  if (!(seconds > 0) || !std::isfinite(seconds) || seconds > 1e9) return Deadline::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double secondsLeft(Deadline deadline) {
  if (deadline == Deadline::max()) return 1e18;
  double left = std::chrono::duration<double>(deadline - Clock::now()).count();
  return left > 0 ? left : 0;
}

namespace {

// Poll timeout for one slice: short enough to notice an abort, never past the deadline.
int sliceMs(Deadline deadline) {
  double left = secondsLeft(deadline);
  if (left <= 0) return 0;
  return static_cast<int>(std::min<double>(kPollSliceMs, std::ceil(left * 1000.0)));
}

bool aborted(const std::atomic<bool>* abort) { return abort != nullptr && abort->load(std::memory_order_relaxed); }

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

Status sysFail(const std::string& what, int err) { return systemError(what.c_str(), err, __FILE__, __LINE__); }

}  // namespace

// ---------------------------------------------------------------- addresses

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::setPort(int port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(static_cast<uint16_t>(port));
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(static_cast<uint16_t>(port));
}

std::string SockAddr::host() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

std::string SockAddr::toString() const {
  if (family() == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  return host() + ":" + std::to_string(port());
}

bool SockAddr::isWildcard() const {
  if (family() == AF_INET) return reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (family() == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr);
  }
  return false;
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
  }
  return false;
}

Status resolveAddress(const std::string& hostIn, int port, SockAddr* out) {
  if (port < 0 || port > 65535) return Status::error(collieInvalidArgument, "port %d is not in 0..65535", port);
  std::string host = hostIn;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  SockAddr a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    a.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    a.len = sizeof(sockaddr_in6);
  } else {
    // A host name (or an IPv6 address with a %scope): let the resolver decide, preferring IPv4.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc != 0) {
      return Status::error(collieInvalidArgument, "cannot resolve host '%s': %s", host.c_str(), gai_strerror(rc));
    }
    const addrinfo* pick = nullptr;
    for (const addrinfo* r = res; r != nullptr; r = r->ai_next) {
      if (r->ai_family == AF_INET) {
        pick = r;
        break;
      }
      if (r->ai_family == AF_INET6 && pick == nullptr) pick = r;
    }
    if (pick == nullptr || pick->ai_addrlen > sizeof(a.storage)) {
      freeaddrinfo(res);
      return Status::error(collieInvalidArgument, "host '%s' has no IPv4 or IPv6 address", host.c_str());
    }
    memcpy(&a.storage, pick->ai_addr, pick->ai_addrlen);
    a.len = pick->ai_addrlen;
    freeaddrinfo(res);
  }
  a.setPort(port);
  *out = a;
  return Status();
}

bool parseHostPort(const std::string& text, std::string* host, int* port) {
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const long value = colon == std::string::npos ? 0 : strtol(text.c_str() + colon + 1, &end, 10);
  // The end of the whole text, not the first NUL: a std::string may hold one.
  if (colon == std::string::npos || colon == 0 || end != text.c_str() + text.size() || value <= 0 || value > 65535)
    return false;
  std::string h = text.substr(0, colon);
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);  // [v6]:port
  *host = h;
  *port = static_cast<int>(value);
  return true;
}

void addressToRaw(const SockAddr& addr, uint8_t* family, uint8_t raw[16]) {
  memset(raw, 0, 16);
  if (addr.family() == AF_INET) {
    *family = 4;
    memcpy(raw, &reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_addr, 4);
  } else {
    *family = 6;
    memcpy(raw, &reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_addr, 16);
  }
}

Status addressFromRaw(uint8_t family, const uint8_t raw[16], int port, SockAddr* out) {
  SockAddr a;
  if (family == 4) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    v4->sin_family = AF_INET;
    memcpy(&v4->sin_addr, raw, 4);
    a.len = sizeof(sockaddr_in);
  } else if (family == 6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    v6->sin6_family = AF_INET6;
    memcpy(&v6->sin6_addr, raw, 16);
    a.len = sizeof(sockaddr_in6);
  } else {
    return Status::error(collieInvalidArgument, "address family %u is neither 4 (IPv4) nor 6 (IPv6)", family);
  }
  if (port <= 0 || port > 65535) return Status::error(collieInvalidArgument, "port %d is not in 1..65535", port);
  a.setPort(port);
  *out = a;
  return Status();
}

// ---------------------------------------------------------------- interface selection

namespace {

struct IfSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  bool matches(const char* ifname) const {
    bool hit = false;
    for (const std::string& n : names) {
      if (exact ? n == ifname : strncmp(ifname, n.c_str(), n.size()) == 0) {
        hit = true;
        break;
      }
    }
    return exclude ? !hit : hit;
  }
};

IfSpec parseIfSpec(const std::string& text) {
  IfSpec spec;
  size_t i = 0;
  if (i < text.size() && text[i] == '^') {
    spec.exclude = true;
    ++i;
  }
  if (i < text.size() && text[i] == '=') {
    spec.exact = true;
    ++i;
  }
  std::string cur;
  for (; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',') {
      if (!cur.empty()) spec.names.push_back(cur);
      cur.clear();
    } else if (text[i] != ' ') {
      cur += text[i];
    }
  }
  return spec;
}

}  // namespace

Status findInterfaceAddress(const std::optional<std::string>& specText, SockAddr* out, std::string* ifname) {
  std::optional<IfSpec> spec;
  if (specText) {
    spec = parseIfSpec(*specText);
    if (spec->names.empty() && !spec->exclude) {
      return Status::error(collieInvalidArgument, "COLLIE_SOCKET_IFNAME='%s' names no interface", specText->c_str());
    }
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == -1) return sysFail("getifaddrs()", errno);
  const ifaddrs* pick4 = nullptr;
  const ifaddrs* pick6 = nullptr;
  std::vector<std::string> upNames;  // for the error sentence
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || (ifa->ifa_flags & IFF_UP) == 0) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (std::find(upNames.begin(), upNames.end(), ifa->ifa_name) == upNames.end()) upNames.push_back(ifa->ifa_name);
    // Link-local IPv6 needs a scope id that does not travel in a unique id, so it cannot be advertised.
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr)->sin6_addr)) {
      continue;
    }
    if (spec) {
      if (!spec->matches(ifa->ifa_name)) continue;
    } else if ((ifa->ifa_flags & IFF_LOOPBACK) != 0 || family != AF_INET) {
      continue;
    }
    if (family == AF_INET && pick4 == nullptr) pick4 = ifa;
    if (family == AF_INET6 && pick6 == nullptr) pick6 = ifa;
  }
  const ifaddrs* pick = pick4 != nullptr ? pick4 : pick6;
  Status st;
  if (pick != nullptr) {
    SockAddr a;
    a.len = pick->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&a.storage, pick->ifa_addr, a.len);
    a.setPort(0);
    *out = a;
    if (ifname != nullptr) *ifname = pick->ifa_name;
  } else if (spec) {
    std::string names;
    for (const std::string& n : upNames) names += (names.empty() ? "" : ", ") + n;
    st = Status::error(collieInvalidArgument,
                       "COLLIE_SOCKET_IFNAME='%s' matches no interface that is up with a usable address (up: %s)",
                       specText->c_str(), names.empty() ? "none" : names.c_str());
  } else {
    st = resolveAddress("127.0.0.1", 0, out);
    if (ifname != nullptr) *ifname = "lo";
  }
  freeifaddrs(list);
  return st;
}

Status defaultInterfaceAddress(SockAddr* out, std::string* ifname) {
  return findInterfaceAddress(env::get("COLLIE_SOCKET_IFNAME"), out, ifname);
}

// ---------------------------------------------------------------- Socket

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::close() {
  // No retry on EINTR: on Linux the fd is released even then, and a retry could close someone else's fd.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void setNoDelay(const Socket& socket) {
  int one = 1;
  setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status localAddress(const Socket& socket, SockAddr* out) {
  SockAddr a;
  a.len = sizeof(a.storage);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&a.storage), &a.len) == -1) {
    return sysFail("getsockname()", errno);
  }
  *out = a;
  return Status();
}

Status listenOn(const SockAddr& addr, int backlog, Socket* out, SockAddr* bound) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return sysFail("socket()", errno);
  int one = 1;
  COLLIE_CHECK_SYS(setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
  if (bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == -1) {
    return sysFail("bind(" + addr.toString() + ")", errno);
  }
  if (listen(s.fd(), backlog) == -1) return sysFail("listen(" + addr.toString() + ")", errno);
  if (bound != nullptr) COLLIE_RETURN_IF_ERROR(localAddress(s, bound));
  *out = std::move(s);
  return Status();
}

Status listenOn(const std::string& host, int port, int backlog, Socket* out, SockAddr* bound) {
  SockAddr addr;
  if (host.empty()) {
    COLLIE_RETURN_IF_ERROR(defaultInterfaceAddress(&addr));
    if (port < 0 || port > 65535) return Status::error(collieInvalidArgument, "port %d is not in 0..65535", port);
    addr.setPort(port);
  } else {
    COLLIE_RETURN_IF_ERROR(resolveAddress(host, port, &addr));
  }
  return listenOn(addr, backlog, out, bound);
}

// ---------------------------------------------------------------- connect / accept

namespace {

bool retryableConnectError(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case EAGAIN:
    case EADDRNOTAVAIL:  // ephemeral ports exhausted for a moment
      return true;
    default:
      return false;
  }
}

// Linux may complete a connect to a local port with nobody listening as a TCP
// simultaneous open with itself when the ephemeral port happens to equal the
// target; such a socket talks to itself, so it counts as refused.
bool isSelfConnected(const Socket& s) {
  SockAddr local, remote;
  local.len = remote.len = sizeof(local.storage);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&local.storage), &local.len) == -1) return false;
  if (getpeername(s.fd(), reinterpret_cast<sockaddr*>(&remote.storage), &remote.len) == -1) return false;
  return local.len == remote.len && local.toString() == remote.toString();
}

// Sleeps up to ms, in slices, stopping early at the deadline or an abort.
void sleepSliced(int ms, Deadline deadline, const std::atomic<bool>* abort) {
  Clock::time_point until = Clock::now() + std::chrono::milliseconds(ms);
  if (until > deadline) until = deadline;
  while (!aborted(abort) && Clock::now() < until) {
    auto step = std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(kPollSliceMs));
    std::this_thread::sleep_for(step);
  }
}

}  // namespace

Status connectTo(const SockAddr& addr, Deadline deadline, const std::atomic<bool>* abort, Socket* out) {
  const Clock::time_point start = Clock::now();
  int backoffMs = 10;
  int lastErr = 0;
  for (bool first = true;; first = false) {
    if (aborted(abort)) {
      return Status::error(collieRemoteError, "aborted while connecting to %s", addr.toString().c_str());
    }
    if (!first && Clock::now() >= deadline) {
      return Status::error(collieTimeout, "could not connect to %s within %.1f s (last error: %s)",
                           addr.toString().c_str(), secondsSince(start), strerror(lastErr));
    }
    Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return sysFail("socket()", errno);
    int err = 0;
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.storage), addr.len) == -1) err = errno;
    if (err == EINPROGRESS || err == EINTR) {
      // The handshake goes on in the kernel; wait for it to finish or fail.
      err = ETIMEDOUT;
      while (!aborted(abort)) {
        pollfd p{s.fd(), POLLOUT, 0};
        int rc = poll(&p, 1, sliceMs(deadline));
        if (rc == -1 && errno != EINTR) return sysFail("poll()", errno);
        if (rc > 0) {
          socklen_t len = sizeof(err);
          if (getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) == -1) err = errno;
          break;
        }
        if (Clock::now() >= deadline) break;
      }
      if (aborted(abort)) continue;
    }
    if (err == 0 && isSelfConnected(s)) err = ECONNREFUSED;
    if (err == 0) {
      setNoDelay(s);
      *out = std::move(s);
      return Status();
    }
    if (!retryableConnectError(err)) return sysFail("connect(" + addr.toString() + ")", err);
    lastErr = err;
    s.close();
    sleepSliced(backoffMs, deadline, abort);
    backoffMs = std::min(backoffMs * 2, 500);
  }
}

Status acceptOne(const Socket& listener, Deadline deadline, const std::atomic<bool>* abort, Socket* out,
                 SockAddr* peer) {
  const Clock::time_point start = Clock::now();
  for (bool first = true;; first = false) {
    if (aborted(abort)) return Status::error(collieRemoteError, "aborted while waiting for a connection");
    if (!first && Clock::now() >= deadline) {
      return Status::error(collieTimeout, "no connection arrived within %.1f s", secondsSince(start));
    }
    SockAddr a;
    a.len = sizeof(a.storage);
    int fd = accept4(listener.fd(), reinterpret_cast<sockaddr*>(&a.storage), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Socket s(fd);
      setNoDelay(s);
      if (peer != nullptr) *peer = a;
      *out = std::move(s);
      return Status();
    }
    int err = errno;
    // A connection that was reset before we took it is the peer's problem, not ours.
    if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED && err != EPROTO) {
      return sysFail("accept()", err);
    }
    pollfd p{listener.fd(), POLLIN, 0};
    if (poll(&p, 1, sliceMs(deadline)) == -1 && errno != EINTR) return sysFail("poll()", errno);
  }
}

// ---------------------------------------------------------------- data transfer

Status sendRecv(int sendFd, const void* sendData, size_t sendBytes, const std::string& sendPeer, int recvFd,
                void* recvData, size_t recvBytes, const std::string& recvPeer, Deadline deadline,
                const std::atomic<bool>* abort) {
  const Clock::time_point start = Clock::now();
  const char* out = static_cast<const char*>(sendData);
  char* in = static_cast<char*>(recvData);
  size_t sent = 0;
  size_t got = 0;
  for (bool first = true; sent < sendBytes || got < recvBytes; first = false) {
    const bool sending = sent < sendBytes;
    const bool receiving = got < recvBytes;
    if (aborted(abort)) {
      return Status::error(collieRemoteError, "aborted while %s %s", receiving ? "receiving from" : "sending to",
                           (receiving ? recvPeer : sendPeer).c_str());
    }
    if (!first && Clock::now() >= deadline) {
      if (receiving) {
        return Status::error(collieTimeout, "timed out after %.1f s receiving from %s (%zu of %zu bytes arrived)",
                             secondsSince(start), recvPeer.c_str(), got, recvBytes);
      }
      return Status::error(collieTimeout, "timed out after %.1f s sending to %s (%zu of %zu bytes sent)",
                           secondsSince(start), sendPeer.c_str(), sent, sendBytes);
    }
    pollfd fds[2];
    int n = 0;
    int sendIdx = -1, recvIdx = -1;
    if (sending) {
      sendIdx = n;
      fds[n++] = pollfd{sendFd, POLLOUT, 0};
    }
    if (receiving) {
      recvIdx = n;
      fds[n++] = pollfd{recvFd, POLLIN, 0};
    }
    // The first round tries the calls directly: data is often already there, and a passed deadline
    // should not fail an exchange that needs no waiting.
    int rc = first ? n : poll(fds, n, sliceMs(deadline));
    if (rc == -1) {
      if (errno == EINTR) continue;
      return sysFail("poll()", errno);
    }
    if (rc == 0) continue;
    if (sendIdx >= 0 && (first || fds[sendIdx].revents != 0)) {
      if (!first && (fds[sendIdx].revents & POLLNVAL)) return sysFail("poll(send socket)", EBADF);
      ssize_t k = ::send(sendFd, out + sent, sendBytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        sent += static_cast<size_t>(k);
      } else if (k == -1 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        if (err == EPIPE || err == ECONNRESET) {
          return Status::error(collieRemoteError, "%s closed the connection (%zu of %zu bytes sent)", sendPeer.c_str(),
                               sent, sendBytes);
        }
        return sysFail("send() to " + sendPeer, err);
      }
    }
    if (recvIdx >= 0 && (first || fds[recvIdx].revents != 0)) {
      if (!first && (fds[recvIdx].revents & POLLNVAL)) return sysFail("poll(receive socket)", EBADF);
      ssize_t k = ::recv(recvFd, in + got, recvBytes - got, MSG_DONTWAIT);
      if (k > 0) {
        got += static_cast<size_t>(k);
      } else if (k == 0) {
        return Status::error(collieRemoteError, "%s closed the connection (%zu of %zu bytes arrived)", recvPeer.c_str(),
                             got, recvBytes);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        int err = errno;
        if (err == ECONNRESET) {
          return Status::error(collieRemoteError, "%s reset the connection (%zu of %zu bytes arrived)",
                               recvPeer.c_str(), got, recvBytes);
        }
        return sysFail("recv() from " + recvPeer, err);
      }
    }
  }
  return Status();
}

Status sendAll(int fd, const void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abort,
               const std::string& peer) {
  return sendRecv(fd, data, bytes, peer, -1, nullptr, 0, "", deadline, abort);
}

Status recvAll(int fd, void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abort,
               const std::string& peer) {
  return sendRecv(-1, nullptr, 0, "", fd, data, bytes, peer, deadline, abort);
}

}  // namespace collie
