// Fuzz target bootstrap_wire: every message of the bootstrap protocol a peer can send (wire.h).
// The first byte picks the message (mod 4), so '0'..'3' name them in a corpus file:
//   0  a frame to the root: header, then a hello payload (root side, before any authentication)
//   1  the root's reply to a rank: byte 1 -> nranks 1..8, byte 2 -> info bytes 0..31, header, payload
//   2  a ring authentication record: byte 1 -> (prev, rank, nranks) expected, then the 28-byte record
//   3  a ring message header: 24 bytes, then 16 bytes of the op, aux and length this rank expects
// The secret the root and ranks expect is kSecret below; seeds carry it so mutations reach past it.
#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_targets.h"
#include "transport/bootstrap/wire.h"

namespace collie {
namespace fuzz {

namespace {

const char kRoot[] = "the rendezvous root at 10.0.0.1:4000";

Secret fuzzSecret() {
  Secret s;
  memcpy(s.bytes, "collie-fuzz-key!", sizeof(s.bytes));
  return s;
}

void checkSentence(const Status& st) {
  COLLIE_FUZZ_CHECK(!st.ok() || st.message().empty(), "a success with a message");
  COLLIE_FUZZ_CHECK(printable(st.message()), "an unprintable error sentence: " + st.message());
}

void hello(const uint8_t* d, size_t n) {
  if (n < wire::kFrameHeaderBytes) return;
  const Secret secret = fuzzSecret();
  size_t len = 0;
  Status st = wire::parseHelloHeader(d, &len);
  checkSentence(st);
  const uint8_t* payload = d + wire::kFrameHeaderBytes;
  const size_t have = n - wire::kFrameHeaderBytes;
  // The root reads exactly the announced length; a direct caller may pass any, so try both.
  for (size_t pass = 0; pass < 2; ++pass) {
    size_t plen = have;
    if (pass == 0) {
      if (!st.ok()) continue;
      COLLIE_FUZZ_CHECK(len >= wire::kHelloFixedBytes && len <= wire::kHelloFixedBytes + wire::kMaxInfoBytes,
                        std::to_string(len));
      if (have < len) continue;
      plen = len;
    }
    wire::Hello h;
    bool authenticated = false;
    Status hs = wire::parseHello(payload, plen, secret, &h, &authenticated);
    checkSentence(hs);
    COLLIE_FUZZ_CHECK(!hs.ok() || authenticated, "accepted without the secret");
    if (!hs.ok()) continue;
    COLLIE_FUZZ_CHECK(h.nranks >= 1 && h.nranks <= static_cast<uint32_t>(wire::kMaxRanks), "nranks out of bounds");
    COLLIE_FUZZ_CHECK(h.rank < h.nranks, "rank out of bounds");
    COLLIE_FUZZ_CHECK(h.infoBytes <= wire::kMaxInfoBytes && plen == wire::kHelloFixedBytes + h.infoBytes,
                      "info block does not fill the hello");
    COLLIE_FUZZ_CHECK(uint64_t{h.nranks} * (wire::kAddrEntryBytes + h.infoBytes) + 8 <= wire::kMaxTableBytes,
                      "table over its bound");
    COLLIE_FUZZ_CHECK(h.info == payload + wire::kHelloFixedBytes, "info outside the payload");
    const uint16_t family = getBe16(h.listenRaw), port = getBe16(h.listenRaw + 2);
    COLLIE_FUZZ_CHECK(h.nranks == 1 || ((family == 4 || family == 6) && port != 0), "unusable listen address");
    // Built again from what was parsed, the hello is the same bytes.
    std::vector<uint8_t> again = wire::helloPayload(secret, static_cast<int>(h.rank), static_cast<int>(h.nranks),
                                                    h.infoBytes, family, port, h.listenRaw + 4, h.info);
    COLLIE_FUZZ_CHECK(again.size() == plen && memcmp(again.data(), payload, plen) == 0, "hello round trip");
  }
}

void checkTable(const uint8_t* payload, size_t len, int nranks, size_t infoBytes) {
  wire::Table t;
  Status st = wire::parseTable(payload, len, nranks, infoBytes, kRoot, &t);
  checkSentence(st);
  if (!st.ok()) return;
  COLLIE_FUZZ_CHECK(len == 8 + static_cast<size_t>(nranks) * (wire::kAddrEntryBytes + infoBytes), "table size");
  COLLIE_FUZZ_CHECK(t.peers.size() == static_cast<size_t>(nranks), "peer count");
  COLLIE_FUZZ_CHECK(t.infos.size() == static_cast<size_t>(nranks) * infoBytes, "info size");
  const uint8_t* p = payload + 8;
  for (int r = 0; r < nranks; ++r, p += wire::kAddrEntryBytes + infoBytes) {
    COLLIE_FUZZ_CHECK(infoBytes == 0 || memcmp(t.infos.data() + r * infoBytes, p + 20, infoBytes) == 0, "info copy");
    if (nranks == 1) continue;
    const SockAddr& a = t.peers[r];
    COLLIE_FUZZ_CHECK(a.family() == AF_INET || a.family() == AF_INET6, "family");
    COLLIE_FUZZ_CHECK(a.port() >= 1 && a.port() <= 65535 && a.port() == getBe16(p + 2), "port");
    // The address goes back to the very bytes it came from (IPv4: the first 4 of 16).
    uint8_t family = 0, raw[16];
    addressToRaw(a, &family, raw);
    COLLIE_FUZZ_CHECK(getBe16(p) == family, "family field " + std::to_string(getBe16(p)));
    COLLIE_FUZZ_CHECK(memcmp(raw, p + 4, family == 4 ? 4 : 16) == 0, "address bytes");
  }
}

void reply(const uint8_t* d, size_t n) {
  if (n < 2 + wire::kFrameHeaderBytes) return;
  const int nranks = 1 + d[0] % 8;
  const size_t infoBytes = d[1] % 32;
  d += 2;
  n -= 2;
  uint32_t type = 0;
  size_t len = 0;
  Status st = wire::parseReplyHeader(d, nranks, infoBytes, kRoot, &type, &len);
  checkSentence(st);
  const uint8_t* payload = d + wire::kFrameHeaderBytes;
  const size_t have = n - wire::kFrameHeaderBytes;
  if (st.ok()) {
    COLLIE_FUZZ_CHECK(type == wire::kTypeTable || type == wire::kTypeError, "type");
    if (type == wire::kTypeError) {
      COLLIE_FUZZ_CHECK(len >= 4 && len <= 4 + wire::kMaxErrorText, "error length");
      if (have >= len) {
        Status e = wire::parseErrorReply(payload, len, kRoot);
        COLLIE_FUZZ_CHECK(!e.ok() && e.code() < collieNumResults, "an error reply must fail with a known code");
        checkSentence(e);
      }
    } else {
      COLLIE_FUZZ_CHECK(len == 8 + static_cast<size_t>(nranks) * (wire::kAddrEntryBytes + infoBytes), "table length");
      if (have >= len) checkTable(payload, len, nranks, infoBytes);
    }
  }
  // Straight to the payload parsers too, with whatever length there is.
  checkTable(payload, have, nranks, infoBytes);
  Status e = wire::parseErrorReply(payload, have, kRoot);
  COLLIE_FUZZ_CHECK(!e.ok(), "an error reply parsed as success");
  checkSentence(e);
}

void ringAuth(const uint8_t* d, size_t n) {
  if (n < 1 + wire::kRingAuthBytes) return;
  const int nranks = 1 + d[0] % 8;
  const int rank = (d[0] / 8) % nranks;
  const int prev = (rank + nranks - 1) % nranks;
  const Secret secret = fuzzSecret();
  Status st = wire::checkRingAuth(d + 1, secret, prev, rank, nranks);
  checkSentence(st);
  const std::vector<uint8_t> want = wire::ringAuth(secret, prev, rank, nranks);
  COLLIE_FUZZ_CHECK(st.ok() == (memcmp(want.data(), d + 1, want.size()) == 0), "accepted other than the one record");
  COLLIE_FUZZ_CHECK(wire::checkRingAuth(want.data(), secret, prev, rank, nranks).ok(), "own record refused");
}

void ringHeader(const uint8_t* d, size_t n) {
  if (n < wire::kRingHeaderBytes + 16) return;
  const uint8_t* x = d + wire::kRingHeaderBytes;
  const uint32_t op = getBe32(x), aux = getBe32(x + 4);
  const uint64_t length = getBe64(x + 8);
  Status st = wire::checkRingHeader(d, op, aux, length, "rank 3 (10.0.0.2:5000)");
  checkSentence(st);
  uint8_t want[wire::kRingHeaderBytes];
  wire::ringHeader(want, op, aux, length);
  // Accepted exactly when it is the header this rank sends, whatever the 4 reserved bytes hold.
  const bool same = memcmp(want, d, 12) == 0 && memcmp(want + 16, d + 16, 8) == 0;
  COLLIE_FUZZ_CHECK(st.ok() == same, "accepted a different header, or refused the same one");
  COLLIE_FUZZ_CHECK(wire::checkRingHeader(want, op, aux, length, "x").ok(), "own header refused");
  // Against the fields it carries itself, only the magic can fail.
  Status self = wire::checkRingHeader(d, getBe32(d + 4), getBe32(d + 8), getBe64(d + 16), "x");
  COLLIE_FUZZ_CHECK(self.ok() == (getBe32(d) == wire::kRingMsgMagic), "magic");
}

}  // namespace

int bootstrapWire(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  switch (data[0] % 4) {
    case 0:
      hello(data + 1, size - 1);
      break;
    case 1:
      reply(data + 1, size - 1);
      break;
    case 2:
      ringAuth(data + 1, size - 1);
      break;
    default:
      ringHeader(data + 1, size - 1);
      break;
  }
  return 0;
}

}  // namespace fuzz
}  // namespace collie
