#include "bench/traffic.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>

namespace collie {
namespace bench {

namespace {

constexpr double kMaxMoeDraws = 1e7;  // tokens x topk per rank (moe traffic)

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform double in [0, 1) from one 64-bit draw.
double unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// A seeded stream of draws; the same on every rank.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_++); }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

int expertsFor(const Traffic& t, int nranks) { return t.experts > 0 ? t.experts : std::max(8, nranks); }

// Integer counts in proportion to `w` summing to exactly `total`: floors, then
// the remainder to the largest fractional parts (ties to the lower index).
std::vector<size_t> apportion(const std::vector<double>& w, size_t total) {
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<size_t> out(w.size(), 0);
  if (sum <= 0 || total == 0) return out;
  std::vector<std::pair<double, size_t>> frac;
  size_t given = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const double exact = w[i] / sum * static_cast<double>(total);
    out[i] = static_cast<size_t>(std::floor(exact));
    given += out[i];
    frac.emplace_back(exact - std::floor(exact), i);
  }
  std::stable_sort(frac.begin(), frac.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total && k < frac.size(); ++k, ++given) ++out[frac[k].second];
  return out;
}

bool parseNumbers(const std::string& s, std::vector<double>* out) {
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = strtod(item.c_str(), &end);
    if (item.empty() || end == nullptr || *end != '\0') return false;
    out->push_back(v);
  }
  return true;
}

}  // namespace

std::string Traffic::describe(int nranks) const {
  char buf[128];
  switch (kind) {
    case Kind::kUniform:
      return "uniform";
    case Kind::kRandom:
      return "random";
    case Kind::kZipf:
      snprintf(buf, sizeof(buf), "zipf:%g", zipfS);
      return buf;
    case Kind::kMoe:
      snprintf(buf, sizeof(buf), "moe:%d,%d,%d", tokens, topk, expertsFor(*this, nranks));
      return buf;
    case Kind::kFile:
      return "file:" + path;
  }
  return "?";
}

bool parseTraffic(const std::string& spec, Traffic* out, std::string* err) {
  Traffic t;
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  const std::string arg = colon == std::string::npos ? "" : spec.substr(colon + 1);
  std::vector<double> nums;
  if (name == "uniform" && colon == std::string::npos) {
    t.kind = Traffic::Kind::kUniform;
  } else if (name == "random" && colon == std::string::npos) {
    t.kind = Traffic::Kind::kRandom;
  } else if (name == "zipf") {
    t.kind = Traffic::Kind::kZipf;
    if (colon != std::string::npos) {
      if (!parseNumbers(arg, &nums) || nums.size() != 1 || !(nums[0] >= 0) || nums[0] > 16) {
        *err = "zipf:S takes one exponent S in [0, 16], e.g. zipf:1.2";
        return false;
      }
      t.zipfS = nums[0];
    }
  } else if (name == "moe") {
    t.kind = Traffic::Kind::kMoe;
    if (colon != std::string::npos) {
      // Each a whole number in range, tested so that NaN fails too: "nan" would pass `< 1` and `> 1e7` alike,
      // and converting it to int is undefined behaviour.
      auto whole = [](double v, double max) { return v >= 1 && v <= max && v == std::floor(v); };
      if (!parseNumbers(arg, &nums) || nums.size() != 3 || !whole(nums[0], 1e7) || !whole(nums[2], 1e6) ||
          !whole(nums[1], nums[2])) {
        *err = "moe:TOKENS,TOPK,EXPERTS takes three positive integers with TOPK <= EXPERTS, e.g. moe:4096,2,8";
        return false;
      }
      // The generator draws TOKENS x TOPK experts per rank: bounded, so a sweep cannot stall in it.
      if (nums[0] * nums[1] > kMaxMoeDraws) {
        *err = "moe:TOKENS,TOPK,EXPERTS draws TOKENS x TOPK experts per rank; keep that at most 10^7";
        return false;
      }
      t.tokens = static_cast<int>(nums[0]);
      t.topk = static_cast<int>(nums[1]);
      t.experts = static_cast<int>(nums[2]);
    }
  } else if (name == "file" && !arg.empty()) {
    t.kind = Traffic::Kind::kFile;
    t.path = arg;
  } else {
    *err = "unknown traffic '" + spec + "' (uniform, random, zipf[:s], moe[:tokens,topk,experts], file:PATH)";
    return false;
  }
  *out = t;
  return true;
}

