// The parsers and builders of the bootstrap's messages (see wire.h). Everything here is pure:
// the socket code in bootstrap.cc and bootstrap_root.cc reads the bytes, these functions judge them.
#include "transport/bootstrap/wire.h"

#include <cstdio>
#include <cstring>

namespace collie {
namespace wire {

const char* opName(uint32_t op) {
  static const char* const kNames[] = {"an unknown operation", "allGather", "broadcast", "barrier", "a direct message"};
  return op <= kOpDirect ? kNames[op] : kNames[0];
}

// ---------------------------------------------------------------- root side: the hello

std::vector<uint8_t> helloPayload(const Secret& secret, int rank, int nranks, size_t infoBytes, uint16_t family,
                                  uint16_t port, const uint8_t raw[16], const void* info) {
  std::vector<uint8_t> hello;
  hello.reserve(kHelloFixedBytes + infoBytes);
  putBytes(&hello, secret.bytes, sizeof(secret.bytes));
  putBe32(&hello, static_cast<uint32_t>(rank));
  putBe32(&hello, static_cast<uint32_t>(nranks));
  putBe32(&hello, static_cast<uint32_t>(infoBytes));
  putBe16(&hello, family);
  putBe16(&hello, port);
  putBytes(&hello, raw, 16);
  putBytes(&hello, info, infoBytes);
  return hello;
}

Status parseHelloHeader(const uint8_t header[kFrameHeaderBytes], size_t* payloadBytes) {
  const uint32_t magic = getBe32(header);
  const uint32_t type = getBe32(header + 4);
  const uint32_t len = getBe32(header + 8);
  if (magic != kHelloMagic || type != kTypeHello) {
    return Status::error(collieRemoteError,
                         "it is not speaking the Collie bootstrap protocol (first bytes %02x %02x %02x %02x)",
                         header[0], header[1], header[2], header[3]);
  }
  if (len < kHelloFixedBytes || len > kHelloFixedBytes + kMaxInfoBytes) {
    return Status::error(collieRemoteError, "it announced a %u-byte hello; a hello has %zu to %zu bytes", len,
                         kHelloFixedBytes, kHelloFixedBytes + kMaxInfoBytes);
  }
  *payloadBytes = len;
  return Status();
}

Status parseHello(const uint8_t* h, size_t len, const Secret& secret, Hello* out, bool* authenticated) {
  *authenticated = false;
  // The socket code reads no fewer bytes than parseHelloHeader allowed; a direct caller may pass any.
  if (len < kHelloFixedBytes) {
    return Status::error(collieRemoteError, "a %zu-byte hello is shorter than the %zu bytes of its fixed part", len,
                         kHelloFixedBytes);
  }
  if (!secretEquals(h, secret.bytes)) {
    return Status::error(collieRemoteError, "wrong secret (a rank of another communicator, or a stranger)");
  }
  *authenticated = true;
  const uint32_t rank = getBe32(h + 16);
  const uint32_t nranks = getBe32(h + 20);
  const uint32_t infoBytes = getBe32(h + 24);
  const uint8_t* listenRaw = h + 28;
  if (nranks < 1 || nranks > static_cast<uint32_t>(kMaxRanks)) {
    return Status::error(collieInvalidArgument, "nranks %u is not in 1..%d", nranks, kMaxRanks);
  }
  if (rank >= nranks) return Status::error(collieInvalidArgument, "rank %u is not in 0..%u", rank, nranks - 1);
  if (infoBytes > kMaxInfoBytes || len != kHelloFixedBytes + infoBytes) {
    return Status::error(collieInvalidArgument, "the hello of rank %u is %zu bytes but announces a %u-byte info block",
                         rank, len, infoBytes);
  }
  if (static_cast<uint64_t>(nranks) * (kAddrEntryBytes + infoBytes) + 8 > kMaxTableBytes) {
    return Status::error(collieInvalidArgument, "%u ranks with %u-byte info blocks exceed the %zu-byte table limit",
                         nranks, infoBytes, kMaxTableBytes);
  }
  const uint16_t family = getBe16(listenRaw);
  const uint16_t port = getBe16(listenRaw + 2);
  if (nranks > 1 && ((family != 4 && family != 6) || port == 0)) {
    return Status::error(collieInvalidArgument, "rank %u announced an unusable listen address (family %u, port %u)",
                         rank, family, port);
  }
  out->rank = rank;
  out->nranks = nranks;
  out->infoBytes = infoBytes;
  memcpy(out->listenRaw, listenRaw, kAddrEntryBytes);
  out->info = h + kHelloFixedBytes;
  return Status();
}

// ---------------------------------------------------------------- rank side: the root's reply

Status parseReplyHeader(const uint8_t header[kFrameHeaderBytes], int nranks, size_t infoBytes, const std::string& root,
                        uint32_t* type, size_t* payloadBytes) {
  const uint32_t t = getBe32(header + 4);
  const uint32_t len = getBe32(header + 8);
  const size_t tableBytes = 8 + static_cast<size_t>(nranks) * (kAddrEntryBytes + infoBytes);
  if (getBe32(header) != kReplyMagic || (t != kTypeTable && t != kTypeError) ||
      (t == kTypeError && (len < 4 || len > 4 + kMaxErrorText)) || (t == kTypeTable && len != tableBytes)) {
    return Status::error(collieInternalError,
                         "%s sent a malformed reply (type %u, %u bytes; expected a %zu-byte table); does it run the "
                         "same Collie version?",
                         root.c_str(), t, len, tableBytes);
  }
  *type = t;
  *payloadBytes = len;
  return Status();
}

Status parseErrorReply(const uint8_t* payload, size_t len, const std::string& root) {
  if (len < 4) return Status::error(collieInternalError, "%s sent an error reply of %zu bytes", root.c_str(), len);
  uint32_t code = getBe32(payload);
  if (code == collieSuccess || code >= collieNumResults) code = collieInternalError;
  // The root is not authenticated to the rank, so its text may be anything: it ends up in logs and in
  // collieGetLastError, where control characters (a newline, a terminal escape) would forge lines.
  std::string text;
  text.reserve(len - 4);
  for (size_t i = 4; i < len; ++i)
    text += (payload[i] >= 0x20 && payload[i] < 0x7f) ? static_cast<char>(payload[i]) : '?';
  return Status::error(static_cast<collieResult_t>(code), "rendezvous failed: %s (reported by %s)", text.c_str(),
                       root.c_str());
}

Status parseTable(const uint8_t* payload, size_t len, int nranks, size_t infoBytes, const std::string& root,
                  Table* out) {
  if (nranks < 1 || nranks > kMaxRanks || infoBytes > kMaxInfoBytes) {
    return Status::error(collieInvalidArgument, "a table of %d ranks with %zu-byte info blocks is out of bounds",
                         nranks, infoBytes);
  }
  // parseReplyHeader admitted only this size; checked again for a direct caller.
  const size_t entryBytes = kAddrEntryBytes + infoBytes;
  if (len != 8 + static_cast<size_t>(nranks) * entryBytes) {
    return Status::error(collieInternalError, "%s sent a %zu-byte table; expected %zu bytes", root.c_str(), len,
                         8 + static_cast<size_t>(nranks) * entryBytes);
  }
  if (getBe32(payload) != static_cast<uint32_t>(nranks) || getBe32(payload + 4) != static_cast<uint32_t>(infoBytes)) {
    return Status::error(collieInternalError,
                         "%s sent a table for %u ranks with %u-byte info blocks; this rank expected %d and %zu",
                         root.c_str(), getBe32(payload), getBe32(payload + 4), nranks, infoBytes);
  }
  Table t;
  t.infos.resize(static_cast<size_t>(nranks) * infoBytes);
  t.peers.resize(nranks);
  const uint8_t* p = payload + 8;
  for (int r = 0; r < nranks; ++r, p += entryBytes) {
    if (nranks > 1) {
      // The field is 16 bits: judged whole, so that 0x0104 is not taken for family 4.
      const uint16_t family = getBe16(p);
      Status st =
          family == 4 || family == 6
              ? addressFromRaw(static_cast<uint8_t>(family), p + 4, getBe16(p + 2), &t.peers[r])
              : Status::error(collieInvalidArgument, "address family %u is neither 4 (IPv4) nor 6 (IPv6)", family);
      COLLIE_RETURN_IF_ERROR(
          st.withContext("the table from " + root + " has a bad address for rank " + std::to_string(r)));
    }
    if (infoBytes > 0) memcpy(t.infos.data() + static_cast<size_t>(r) * infoBytes, p + kAddrEntryBytes, infoBytes);
  }
  *out = std::move(t);
  return Status();
}

// ---------------------------------------------------------------- the ring

std::vector<uint8_t> ringAuth(const Secret& secret, int from, int to, int nranks) {
  std::vector<uint8_t> out;
  putBe32(&out, kRingAuthMagic);
  putBytes(&out, secret.bytes, sizeof(secret.bytes));
  putBe32(&out, static_cast<uint32_t>(from));
  putBe32(&out, static_cast<uint32_t>(to));
  putBe32(&out, static_cast<uint32_t>(nranks));
  return out;
}

Status checkRingAuth(const uint8_t got[kRingAuthBytes], const Secret& secret, int prev, int rank, int nranks) {
  if (getBe32(got) != kRingAuthMagic || !secretEquals(got + 4, secret.bytes)) {
    return Status::error(collieRemoteError, "it did not present this communicator's secret");
  }
  const uint32_t from = getBe32(got + 20), to = getBe32(got + 24), n = getBe32(got + 28);
  if (from != static_cast<uint32_t>(prev) || to != static_cast<uint32_t>(rank) || n != static_cast<uint32_t>(nranks)) {
    return Status::error(collieRemoteError,
                         "it claims to be rank %u of %u connecting to rank %u, but rank %d of %d was expected", from, n,
                         to, prev, nranks);
  }
  return Status();
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
    const char* what = op == kOpBroadcast ? "root" : op == kOpDirect ? "tag" : "step";
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

}  // namespace wire
}  // namespace collie
