// Traffic matrices for all-to-all-v: who sends how many elements to whom.
// Every rank builds the same matrix from the same seed, so the counts a rank
// sends always match what its peers expect to receive.
//
//   uniform                     every pair the same
//   random                      each pair an independent uniform weight
//   zipf[:s]                    destinations ranked by a seeded permutation; rank k gets weight 1/(k+1)^s
//                               (default s = 1): a few hot receivers, as with popular experts
//   moe[:tokens,topk,experts]   each rank routes `tokens` tokens to `topk` distinct experts drawn uniformly;
//                               experts are spread over ranks in blocks (default 1024,2,max(8,n))
//   file:PATH                   n lines of n element counts (row = sender); '#' starts a comment
//
// Generated matrices are scaled so that the mean row holds the requested
// number of elements; a file's counts are used as written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace collie {
namespace bench {

struct Traffic {
  enum class Kind { kUniform, kRandom, kZipf, kMoe, kFile };
  Kind kind = Kind::kUniform;
  double zipfS = 1.0;
  int tokens = 1024, topk = 2, experts = 0;  // experts 0: max(8, nranks)
  std::string path;
  std::vector<size_t> fileCounts;  // row-major, after load()
  int fileRanks = 0;

  /// The spec back, with defaults filled in ("zipf:1", "moe:1024,2,8").
  std::string describe(int nranks) const;
  bool fromFile() const { return kind == Kind::kFile; }
};

/// Parses --traffic's value; on error *err says why.
bool parseTraffic(const std::string& spec, Traffic* out, std::string* err);

/// Bound on the elements of one row or one column of a file's matrix (2^40), so that a rank's
/// buffer sizes, in bytes of any type, cannot overflow.
constexpr uint64_t kMaxTrafficElems = uint64_t{1} << 40;

/// Parses the text of a count file: nranks rows of nranks non-negative counts (row = sender);
/// blank lines and '#' comments are skipped. `source` (the path) starts error sentences.
bool parseTrafficCounts(const std::string& text, const std::string& source, int nranks, std::vector<size_t>* counts,
                        std::string* err);

/// Reads a file:PATH matrix and checks it has nranks rows of nranks counts.
bool loadTraffic(Traffic* t, int nranks, std::string* err);

/// The matrix (nranks x nranks elements, row = sender) whose mean row holds
/// rowElems elements; the same on every rank for the same seed.
std::vector<size_t> trafficMatrix(const Traffic& t, int nranks, size_t rowElems, uint64_t seed);

}  // namespace bench
}  // namespace collie
