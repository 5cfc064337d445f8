// Fuzz target traffic: collie-bench's all-to-all-v traffic (bench/traffic.h). The first byte picks
// the parser (mod 2, so '0' and '1' name them in a corpus file):
//   0  the --traffic spec ("zipf:1.2", "moe:4096,2,8"): byte 1 -> nranks 1..8, byte 2 -> row
//      elements, the rest is the spec
//   1  a count file (file:PATH's content): byte 1 -> nranks 1..16, the rest is the file
// Checks: accepted parameters are within their documented bounds; describe() parses back to the
// same spec; a small generated matrix holds exactly the elements asked for; a count file gives
// nranks x nranks counts whose rows and columns stay under kMaxTrafficElems, and reads back the same
// when written out again.
#include <string>
#include <vector>

#include "bench/traffic.h"
#include "tests/fuzz/fuzz_targets.h"

namespace collie {
namespace fuzz {

namespace {

using bench::Traffic;

void spec(const uint8_t* d, size_t n) {
  if (n < 2) return;
  const int nranks = 1 + d[0] % 8;
  const size_t rowElems = d[1];
  const std::string text(reinterpret_cast<const char*>(d + 2), n - 2);
  Traffic t;
  std::string err;
  if (!bench::parseTraffic(text, &t, &err)) {
    COLLIE_FUZZ_CHECK(!err.empty(), "a refusal without a reason");
    return;
  }
  switch (t.kind) {
    case Traffic::Kind::kZipf:
      COLLIE_FUZZ_CHECK(t.zipfS >= 0 && t.zipfS <= 16, text);
      break;
    case Traffic::Kind::kMoe:
      COLLIE_FUZZ_CHECK(t.tokens >= 1 && t.tokens <= 10000000 && t.topk >= 1 && t.experts >= 0 &&
                            t.experts <= 1000000 && (t.experts == 0 || t.topk <= t.experts),
                        text);
      break;
    case Traffic::Kind::kFile:
      COLLIE_FUZZ_CHECK(!t.path.empty(), text);
      break;
    default:
      break;
  }
  const std::string described = t.describe(nranks);
  Traffic again;
  COLLIE_FUZZ_CHECK(bench::parseTraffic(described, &again, &err), "describe() does not parse: " + described);
  COLLIE_FUZZ_CHECK(again.kind == t.kind && again.describe(nranks) == described, described);
  if (t.fromFile()) return;
  // The generator's work grows with tokens x topk (and, drawing distinct experts, with topk^2): keep it small.
  if (t.kind == Traffic::Kind::kMoe && (static_cast<int64_t>(t.tokens) * t.topk > 4096 || t.experts > 64)) return;
  const std::vector<size_t> m = bench::trafficMatrix(t, nranks, rowElems, 1234);
  COLLIE_FUZZ_CHECK(m.size() == static_cast<size_t>(nranks) * nranks, "matrix size");
  size_t sum = 0;
  for (size_t v : m) sum += v;
  COLLIE_FUZZ_CHECK(sum == rowElems * nranks, "matrix holds " + std::to_string(sum) + " elements, not " +
                                                  std::to_string(rowElems * nranks) + ", for " + described);
}

void counts(const uint8_t* d, size_t n) {
  if (n < 1) return;
  const int nranks = 1 + d[0] % 16;
  const std::string text(reinterpret_cast<const char*>(d + 1), n - 1);
  std::vector<size_t> c;
  std::string err;
  if (!bench::parseTrafficCounts(text, "fuzz.txt", nranks, &c, &err)) {
    COLLIE_FUZZ_CHECK(!err.empty(), "a refusal without a reason");
    return;
  }
  COLLIE_FUZZ_CHECK(c.size() == static_cast<size_t>(nranks) * nranks, "count matrix size");
  std::string written;
  for (int s = 0; s < nranks; ++s) {
    uint64_t row = 0, col = 0;
    for (int r = 0; r < nranks; ++r) {
      row += c[s * nranks + r];
      col += c[r * nranks + s];
      written += std::to_string(c[s * nranks + r]) + (r + 1 < nranks ? " " : "\n");
    }
    COLLIE_FUZZ_CHECK(row <= bench::kMaxTrafficElems && col <= bench::kMaxTrafficElems, "row or column over bound");
  }
  std::vector<size_t> reread;
  COLLIE_FUZZ_CHECK(bench::parseTrafficCounts(written, "written", nranks, &reread, &err) && reread == c,
                    "written out, the counts do not read back: " + err);
}

}  // namespace

int traffic(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0)
    spec(data + 1, size - 1);
  else
    counts(data + 1, size - 1);
  return 0;
}

}  // namespace fuzz
}  // namespace collie