bool parseTrafficCounts(const std::string& text, const std::string& source, int nranks, std::vector<size_t>* out,
                        std::string* err) {
  std::vector<size_t> counts;
  std::vector<uint64_t> colSums(static_cast<size_t>(std::max(nranks, 0)), 0);
  std::istringstream f(text);
  std::string line;
  int rows = 0, lineNo = 0;
  while (std::getline(f, line)) {
    ++lineNo;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::stringstream in(line);
    std::vector<size_t> row;
    std::string tok;
    uint64_t rowSum = 0;
    while (in >> tok) {
      char* end = nullptr;
      errno = 0;
      const unsigned long long v = strtoull(tok.c_str(), &end, 10);
      // ERANGE: strtoull saturates at 2^64-1 rather than fail, which would pass as a count.
      if (tok[0] == '-' || errno == ERANGE || end != tok.c_str() + tok.size()) {
        *err = source + ":" + std::to_string(lineNo) + ": '" + tok + "' is not a non-negative integer";
        return false;
      }
      if (static_cast<int>(row.size()) < nranks) {
        rowSum += std::min<uint64_t>(v, kMaxTrafficElems + 1);
        colSums[row.size()] += std::min<uint64_t>(v, kMaxTrafficElems + 1);
        if (rowSum > kMaxTrafficElems || colSums[row.size()] > kMaxTrafficElems) {
          *err = source + ":" + std::to_string(lineNo) + ": a row or column holds more than 2^40 elements";
          return false;
        }
      }
      row.push_back(static_cast<size_t>(v));
    }
    if (row.empty()) continue;
    if (static_cast<int>(row.size()) != nranks) {
      *err = source + ":" + std::to_string(lineNo) + ": " + std::to_string(row.size()) + " counts, expected " +
             std::to_string(nranks) + " (one per rank)";
      return false;
    }
    counts.insert(counts.end(), row.begin(), row.end());
    ++rows;
  }
  if (rows != nranks) {
    *err = source + ": " + std::to_string(rows) + " rows, expected " + std::to_string(nranks) + " (one per rank)";
    return false;
  }
  *out = counts;
  return true;
}

bool loadTraffic(Traffic* t, int nranks, std::string* err) {
  if (!t->fromFile()) return true;
  std::ifstream f(t->path);
  if (!f) {
    *err = "cannot read traffic file " + t->path;
    return false;
  }
  std::ostringstream text;
  text << f.rdbuf();
  std::vector<size_t> counts;
  if (!parseTrafficCounts(text.str(), t->path, nranks, &counts, err)) return false;
  t->fileCounts = counts;
  t->fileRanks = nranks;
  return true;
}

std::vector<size_t> trafficMatrix(const Traffic& t, int nranks, size_t rowElems, uint64_t seed) {
  const size_t n = static_cast<size_t>(nranks);
  if (t.fromFile()) return t.fileCounts;
  std::vector<double> w(n * n, 1.0);
  Rng rng(mix64(seed ^ 0x7472616666696300ull));  // "traffic": apart from the check inputs' stream
  switch (t.kind) {
    case Traffic::Kind::kUniform:
    case Traffic::Kind::kFile:
      break;
    case Traffic::Kind::kRandom:
      for (double& x : w) x = unit(rng.next());
      break;
    case Traffic::Kind::kZipf: {
      std::vector<size_t> popularity(n);
      std::iota(popularity.begin(), popularity.end(), 0);
      for (size_t i = n; i > 1; --i) std::swap(popularity[i - 1], popularity[rng.below(i)]);
      for (size_t s = 0; s < n; ++s)
        for (size_t d = 0; d < n; ++d) w[s * n + d] = 1.0 / std::pow(static_cast<double>(popularity[d] + 1), t.zipfS);
      break;
    }
    case Traffic::Kind::kMoe: {
      const size_t experts = static_cast<size_t>(expertsFor(t, nranks));
      std::fill(w.begin(), w.end(), 0.0);
      // TOPK distinct experts per token by a partial shuffle: O(TOPK) draws, where rejecting repeats
      // would take ever longer as TOPK nears EXPERTS.
      std::vector<size_t> order(experts);
      for (size_t e = 0; e < experts; ++e) order[e] = e;
      const size_t k = static_cast<size_t>(t.topk);
      for (size_t s = 0; s < n; ++s) {
        for (int tok = 0; tok < t.tokens; ++tok) {
          for (size_t i = 0; i < k; ++i) {
            std::swap(order[i], order[i + rng.below(experts - i)]);
            w[s * n + order[i] * n / experts] += 1.0;  // expert e lives on rank e*n/experts
          }
        }
      }
      break;
    }
  }
  return apportion(w, rowElems * n);
}

}  // namespace bench
}  // namespace collie
