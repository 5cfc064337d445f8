// What the pre-multiplied-sum tests share (tests/unit/premulsum_test.cc on the host backend,
// tests/gpu/premulsum_gpu_test.cc on the CUDA backend): each rank's scalar, inputs chosen so that every product
// and sum is exact in the type (random, from the seed), and the reference, computed in double or wrapping
// 64-bit integers.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "collie.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace test {
namespace premul {

enum class Kind { kAllReduce, kReduce, kReduceScatter };
inline const char* kindName(Kind k) {
  return k == Kind::kAllReduce ? "allreduce" : (k == Kind::kReduce ? "reduce" : "reducescatter");
}

template <typename T>
inline constexpr bool isFloatType() {
  return collie::IsNarrowFloat<T>::value || std::is_floating_point<T>::value;
}

template <typename T>
T fromDouble(double v) {
  if constexpr (collie::IsNarrowFloat<T>::value)
    return collie::narrow<T>(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// One rank's scalar: powers of two for floats (exact), r + 2 for integers (wrapping).
template <typename T>
T scalarOf(int r) {
  if constexpr (isFloatType<T>()) {
    static const double kScalars[] = {1.0, 2.0, 0.5};
    return fromDouble<T>(kScalars[r % 3]);
  } else {
    return static_cast<T>(r + 2);
  }
}

// Inputs of rank r: x = y / scalar, where y is fillInput's sum-exact value, so scalar * x = y exactly.
template <typename T>
std::vector<T> inputOf(collieDataType_t type, int r, uint64_t seed, size_t n) {
  std::vector<T> x(n);
  collie::test::fillInput(type, collieSum, r, seed, x.data(), n);
  if constexpr (isFloatType<T>()) {
    // y / 2 and y * 2 stay exact in every float type for fillInput's range.
    const T scalar = scalarOf<T>(r);
    const double s = collie::test::elementAsDouble(type, &scalar, 0);
    for (size_t i = 0; i < n; ++i) x[i] = fromDouble<T>(collie::test::elementAsDouble(type, x.data(), i) / s);
  }
  return x;
}

// sum over ranks of scalar_r * x_r[i]: exact in double for floats, modulo 2^bits for integers.
template <typename T>
T referenceAt(collieDataType_t type, const std::vector<std::vector<T>>& in, size_t i) {
  if constexpr (isFloatType<T>()) {
    double acc = 0;
    for (size_t r = 0; r < in.size(); ++r) {
      const T s = scalarOf<T>(static_cast<int>(r));
      acc += collie::test::elementAsDouble(type, &s, 0) * collie::test::elementAsDouble(type, in[r].data(), i);
    }
    return fromDouble<T>(acc);
  } else {
    using U = typename std::make_unsigned<T>::type;
    uint64_t acc = 0;
    for (size_t r = 0; r < in.size(); ++r)
      acc += static_cast<uint64_t>(static_cast<int64_t>(scalarOf<T>(static_cast<int>(r)))) *
             static_cast<uint64_t>(static_cast<int64_t>(in[r][i]));
    return static_cast<T>(static_cast<U>(acc));
  }
}

}  // namespace premul
}  // namespace test
}  // namespace collie
