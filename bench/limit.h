// --limit: the memory-copy bandwidth a rank gets while every rank copies at
// once (memcpy on host memory, device-to-device cudaMemcpyAsync on GPU
// memory), counted as bytes read + written, the way FACTS-style "D2D copy
// TB/s" figures are. Measured per size in the same run as the collectives,
// so cache effects at small sizes show up in both.
#pragma once

#include <cstddef>

#include "bench/buffers.h"

namespace collie {
namespace bench {

class Team;
struct Options;

/// Per-rank copy seconds of `bytes` (one copy per local rank of `worker`,
/// averaged over enough iterations to last a while); collective over the team.
/// The caller reduces the seconds over ranks as it does for collectives.
double copySeconds(Team& team, int worker, const Options& o, MemKind kind, size_t bytes);

}  // namespace bench
}  // namespace collie
