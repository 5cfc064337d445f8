// Fuzz target user_text: the small parsers of what users write into the environment. The first
// byte picks one ((byte % 8) % 5, so '0'..'4' name them in a corpus file); the rest is the text:
//   0  COLLIE_SECRET: parseSecretHex (transport/bootstrap/bootstrap.h)
//   1  a collieUniqueId's 128 bytes (zero-padded): decodeUniqueId, as init reads a user's id
//   2  COLLIE_ROOT / NCCL_COMM_ID host:port: parseHostPort (transport/bootstrap/socket.h)
//   3  an integer variable (COLLIE_SLOTS, COLLIE_WORLD_SIZE, ...): env::parseInt (base/env.h)
//   4  a floating variable (COLLIE_TIMEOUT, ...): env::parseDouble
// Checks: each accepted value is within its bounds and survives being written out and read again.
#include <arpa/inet.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/env.h"
#include "tests/fuzz/fuzz_targets.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"

namespace collie {
namespace fuzz {

namespace {

void secretHex(const std::string& text) {
  Secret s;
  if (!parseSecretHex(text, &s)) return;
  COLLIE_FUZZ_CHECK(text.size() == 32, text);
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  COLLIE_FUZZ_CHECK(secretToHex(s) == lower, text);
}

void uniqueId(const std::string& text) {
  collieUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, text.data(), std::min(text.size(), sizeof(id.internal)));
  UniqueIdInfo info;
  Status st = decodeUniqueId(id, &info);
  COLLIE_FUZZ_CHECK(printable(st.message()), st.message());
  if (!st.ok()) return;
  COLLIE_FUZZ_CHECK(info.port >= 1 && info.port <= 65535, std::to_string(info.port));
  // The host is numeric (inet_ntop's), so encoding it again resolves nothing.
  uint8_t raw[16];
  COLLIE_FUZZ_CHECK(inet_pton(AF_INET, info.host.c_str(), raw) == 1 || inet_pton(AF_INET6, info.host.c_str(), raw) == 1,
                    info.host);
  collieUniqueId again;
  encodeUniqueId(info, &again);
  UniqueIdInfo back;
  Status st2 = decodeUniqueId(again, &back);
  COLLIE_FUZZ_CHECK(st2.ok() && back.host == info.host && back.port == info.port &&
                        memcmp(back.secret.bytes, info.secret.bytes, sizeof(info.secret.bytes)) == 0,
                    "unique id round trip: " + info.host + " " + st2.message());
  // Magic, version, family, port and the secret come back byte for byte; IPv4 uses 4 of the 16 address bytes.
  const uint8_t* a = reinterpret_cast<const uint8_t*>(id.internal);
  const uint8_t* b = reinterpret_cast<const uint8_t*>(again.internal);
  const size_t addrBytes = a[7] == 4 ? 4 : 16;
  COLLIE_FUZZ_CHECK(memcmp(a, b, 10 + addrBytes) == 0 && memcmp(a + 26, b + 26, 16) == 0, "unique id bytes");
}

void hostPort(const std::string& text) {
  std::string host;
  int port = 0;
  if (!parseHostPort(text, &host, &port)) return;
  COLLIE_FUZZ_CHECK(port >= 1 && port <= 65535 && !host.empty(), text);
  COLLIE_FUZZ_CHECK(text.find(host) != std::string::npos, text);
  if (host.front() == '[' && host.back() == ']') return;  // "[[x]]:1": brackets a second parse would strip
  const std::string written =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  std::string host2;
  int port2 = 0;
  COLLIE_FUZZ_CHECK(parseHostPort(written, &host2, &port2) && host2 == host && port2 == port, written);
}

void integer(const std::string& text) {
  int64_t v = 0;
  if (!env::parseInt(text, &v)) return;
  int64_t back = 0;
  COLLIE_FUZZ_CHECK(env::parseInt(std::to_string(v), &back) && back == v, text);
}

void number(const std::string& text) {
  double v = 0;
  if (!env::parseDouble(text, &v)) return;
  char buf[64];
  snprintf(buf, sizeof(buf), "%.17g", v);
  double back = 0;
  COLLIE_FUZZ_CHECK(env::parseDouble(buf, &back) && (back == v || (std::isnan(back) && std::isnan(v))), text);
}

}  // namespace

int userText(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch ((data[0] % 8) % 5) {
    case 0:
      secretHex(text);
      break;
    case 1:
      uniqueId(text);
      break;
    case 2:
      hostPort(text);
      break;
    case 3:
      integer(text);
      break;
    default:
      number(text);
      break;
  }
  return 0;
}

}  // namespace fuzz
}  // namespace collie
