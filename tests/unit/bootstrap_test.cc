// Tests of the bootstrap network: unique ids, interface selection, the rendezvous
// root (including hostile connections and missing ranks), and the ring's
// allgather, broadcast and barrier. Ranks are threads of this process.
#include "transport/bootstrap/bootstrap.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "transport/bootstrap/socket.h"
#include "transport/bootstrap/wire.h"

namespace collie {
namespace {

using std::chrono::duration;

double since(Clock::time_point t) { return duration<double>(Clock::now() - t).count(); }

Secret makeSecret() {
  Secret s{};
  EXPECT_TRUE(randomSecret(&s).ok());
  return s;
}

collieUniqueId startRoot(double initTimeoutSec, const std::string& host = "127.0.0.1") {
  collieUniqueId id{};
  Status st = startRendezvousRoot(host, 0, makeSecret(), initTimeoutSec, &id);
  EXPECT_TRUE(st.ok()) << st.message();
  return id;
}

// Runs fn(rank) for every rank in its own thread and returns each rank's status.
std::vector<Status> runRanks(const std::vector<int>& ranks, const std::function<Status(int)>& fn) {
  std::vector<Status> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) threads.emplace_back([&, i] { results[i] = fn(ranks[i]); });
  for (std::thread& t : threads) t.join();
  return results;
}

std::vector<int> allRanks(int n) {
  std::vector<int> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

struct Info {
  int32_t rank;
  uint64_t tag;
};

Status createRank(const collieUniqueId& id, int rank, int n, double timeoutSec, std::unique_ptr<Bootstrap>* out) {
  Info info{rank, 0x1234567890abcdefull + static_cast<uint64_t>(rank)};
  return Bootstrap::create(id, rank, n, &info, sizeof(info), timeoutSec, out);
}

uint8_t expectedByte(uint32_t seed, int rank, size_t i) {
  return static_cast<uint8_t>((seed * 2654435761u) ^ (static_cast<uint32_t>(rank) * 40503u) ^ (i * 131u));
}

// ---------------------------------------------------------------- unique ids and secrets

TEST(UniqueId, RoundTripsIPv4AndIPv6) {
  for (const char* host : {"127.0.0.1", "10.1.2.3", "::1", "fd00::2"}) {
    UniqueIdInfo in;
    in.host = host;
    in.port = 40123;
    in.secret = makeSecret();
    collieUniqueId id;
    encodeUniqueId(in, &id);
    UniqueIdInfo out;
    Status st = decodeUniqueId(id, &out);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(out.host, in.host);
    EXPECT_EQ(out.port, in.port);
    EXPECT_EQ(0, memcmp(out.secret.bytes, in.secret.bytes, sizeof(in.secret.bytes)));
  }
}

TEST(UniqueId, DecodeRejectsMalformedIds) {
  UniqueIdInfo in;
  in.host = "127.0.0.1";
  in.port = 5000;
  collieUniqueId good;
  encodeUniqueId(in, &good);
  UniqueIdInfo out;

  collieUniqueId id = good;
  id.internal[0] ^= 0x5a;  // magic
  Status st = decodeUniqueId(id, &out);
  EXPECT_EQ(st.code(), collieInvalidArgument);
  EXPECT_NE(st.message().find("magic"), std::string::npos) << st.message();

  id = good;
  id.internal[5] = 99;  // version
  EXPECT_EQ(decodeUniqueId(id, &out).code(), collieInvalidArgument);

  id = good;
  id.internal[7] = 5;  // family
  EXPECT_EQ(decodeUniqueId(id, &out).code(), collieInvalidArgument);

  id = good;
  id.internal[8] = id.internal[9] = 0;  // port
  st = decodeUniqueId(id, &out);
  EXPECT_EQ(st.code(), collieInvalidArgument);
  EXPECT_NE(st.message().find("port 0"), std::string::npos) << st.message();

  collieUniqueId zero{};
  EXPECT_EQ(decodeUniqueId(zero, &out).code(), collieInvalidArgument);
}

TEST(Secret, HexRoundTripAndRejects) {
  Secret s = makeSecret();
  Secret t = makeSecret();
  EXPECT_NE(0, memcmp(s.bytes, t.bytes, sizeof(s.bytes)));  // 2^-128 chance of a false failure
  std::string hex = secretToHex(s);
  EXPECT_EQ(hex.size(), 32u);
  Secret back{};
  ASSERT_TRUE(parseSecretHex(hex, &back));
  EXPECT_EQ(0, memcmp(s.bytes, back.bytes, sizeof(s.bytes)));
  ASSERT_TRUE(parseSecretHex("00112233445566778899AABBCCDDEEFF", &back));
  EXPECT_EQ(back.bytes[15], 0xff);
  EXPECT_FALSE(parseSecretHex("", &back));
  EXPECT_FALSE(parseSecretHex("0011223344556677889900aabbccddeeff", &back));  // 34 digits
  EXPECT_FALSE(parseSecretHex("0011223344556677889900aabbccddeg", &back));
}

// ---------------------------------------------------------------- addresses

TEST(Socket, InterfaceSelection) {
  SockAddr a;
  std::string name;
  Status st = findInterfaceAddress(std::string("lo"), &a, &name);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(a.isLoopback()) << a.toString();
  EXPECT_EQ(name, "lo");

  st = findInterfaceAddress(std::nullopt, &a, &name);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(a.family(), AF_INET);
  std::cout << "default interface: " << name << " " << a.host() << std::endl;

  st = findInterfaceAddress(std::string("^lo"), &a, &name);
  if (st.ok()) {
    EXPECT_FALSE(a.isLoopback()) << name << " " << a.toString();
  }

  st = findInterfaceAddress(std::string("nosuchinterface0,nosuchinterface1"), &a, &name);
  EXPECT_EQ(st.code(), collieInvalidArgument);
  EXPECT_NE(st.message().find("nosuchinterface0"), std::string::npos) << st.message();

  st = findInterfaceAddress(std::string("=l"), &a, &name);  // exact: "l" is not "lo"
  EXPECT_EQ(st.code(), collieInvalidArgument);
}

TEST(Socket, ResolvesNumericAndNames) {
  SockAddr a;
  ASSERT_TRUE(resolveAddress("::1", 80, &a).ok());
  EXPECT_EQ(a.toString(), "[::1]:80");
  ASSERT_TRUE(resolveAddress("[::1]", 81, &a).ok());
  EXPECT_EQ(a.port(), 81);
  Status st = resolveAddress("localhost", 82, &a);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(a.isLoopback()) << a.toString();
  EXPECT_EQ(resolveAddress("no-such-host.invalid", 1, &a).code(), collieInvalidArgument);
}

// ---------------------------------------------------------------- rendezvous and ring

// Checks infos, allGather, broadcast from every root and barrier on one rank.
Status exerciseRank(Bootstrap* b, uint32_t seed) {
  const int n = b->nranks();
  const int r = b->rank();
  for (int p = 0; p < n; ++p) {
    const Info* info = static_cast<const Info*>(b->info(p));
    EXPECT_EQ(info->rank, p);
    EXPECT_EQ(info->tag, 0x1234567890abcdefull + static_cast<uint64_t>(p));
  }
  const size_t block = 1 + seed % 1000;
  std::vector<uint8_t> data(block * n, 0xee);
  for (size_t i = 0; i < block; ++i) data[r * block + i] = expectedByte(seed, r, i);
  COLLIE_RETURN_IF_ERROR(b->allGather(data.data(), block));
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < block; ++i) {
      if (data[p * block + i] != expectedByte(seed, p, i)) {
        ADD_FAILURE() << "rank " << r << ": allGather block " << p << " byte " << i << " is wrong";
        return Status();
      }
    }
  for (int root = 0; root < n; ++root) {
    std::vector<uint8_t> buf(block + root, 0);
    if (r == root)
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = expectedByte(seed + 1, root, i);
    COLLIE_RETURN_IF_ERROR(b->broadcast(buf.data(), buf.size(), root));
    for (size_t i = 0; i < buf.size(); ++i) {
      if (buf[i] != expectedByte(seed + 1, root, i)) {
        ADD_FAILURE() << "rank " << r << ": broadcast from " << root << " byte " << i << " is wrong";
        return Status();
      }
    }
  }
  COLLIE_RETURN_IF_ERROR(b->allGather(nullptr, 0));
  return b->barrier();
}

TEST(Bootstrap, RendezvousAllGatherBroadcastBarrier) {
  const uint32_t seed = std::random_device{}();
  std::cout << "seed " << seed << std::endl;
  for (int n = 1; n <= 8; ++n) {
    collieUniqueId id = startRoot(10);
    std::vector<Status> results = runRanks(allRanks(n), [&](int r) {
      std::unique_ptr<Bootstrap> b;
      COLLIE_RETURN_IF_ERROR(createRank(id, r, n, 10, &b));
      EXPECT_EQ(b->rank(), r);
      EXPECT_EQ(b->nranks(), n);
      return exerciseRank(b.get(), seed + static_cast<uint32_t>(n));
    });
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(results[r].ok()) << "n=" << n << " rank " << r << ": " << results[r].message();
  }
}

TEST(Bootstrap, IfnameVariablePicksTheInterface) {
  setenv("COLLIE_SOCKET_IFNAME", "lo", 1);
  collieUniqueId id = startRoot(10, "");
  UniqueIdInfo info;
  ASSERT_TRUE(decodeUniqueId(id, &info).ok());
  EXPECT_EQ(info.host, "127.0.0.1");
  std::vector<Status> results = runRanks(allRanks(2), [&](int r) {
    std::unique_ptr<Bootstrap> b;
    COLLIE_RETURN_IF_ERROR(createRank(id, r, 2, 10, &b));
    return exerciseRank(b.get(), 5);
  });
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.message();

  setenv("COLLIE_SOCKET_IFNAME", "^lo", 1);
  SockAddr a;
  if (defaultInterfaceAddress(&a).ok()) {
    EXPECT_FALSE(a.isLoopback()) << a.toString();
  }
  setenv("COLLIE_SOCKET_IFNAME", "nosuchinterface", 1);
  collieUniqueId unused;
  EXPECT_EQ(startRendezvousRoot("", 0, makeSecret(), 1, &unused).code(), collieInvalidArgument);
  unsetenv("COLLIE_SOCKET_IFNAME");
}

TEST(Bootstrap, IPv6Root) {
  SockAddr probe;
  Socket s;
  if (!resolveAddress("::1", 0, &probe).ok() || !listenOn(probe, 1, &s, nullptr).ok()) {
    GTEST_SKIP() << "no IPv6 loopback";
  }
  collieUniqueId id = startRoot(10, "::1");
  UniqueIdInfo info;
  ASSERT_TRUE(decodeUniqueId(id, &info).ok());
  EXPECT_EQ(info.host, "::1");
  std::vector<Status> results = runRanks(allRanks(3), [&](int r) {
    std::unique_ptr<Bootstrap> b;
    COLLIE_RETURN_IF_ERROR(createRank(id, r, 3, 10, &b));
    return exerciseRank(b.get(), 7);
  });
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.message();
}

TEST(Bootstrap, LargeAllGatherDoesNotDeadlock) {
  const int n = 4;
  const size_t block = 4 << 20;
  collieUniqueId id = startRoot(10);
  const auto start = Clock::now();
  std::vector<Status> results = runRanks(allRanks(n), [&](int r) {
    std::unique_ptr<Bootstrap> b;
    COLLIE_RETURN_IF_ERROR(createRank(id, r, n, 10, &b));
    std::vector<uint8_t> data(block * n);
    for (size_t i = 0; i < block; ++i) data[r * block + i] = expectedByte(3, r, i);
    COLLIE_RETURN_IF_ERROR(b->allGather(data.data(), block));
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < block; i += 4093) {
        if (data[p * block + i] != expectedByte(3, p, i)) {
          return Status::error(collieInternalError, "block %d byte %zu is wrong", p, i);
        }
      }
    // Broadcast of a large message, too, from a root in the middle of the ring.
    std::vector<uint8_t> big(block, r == 2 ? 0x42 : 0);
    COLLIE_RETURN_IF_ERROR(b->broadcast(big.data(), big.size(), 2));
    if (big[0] != 0x42 || big[block - 1] != 0x42) return Status::error(collieInternalError, "broadcast is wrong");
    return Status();
  });
  for (const Status& st : results) EXPECT_TRUE(st.ok()) << st.message();
  std::cout << "4 x 4 MiB allgather + broadcast: " << since(start) << " s" << std::endl;
}

