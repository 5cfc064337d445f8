// The bootstrap wire format, shared by the rendezvous root (bootstrap_root.cc) and the ranks
// (bootstrap.cc): magics, message types, sizes and bounds, and the helpers that build frames.
// Internal to the bootstrap; not installed.
//
// Wire formats (all integers big-endian):
//   root protocol frame: u32 magic, u32 type, u32 payload length, payload
//     hello  (rank -> root): secret[16] u32 rank u32 nranks u32 infoBytes u16 family u16 port addr[16] info
//     table  (root -> rank): u32 nranks u32 infoBytes, per rank: u16 family u16 port addr[16] info
//     error  (root -> rank): u32 result code, text
//   ring authentication (rank -> next): u32 magic secret[16] u32 from u32 to u32 nranks
//   ring message: u32 magic u32 op u32 aux u32 reserved u64 length, payload
// Every length is checked against a bound before anything is allocated for it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

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
inline constexpr uint32_t kOpAllGather = 1, kOpBroadcast = 2, kOpBarrier = 3;

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

}  // namespace wire
}  // namespace collie
