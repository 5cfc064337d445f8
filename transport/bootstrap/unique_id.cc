// The wire form of a collieUniqueId and the communicator secret it carries.
//
// Layout of the 128 bytes (multi-byte fields big-endian, so ids travel between
// hosts of any byte order):
//   0  u32 magic 'COLL'      4  u16 version        6  u16 family (4 or 6)
//   8  u16 port             10  16 address bytes   26  16 secret bytes
//   42 zero up to 128
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"

namespace collie {

namespace {

constexpr uint32_t kIdMagic = 0x434f4c4c;  // "COLL"
constexpr uint16_t kIdVersion = 1;
// Offsets of the fields decode reads; encode writes them in this order.
constexpr size_t kOffMagic = 0, kOffVersion = 4, kOffFamily = 6, kOffPort = 8, kOffAddr = 10, kOffSecret = 26;

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Status randomSecret(Secret* secret) {
  uint8_t* p = secret->bytes;
  size_t left = sizeof(secret->bytes);
  while (left > 0) {
    ssize_t k = getrandom(p, left, 0);
    if (k > 0) {
      p += k;
      left -= static_cast<size_t>(k);
      continue;
    }
    if (k == -1 && errno == EINTR) continue;
    if (k == -1 && errno != ENOSYS) return systemError("getrandom()", errno, __FILE__, __LINE__);
    // Kernels older than 3.17 lack getrandom.
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd == -1) return systemError("open(/dev/urandom)", errno, __FILE__, __LINE__);
    while (left > 0) {
      ssize_t r = read(fd, p, left);
      if (r == -1 && errno == EINTR) continue;
      if (r <= 0) {
        int err = r == 0 ? EIO : errno;
        close(fd);
        return systemError("read(/dev/urandom)", err, __FILE__, __LINE__);
      }
      p += r;
      left -= static_cast<size_t>(r);
    }
    close(fd);
  }
  return Status();
}

bool parseSecretHex(const std::string& hex, Secret* secret) {
  if (hex.size() != 2 * sizeof(secret->bytes)) return false;
  Secret s{};
  for (size_t i = 0; i < sizeof(s.bytes); ++i) {
    int hi = hexValue(hex[2 * i]);
    int lo = hexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    s.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  *secret = s;
  return true;
}

std::string secretToHex(const Secret& secret) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof(secret.bytes));
  for (uint8_t b : secret.bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

void encodeUniqueId(const UniqueIdInfo& info, collieUniqueId* id) {
  uint8_t family = 0;
  uint8_t raw[16] = {0};
  SockAddr addr;
  if (resolveAddress(info.host, info.port, &addr).ok()) {
    addressToRaw(addr, &family, raw);
  } else {
    // Family 0 makes decode reject the id with a sentence, instead of failing here silently.
    COLLIE_WARN("unique id: '%s' is not a numeric IPv4/IPv6 address", info.host.c_str());
  }
  std::vector<uint8_t> buf;
  putBe32(&buf, kIdMagic);
  putBe16(&buf, kIdVersion);
  putBe16(&buf, family);
  putBe16(&buf, static_cast<uint16_t>(info.port));
  putBytes(&buf, raw, sizeof(raw));
  putBytes(&buf, info.secret.bytes, sizeof(info.secret.bytes));
  buf.resize(COLLIE_UNIQUE_ID_BYTES, 0);
  memcpy(id->internal, buf.data(), buf.size());
}

Status decodeUniqueId(const collieUniqueId& id, UniqueIdInfo* info) {
  const uint8_t* buf = reinterpret_cast<const uint8_t*>(id.internal);
  uint32_t magic = getBe32(buf + kOffMagic);
  if (magic != kIdMagic) {
    return Status::error(collieInvalidArgument,
                         "the unique id is not a Collie unique id (magic 0x%08x, expected 0x%08x); was it made by "
                         "collieGetUniqueId and passed on unchanged?",
                         magic, kIdMagic);
  }
  uint16_t version = getBe16(buf + kOffVersion);
  if (version != kIdVersion) {
    return Status::error(collieInvalidArgument,
                         "the unique id has version %u but this Collie reads version %u; are all ranks running the "
                         "same Collie build?",
                         version, kIdVersion);
  }
  uint16_t family = getBe16(buf + kOffFamily);
  if (family != 4 && family != 6) {
    return Status::error(collieInvalidArgument, "the unique id names address family %u, which is neither 4 nor 6",
                         family);
  }
  uint16_t port = getBe16(buf + kOffPort);
  if (port == 0) return Status::error(collieInvalidArgument, "the unique id names port 0, which cannot be reached");
  SockAddr addr;
  COLLIE_RETURN_IF_ERROR(addressFromRaw(static_cast<uint8_t>(family), buf + kOffAddr, port, &addr)
                             .withContext("the unique id is malformed"));
  info->host = addr.host();
  info->port = port;
  memcpy(info->secret.bytes, buf + kOffSecret, sizeof(info->secret.bytes));
  return Status();
}

}  // namespace collie