// Connects a raw socket to the root of `id`.
Socket rawConnect(const collieUniqueId& id) {
  UniqueIdInfo info;
  EXPECT_TRUE(decodeUniqueId(id, &info).ok());
  SockAddr addr;
  EXPECT_TRUE(resolveAddress(info.host, info.port, &addr).ok());
  Socket s;
  Status st = connectTo(addr, deadlineAfter(5), nullptr, &s);
  EXPECT_TRUE(st.ok()) << st.message();
  return s;
}

// True when the peer closes the connection (EOF or reset) within 5 s.
bool closedByPeer(const Socket& s) {
  char buf[256];
  const auto start = Clock::now();
  while (since(start) < 5) {
    ssize_t k = recv(s.fd(), buf, sizeof(buf), MSG_DONTWAIT);
    if (k == 0 || (k < 0 && errno == ECONNRESET)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(Bootstrap, RootSurvivesStrangers) {
  collieUniqueId id = startRoot(10);

  // A rank of another communicator: right address, wrong secret.
  UniqueIdInfo info;
  ASSERT_TRUE(decodeUniqueId(id, &info).ok());
  info.secret.bytes[0] ^= 1;
  collieUniqueId wrongSecret;
  encodeUniqueId(info, &wrongSecret);
  std::unique_ptr<Bootstrap> stranger;
  Status st = createRank(wrongSecret, 0, 3, 5, &stranger);
  EXPECT_EQ(st.code(), collieRemoteError) << st.message();

  // Garbage.
  Socket garbage = rawConnect(id);
  const char http[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_TRUE(sendAll(garbage.fd(), http, sizeof(http) - 1, deadlineAfter(5), nullptr, "root").ok());
  EXPECT_TRUE(closedByPeer(garbage));

  // A hello header announcing 2 GiB: mirrors the frame header in bootstrap.cc ("CLBH", type 1, length).
  Socket oversized = rawConnect(id);
  const uint8_t huge[] = {'C', 'L', 'B', 'H', 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff};
  ASSERT_TRUE(sendAll(oversized.fd(), huge, sizeof(huge), deadlineAfter(5), nullptr, "root").ok());
  EXPECT_TRUE(closedByPeer(oversized));

  // A short message that then goes quiet, and a connection that sends nothing: held open while the ranks join.
  Socket shortMsg = rawConnect(id);
  ASSERT_TRUE(sendAll(shortMsg.fd(), huge, 5, deadlineAfter(5), nullptr, "root").ok());
  Socket silent = rawConnect(id);

  const int n = 3;
  std::vector<Status> results = runRanks(allRanks(n), [&](int r) {
    std::unique_ptr<Bootstrap> b;
    COLLIE_RETURN_IF_ERROR(createRank(id, r, n, 10, &b));
    return exerciseRank(b.get(), 11);
  });
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.message();
}

// Every ring connection must start with the secret: a stranger that reaches a
// rank's listening port (here: a wrong secret, then the right secret claiming
// another rank) is dropped, and the real predecessor still gets in. Rank 0 is
// played by hand with the wire format, so the strangers come first for sure.
TEST(Bootstrap, RingListenerDropsStrangers) {
  collieUniqueId id = startRoot(10);
  UniqueIdInfo rootInfo;
  ASSERT_TRUE(decodeUniqueId(id, &rootInfo).ok());
  std::unique_ptr<Bootstrap> rank1;
  Status rank1St;
  std::thread t([&] { rank1St = createRank(id, 1, 2, 10, &rank1); });

  // Rank 0 by hand: a listener, a hello to the root, the table back.
  Socket listener;
  SockAddr mine;
  ASSERT_TRUE(listenOn("127.0.0.1", 0, 4, &listener, &mine).ok());
  uint8_t family = 0, raw[16] = {0};
  addressToRaw(mine, &family, raw);
  Info info{0, 0x1234567890abcdefull};
  const std::vector<uint8_t> hello = wire::frame(
      wire::kHelloMagic, wire::kTypeHello,
      wire::helloPayload(rootInfo.secret, 0, 2, sizeof(info), family, static_cast<uint16_t>(mine.port()), raw, &info));
  Socket root = rawConnect(id);
  ASSERT_TRUE(sendAll(root.fd(), hello.data(), hello.size(), deadlineAfter(5), nullptr, "root").ok());
  uint8_t header[wire::kFrameHeaderBytes];
  ASSERT_TRUE(recvAll(root.fd(), header, sizeof(header), deadlineAfter(10), nullptr, "root").ok());
  uint32_t type = 0;
  size_t bytes = 0;
  ASSERT_TRUE(wire::parseReplyHeader(header, 2, sizeof(info), "root", &type, &bytes).ok());
  ASSERT_EQ(type, wire::kTypeTable);
  std::vector<uint8_t> payload(bytes);
  ASSERT_TRUE(recvAll(root.fd(), payload.data(), bytes, deadlineAfter(5), nullptr, "root").ok());
  wire::Table table;
  ASSERT_TRUE(wire::parseTable(payload.data(), bytes, 2, sizeof(info), "root", &table).ok());

  // Strangers at rank 1's ring port: dropped.
  Secret wrong = rootInfo.secret;
  wrong.bytes[7] ^= 0x40;
  for (const std::vector<uint8_t>& auth : {wire::ringAuth(wrong, 0, 1, 2), wire::ringAuth(rootInfo.secret, 1, 1, 2)}) {
    Socket stranger;
    ASSERT_TRUE(connectTo(table.peers[1], deadlineAfter(5), nullptr, &stranger).ok());
    ASSERT_TRUE(sendAll(stranger.fd(), auth.data(), auth.size(), deadlineAfter(5), nullptr, "rank 1").ok());
    EXPECT_TRUE(closedByPeer(stranger));
  }
  // The real rank 0: rank 1 accepts it, and its own connection to us carries the secret.
  Socket next;
  ASSERT_TRUE(connectTo(table.peers[1], deadlineAfter(5), nullptr, &next).ok());
  const std::vector<uint8_t> auth = wire::ringAuth(rootInfo.secret, 0, 1, 2);
  ASSERT_TRUE(sendAll(next.fd(), auth.data(), auth.size(), deadlineAfter(5), nullptr, "rank 1").ok());
  Socket prev;
  SockAddr from;
  ASSERT_TRUE(acceptOne(listener, deadlineAfter(10), nullptr, &prev, &from).ok());
  uint8_t got[wire::kRingAuthBytes];
  ASSERT_TRUE(recvAll(prev.fd(), got, sizeof(got), deadlineAfter(5), nullptr, "rank 1").ok());
  EXPECT_TRUE(wire::checkRingAuth(got, rootInfo.secret, 1, 0, 2).ok());
  t.join();
  EXPECT_TRUE(rank1St.ok()) << rank1St.message();
}

TEST(Bootstrap, DuplicateRankIsRefused) {
  collieUniqueId id = startRoot(10);
  std::unique_ptr<Bootstrap> first;
  Status firstSt;
  std::thread t([&] { firstSt = createRank(id, 0, 2, 10, &first); });
  // Give rank 0's hello time to arrive (it is sent within milliseconds), then present rank 0 again.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::unique_ptr<Bootstrap> again;
  Status dup = createRank(id, 0, 2, 2, &again);
  EXPECT_EQ(dup.code(), collieInvalidUsage) << dup.message();
  EXPECT_NE(dup.message().find("already joined"), std::string::npos) << dup.message();
  std::unique_ptr<Bootstrap> second;
  Status secondSt = createRank(id, 1, 2, 10, &second);
  t.join();
  ASSERT_TRUE(firstSt.ok()) << firstSt.message();
  ASSERT_TRUE(secondSt.ok()) << secondSt.message();
}

TEST(Bootstrap, MissingRankTimesOut) {
  collieUniqueId id = startRoot(1.0);
  const auto start = Clock::now();
  std::vector<Status> results = runRanks({0, 2}, [&](int r) {
    std::unique_ptr<Bootstrap> b;
    return createRank(id, r, 3, 10, &b);
  });
  const double elapsed = since(start);
  for (const Status& st : results) {
    EXPECT_EQ(st.code(), collieTimeout) << st.message();
    EXPECT_NE(st.message().find("rank 1 of 3 never joined"), std::string::npos) << st.message();
  }
  EXPECT_LT(elapsed, 4.0);
  std::cout << "missing rank reported after " << elapsed << " s: " << results[0].message() << std::endl;
}

TEST(Bootstrap, UnreachableRootTimesOut) {
  // A port that was free a moment ago; nobody listens there now.
  Socket probe;
  SockAddr bound;
  ASSERT_TRUE(listenOn("127.0.0.1", 0, 1, &probe, &bound).ok());
  probe.close();
  UniqueIdInfo info;
  info.host = "127.0.0.1";
  info.port = bound.port();
  collieUniqueId id;
  encodeUniqueId(info, &id);
  const auto start = Clock::now();
  std::unique_ptr<Bootstrap> b;
  Status st = createRank(id, 0, 2, 0.5, &b);
  EXPECT_EQ(st.code(), collieTimeout) << st.message();
  EXPECT_NE(st.message().find(bound.toString()), std::string::npos) << st.message();
  EXPECT_LT(since(start), 3.0);
}

TEST(Bootstrap, OperationTimeoutAndAbortNameThePeer) {
  collieUniqueId id = startRoot(10);
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  std::vector<Status> results = runRanks(allRanks(2), [&](int r) { return createRank(id, r, 2, 10, &bs[r]); });
  for (const Status& st : results) ASSERT_TRUE(st.ok()) << st.message();

  // Rank 0 does not call: an abort from another thread ends rank 1's wait promptly, and later calls fail at once.
  bs[1]->setTimeout(30);
  const auto start = Clock::now();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    bs[1]->abort();
  });
  uint8_t data[2] = {1, 1};
  Status st = bs[1]->allGather(data, 1);
  aborter.join();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("abort"), std::string::npos) << st.message();
  EXPECT_LT(since(start), 2.0);
  EXPECT_EQ(bs[1]->barrier().code(), collieInvalidUsage);

  // Rank 1 is gone: rank 0 times out, naming rank 1.
  bs[0]->setTimeout(0.3);
  st = bs[0]->allGather(data, 1);
  EXPECT_EQ(st.code(), collieTimeout) << st.message();
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
}

TEST(Bootstrap, SizeMismatchIsInternalError) {
  collieUniqueId id = startRoot(10);
  std::vector<Status> results = runRanks(allRanks(2), [&](int r) {
    std::unique_ptr<Bootstrap> b;
    COLLIE_RETURN_IF_ERROR(createRank(id, r, 2, 10, &b));
    b->setTimeout(5);
    std::vector<uint8_t> data(2 * 16);
    return b->allGather(data.data(), r == 0 ? 8 : 16);
  });
  for (const Status& st : results) {
    EXPECT_EQ(st.code(), collieInternalError) << st.message();
    EXPECT_NE(st.message().find("disagree"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace collie
