#include "bench/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "executor/reduce_ops.h"

namespace collie {
namespace bench {

namespace {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Broadcast and scatter read the root's input only: other ranks get poison, so
// a rank that received nothing cannot pass by holding similar values.
bool inputRead(const Case& c) {
  if (c.coll == Coll::kBroadcast || c.coll == Coll::kScatter) return c.rank == c.root;
  return true;
}

template <typename T>
T toType(double v) {
  if constexpr (IsNarrowFloat<T>::value)
    return narrow<T>(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <typename T>
void fillTyped(const Case& c, uint64_t seed, T* dst, size_t n) {
  for (size_t j = 0; j < n; ++j) dst[j] = toType<T>(inputValue(c, seed, c.rank, j));
}

// The exact result of reducing element j of every rank's input, rounded as the
// library must round it: once, at the end (the inputs keep every partial exact).
double reduced(const Case& c, uint64_t seed, size_t j) {
  double acc = inputValue(c, seed, 0, j);
  for (int r = 1; r < c.nranks; ++r) {
    const double x = inputValue(c, seed, r, j);
    switch (c.op) {
      case collieProd:
        acc *= x;
        break;
      case collieMax:
        acc = std::max(acc, x);
        break;
      case collieMin:
        acc = std::min(acc, x);
        break;
      default:
        acc += x;
        break;
    }
  }
  if (c.op == collieAvg) acc = c.type <= collieUint64 ? std::trunc(acc / c.nranks) : acc / c.nranks;
  return acc;
}

// What output element i of this rank must hold.
double expected(const Case& c, uint64_t seed, size_t i) {
  const size_t n = static_cast<size_t>(c.nranks), me = static_cast<size_t>(c.rank);
  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      return reduced(c, seed, i);
    case Coll::kReduceScatter:
      return reduced(c, seed, me * c.count + i);
    case Coll::kBroadcast:
      return inputValue(c, seed, c.root, i);
    case Coll::kAllGather:
    case Coll::kGather:
      return inputValue(c, seed, static_cast<int>(i / c.count), i % c.count);
    case Coll::kScatter:
      return inputValue(c, seed, c.root, me * c.count + i);
    case Coll::kAllToAll:
      return inputValue(c, seed, static_cast<int>(i / c.count), me * c.count + i % c.count);
    case Coll::kAllToAllv:
      break;  // by blocks, in countWrongTyped
    case Coll::kSendRecv:
      return inputValue(c, seed, static_cast<int>((me + n - 1) % n), i);
  }
  return 0;
}

template <typename T>
size_t countWrongTyped(const Case& c, uint64_t seed, const T* out) {
  size_t wrong = 0;
  if (c.coll == Coll::kAllToAllv) {
    // Block p of the output comes from rank p, out of its send buffer at its displacement for us.
    for (int p = 0; p < c.nranks; ++p) {
      const size_t from = alltoallvSendDispl(c.matrix, c.nranks, p, c.rank);
      const T* block = out + c.recvDispls[static_cast<size_t>(p)];
      for (size_t i = 0; i < c.recvCounts[static_cast<size_t>(p)]; ++i)
        if (widen(block[i]) != widen(toType<T>(inputValue(c, seed, p, from + i)))) ++wrong;
    }
    return wrong;
  }
  for (size_t i = 0; i < c.recvElems; ++i)
    if (widen(out[i]) != widen(toType<T>(expected(c, seed, i)))) ++wrong;
  return wrong;
}

}  // namespace

double inputValue(const Case& c, uint64_t seed, int r, size_t j) {
  const uint64_t h = mix64(seed ^ mix64((static_cast<uint64_t>(r) << 48) ^ j));
  if (!collInfo(c.coll).reduces) return static_cast<double>(h & 7);
  const uint64_t n = static_cast<uint64_t>(c.nranks);
  const uint64_t pick = mix64(seed + j);
  switch (c.op) {
    case collieProd:
      return pick % n == static_cast<uint64_t>(r) ? 2.0 : 1.0;
    case collieMax:
    case collieMin:
      return static_cast<double>(h & 3);
    default:
      return (static_cast<uint64_t>(r) + pick) % n < 8 ? static_cast<double>(h & 1) : 0.0;
  }
}

void poison(void* buf, size_t bytes) { memset(buf, 0x7b, bytes); }

void fillInput(const Case& c, uint64_t seed, void* send) {
  if (!inputRead(c)) {
    poison(send, c.sendElems * c.typeBytes());
    return;
  }
  visitType(c.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fillTyped<T>(c, seed, static_cast<T*>(send), c.sendElems);
  });
}

void fillInPlace(const Case& c, uint64_t seed, void* buf) {
  const size_t es = c.typeBytes();
  poison(buf, c.bufElems * es);
  if (!inputRead(c)) return;
  visitType(c.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    fillTyped<T>(c, seed, static_cast<T*>(buf) + c.sendOff, c.sendElems);
  });
}

size_t countWrong(const Case& c, uint64_t seed, const void* out) {
  if (!c.hasOutput()) return 0;
  size_t wrong = 0;
  visitType(c.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    wrong = countWrongTyped<T>(c, seed, static_cast<const T*>(out));
  });
  return wrong;
}

}  // namespace bench
}  // namespace collie
