// --summary: a few lines after the table for a reader who does not want its columns. The sizes fall in three
// ranges (latency-bound, in between, bandwidth-bound); per range it gives how Collie's time compares with each
// baseline's (geometric mean of the per-size ratios, so that no one size dominates) and how close Collie's busbw
// comes to the memory-copy limit measured in the same run (for small calls, their time instead). Out-of-place figures
// only: in-place ones follow them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/report.h"

namespace collie {
namespace bench {

namespace {

struct SizeRange {
  const char* name;
  size_t lo, hi;      // bytes, [lo, hi)
  bool latencyBound;  // a call's time says more than its bandwidth
};

constexpr SizeRange kRanges[] = {
    {"small  (< 64 KiB)", 0, size_t{64} << 10, true},
    {"medium (64 KiB - 4 MiB)", size_t{64} << 10, size_t{4} << 20, false},
    {"large  (>= 4 MiB)", size_t{4} << 20, SIZE_MAX, false},
};

std::string sizeText(size_t b) {
  char buf[32];
  if (b >= (size_t{1} << 30) && b % (size_t{1} << 30) == 0) {
    snprintf(buf, sizeof(buf), "%zu GiB", b >> 30);
  } else if (b >= (size_t{1} << 20) && b % (size_t{1} << 20) == 0) {
    snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  } else {
    snprintf(buf, sizeof(buf), "%zu B", b);
  }
  return buf;
}

// "1.8x faster" / "1.3x slower" for a geometric-mean ratio of baseline time over Collie's time.
std::string ratioText(double ratio) {
  char buf[32];
  if (ratio >= 1)
    snprintf(buf, sizeof(buf), "%.2fx faster", ratio);
  else
    snprintf(buf, sizeof(buf), "%.2fx slower", 1 / ratio);
  return buf;
}

}  // namespace

void printSummary(const Report& r, FILE* out) {
  if (r.impls.empty() || r.rows.empty()) return;
  const size_t me = Report::kReference;
  const std::string& name = r.impls[me].label;
  const int limit = r.limitOf(me);
  fprintf(out, "# Summary (out-of-place; ratios are geometric means over the sizes of each range):\n");
  for (const SizeRange& range : kRanges) {
    size_t first = 0, last = 0, sizes = 0;
    std::vector<double> logRatio(r.impls.size(), 0);
    std::vector<int> ratios(r.impls.size(), 0);
    double shareSum = 0, fastest = 0, slowest = 0;
    int shares = 0;
    for (const Row& row : r.rows) {
      if (row.bytes < range.lo || row.bytes >= range.hi) continue;
      const Figure& mine = row.impls[me].oop;
      if (!mine.ran || mine.sec <= 0) continue;
      if (sizes++ == 0) {
        first = row.bytes;
        fastest = slowest = mine.sec;
      }
      last = row.bytes;
      fastest = std::min(fastest, mine.sec);
      slowest = std::max(slowest, mine.sec);
      for (size_t i = 0; i < r.impls.size(); ++i) {
        const Figure& other = row.impls[i].oop;
        if (i == me || !other.ran || other.sec <= 0) continue;
        logRatio[i] += std::log(other.sec / mine.sec);
        ++ratios[i];
      }
      if (limit >= 0 && static_cast<size_t>(limit) < row.limit.size() && row.limit[limit] > 0) {
        shareSum += mine.busbw / row.limit[limit];
        ++shares;
      }
    }
    if (sizes == 0) continue;
    std::string line = "#   " + std::string(range.name) + ", " + sizeText(first) +
                       (first == last ? std::string() : " to " + sizeText(last)) + ": ";
    bool any = false;
    for (size_t i = 0; i < r.impls.size(); ++i) {
      if (ratios[i] == 0) continue;
      line +=
          (any ? "; " : "") + name + " " + ratioText(std::exp(logRatio[i] / ratios[i])) + " than " + r.impls[i].label;
      any = true;
    }
    if (range.latencyBound) {
      char buf[96];
      snprintf(buf, sizeof(buf), "%s%.1f to %.1f us per call", any ? "; " : "", fastest * 1e6, slowest * 1e6);
      line += buf;
      any = true;
    } else if (shares > 0) {
      char buf[96];
      snprintf(buf, sizeof(buf), "%sbusbw %.0f%% of the copy limit", any ? "; " : "", 100 * shareSum / shares);
      line += buf;
      any = true;
    }
    if (!any) line += "no baseline or limit to compare with";
    fprintf(out, "%s\n", line.c_str());
  }
  fprintf(out, "#   results checked: %lld wrong (%s)\n", r.totalWrong, r.totalWrong == 0 ? "OK" : "FAILED");
  fflush(out);
}

}  // namespace bench
}  // namespace collie
