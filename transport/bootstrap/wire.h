// The bootstrap wire format, shared by the rendezvous root (bootstrap_root.cc) and the ranks
// (bootstrap.cc): magics, message types, sizes and bounds, the helpers that build frames, and the
// parsers of every message either side receives. Internal to the bootstrap; not installed.
//
// Wire formats (all integers big-endian):
//   root protocol frame: u32 magic, u32 type, u32 payload length, payload
//     hello  (rank -> root): secret[16] u32 rank u32 nranks u32 infoBytes u16 family u16 port addr[16] info
//     table  (root -> rank): u32 nranks u32 infoBytes, per rank: u16 family u16 port addr[16] info
//     error  (root -> rank): u32 result code, text
//   ring authentication (rank -> next): u32 magic secret[16] u32 from u32 to u32 nranks
//   ring message: u32 magic u32 op u32 aux u32 reserved u64 length, payload
// Every length is checked against a bound before anything is allocated for it.
//
// The parsers are pure (bytes in, parsed struct or Status out) so that the socket code and the
// fuzz targets in tests/fuzz run the very same checks on what a peer sent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "collie.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"

namespace collie {
namespace wire {

inline constexpr uint32_t kHelloMagic = 0x434c4248;     // "CLBH"
inline constexpr uint32_t kReplyMagic = 0x434c4252;     // "CLBR"
inline constexpr uint32_t kRingAuthMagic = 0x434c4241;  // "CLBA"
inline constexpr uint32_t kRingMsgMagic = 0x434c424d;   // "CLBM"
inline constexpr uint32_t kTypeHello = 1, kTypeTable = 2, kTypeError = 3;
inline constexpr uint32_t kOpAllGather = 1, kOpBroadcast = 2, kOpBarrier = 3, kOpDirect = 4;

inline constexpr size_t kFrameHeaderBytes = 12;
inline constexpr size_t kHelloFixedBytes = 16 + 4 + 4 + 4 + 2 + 2 + 16;
inline constexpr size_t kAddrEntryBytes = 2 + 2 + 16;
inline constexpr size_t kRingAuthBytes = 4 + 16 + 4 + 4 + 4;
inline constexpr size_t kRingHeaderBytes = 24;
inline constexpr size_t kMaxInfoBytes = 64 * 1024;
inline constexpr size_t kMaxTableBytes = size_t{1} << 30;
inline constexpr int kMaxRanks = 1 << 20;
inline constexpr size_t kMaxErrorText = 4096;

// Compares without an early exit, so timing does not reveal how much of a guessed secret was right.
inline bool secretEquals(const uint8_t* a, const uint8_t* b) {
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < sizeof(Secret::bytes); ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

inline std::vector<uint8_t> frame(uint32_t magic, uint32_t type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  out.reserve(kFrameHeaderBytes + payload.size());
  putBe32(&out, magic);
  putBe32(&out, type);
  putBe32(&out, static_cast<uint32_t>(payload.size()));
  putBytes(&out, payload.data(), payload.size());
  return out;
}

inline std::vector<uint8_t> errorFrame(collieResult_t code, const std::string& text) {
  std::vector<uint8_t> payload;
  putBe32(&payload, static_cast<uint32_t>(code));
  putBytes(&payload, text.data(), std::min(text.size(), kMaxErrorText));
  return frame(kReplyMagic, kTypeError, payload);
}

/// "an unknown operation", "allGather", "broadcast" or "barrier", for error sentences.
const char* opName(uint32_t op);

// ---------------------------------------------------------------- root side: the hello

/// A hello as the root reads it; `info` points into the parsed payload.
struct Hello {
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint32_t infoBytes = 0;
  uint8_t listenRaw[kAddrEntryBytes] = {0};  // family, port, address as they go into the table
  const uint8_t* info = nullptr;
};

/// The payload of a rank's hello (without the frame header).
std::vector<uint8_t> helloPayload(const Secret& secret, int rank, int nranks, size_t infoBytes, uint16_t family,
                                  uint16_t port, const uint8_t raw[16], const void* info);

/// Checks the frame header of a hello and gives the payload length that follows (bounded by
/// kHelloFixedBytes + kMaxInfoBytes). An error's message is the reason to drop the connection.
Status parseHelloHeader(const uint8_t header[kFrameHeaderBytes], size_t* payloadBytes);

/// Parses a hello payload. A payload without `secret` leaves *authenticated false (drop the connection
/// silently: a stranger); otherwise *authenticated is true and an error is a wrong argument of a real
/// rank, to be sent back to it. Checks only the hello itself, not its agreement with other ranks.
Status parseHello(const uint8_t* payload, size_t len, const Secret& secret, Hello* out, bool* authenticated);

// ---------------------------------------------------------------- rank side: the root's reply

/// Checks the frame header of the root's reply against the table this rank of `nranks` with
/// `infoBytes`-byte info blocks expects: *type is kTypeTable or kTypeError and *payloadBytes its
/// length (a table's exact size, or an error of at most 4 + kMaxErrorText bytes). `root` names the
/// root in error sentences.
Status parseReplyHeader(const uint8_t header[kFrameHeaderBytes], int nranks, size_t infoBytes, const std::string& root,
                        uint32_t* type, size_t* payloadBytes);

/// The failure an error reply reports: its code (collieInternalError when not a failure code) and
/// its text, with bytes that are not printable ASCII shown as '?'.
Status parseErrorReply(const uint8_t* payload, size_t len, const std::string& root);

/// The address table as one rank reads it.
struct Table {
  std::vector<SockAddr> peers;  // every rank's listen address (left empty for one rank)
  std::vector<uint8_t> infos;   // nranks blocks of infoBytes
};

/// Parses the table payload for `nranks` ranks with `infoBytes`-byte info blocks.
Status parseTable(const uint8_t* payload, size_t len, int nranks, size_t infoBytes, const std::string& root,
                  Table* out);

// ---------------------------------------------------------------- the ring

/// The record a rank sends first on its connection to the next rank.
std::vector<uint8_t> ringAuth(const Secret& secret, int from, int to, int nranks);
/// Accepts a ring connection's record only when it carries `secret` and says it is rank `prev` of
/// `nranks` connecting to `rank`; an error's message is the reason to drop the connection.
Status checkRingAuth(const uint8_t got[kRingAuthBytes], const Secret& secret, int prev, int rank, int nranks);

/// The header in front of every ring message.
void ringHeader(uint8_t out[kRingHeaderBytes], uint32_t op, uint32_t aux, uint64_t length);
/// A mismatch with what this rank runs (op, aux, length) means the ranks called different operations
/// or sizes, i.e. a bug above us: collieInternalError naming `peer`.
Status checkRingHeader(const uint8_t h[kRingHeaderBytes], uint32_t op, uint32_t aux, uint64_t length,
                       const std::string& peer);

}  // namespace wire
}  // namespace collie
