// Reduction operators for every Collie data type, shared by the host executor
// (g++) and the CUDA kernels (nvcc): one definition of what "sum of two fp8
// values" means, so the two backends cannot drift apart.
//
// Semantics (documented in collie.h and docs/design.md):
//  * integers wrap modulo 2^bits (computed in the unsigned type, so signed
//    overflow is never undefined behaviour);
//  * fp16, bf16 and fp8 are widened to float for one operation and rounded back
//    to the type, so every step rounds in the type, as NCCL does;
//  * avg is a sum followed by one division by the rank count at the end
//    (integers truncate toward zero).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "collie.h"

#if defined(__CUDACC__)
#define COLLIE_HD __host__ __device__ __forceinline__
#else
#define COLLIE_HD inline
#endif

namespace collie {

/// The element-wise operators executors apply; avg runs as kSum plus a final division.
enum class ReduceOp : uint8_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3 };

/// Maps a public operator to the executor's (avg -> sum); returns false for unknown values.
inline bool toReduceOp(collieRedOp_t op, ReduceOp* out) {
  switch (op) {
    case collieSum:
    case collieAvg:
      *out = ReduceOp::kSum;
      return true;
    case collieProd:
      *out = ReduceOp::kProd;
      return true;
    case collieMax:
      *out = ReduceOp::kMax;
      return true;
    case collieMin:
      *out = ReduceOp::kMin;
      return true;
    default:
      return false;
  }
}

template <typename T>
struct TypeTag {
  using type = T;
};

/// Low-precision floats travel through float for each operation.
template <typename T>
struct IsNarrowFloat
    : std::integral_constant<bool, std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value ||
                                       std::is_same<T, __nv_fp8_e4m3>::value || std::is_same<T, __nv_fp8_e5m2>::value> {
};

template <typename T>
COLLIE_HD float widen(T x) {
  return static_cast<float>(x);
}
template <>
COLLIE_HD float widen<__half>(__half x) {
  return __half2float(x);
}
template <>
COLLIE_HD float widen<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
COLLIE_HD T narrow(float x) {
  return T(x);
}
template <>
COLLIE_HD __half narrow<__half>(float x) {
  return __float2half_rn(x);
}
template <>
COLLIE_HD __nv_bfloat16 narrow<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// a (op) b for one element.
template <ReduceOp Op, typename T>
COLLIE_HD T applyOp(T a, T b) {
  if constexpr (IsNarrowFloat<T>::value) {
    return narrow<T>(applyOp<Op, float>(widen(a), widen(b)));
  } else if constexpr (std::is_integral<T>::value) {
    using U = typename std::make_unsigned<T>::type;
    if constexpr (Op == ReduceOp::kSum) return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    if constexpr (Op == ReduceOp::kProd) return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
    if constexpr (Op == ReduceOp::kMax) return a > b ? a : b;
    if constexpr (Op == ReduceOp::kMin) return a < b ? a : b;
  } else {
    if constexpr (Op == ReduceOp::kSum) return a + b;
    if constexpr (Op == ReduceOp::kProd) return a * b;
    if constexpr (Op == ReduceOp::kMax) return a > b ? a : b;
    if constexpr (Op == ReduceOp::kMin) return a < b ? a : b;
  }
}

/// x divided by the rank count (the tail of avg).
template <typename T>
COLLIE_HD T divideBy(T x, int n) {
  if constexpr (IsNarrowFloat<T>::value) {
    return narrow<T>(widen(x) / static_cast<float>(n));
  } else if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(x / static_cast<T>(n));
  } else {
    return x / static_cast<T>(n);
  }
}

/// x * scalar rounded in the type: the "pre-multiply" of a pre-multiplied sum,
/// applied to each rank's input before an ordinary sum. Same rules as applyOp:
/// narrow floats go through float once, integers wrap.
template <typename T>
COLLIE_HD T scaleBy(T x, T scalar) {
  return applyOp<ReduceOp::kProd>(x, scalar);
}

/// Calls f(TypeTag<T>{}) with the C++ type of `type`; returns false for an unknown type.
/// The single list of element types: every instantiation over types comes from here.
template <typename F>
bool visitType(collieDataType_t type, F&& f) {
  switch (type) {
    case collieInt8:
      f(TypeTag<int8_t>{});
      return true;
    case collieUint8:
      f(TypeTag<uint8_t>{});
      return true;
    case collieInt32:
      f(TypeTag<int32_t>{});
      return true;
    case collieUint32:
      f(TypeTag<uint32_t>{});
      return true;
    case collieInt64:
      f(TypeTag<int64_t>{});
      return true;
    case collieUint64:
      f(TypeTag<uint64_t>{});
      return true;
    case collieFloat16:
      f(TypeTag<__half>{});
      return true;
    case collieFloat32:
      f(TypeTag<float>{});
      return true;
    case collieFloat64:
      f(TypeTag<double>{});
      return true;
    case collieBfloat16:
      f(TypeTag<__nv_bfloat16>{});
      return true;
    case collieFloat8e4m3:
      f(TypeTag<__nv_fp8_e4m3>{});
      return true;
    case collieFloat8e5m2:
      f(TypeTag<__nv_fp8_e5m2>{});
      return true;
    default:
      return false;
  }
}

/// Calls f(std::integral_constant<ReduceOp, Op>{}) for the executor operator.
template <typename F>
void visitOp(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::kSum:
      f(std::integral_constant<ReduceOp, ReduceOp::kSum>{});
      break;
    case ReduceOp::kProd:
      f(std::integral_constant<ReduceOp, ReduceOp::kProd>{});
      break;
    case ReduceOp::kMax:
      f(std::integral_constant<ReduceOp, ReduceOp::kMax>{});
      break;
    case ReduceOp::kMin:
      f(std::integral_constant<ReduceOp, ReduceOp::kMin>{});
      break;
  }
}

/// Size in bytes of one element; 0 for an unknown type.
inline size_t typeSize(collieDataType_t type) {
  size_t size = 0;
  visitType(type, [&](auto tag) { size = sizeof(typename decltype(tag)::type); });
  return size;
}

/// nccl-tests' spelling of a type ("float", "bfloat16", "f8e4m3"...); "?" for unknown.
inline const char* typeName(collieDataType_t type) {
  static const char* const kNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                       "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return type >= 0 && type < collieNumTypes ? kNames[type] : "?";
}

/// "sum", "prod", "max", "min", "avg"; "premulsum" for run-time operators.
inline const char* opName(collieRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op < collieNumOps) return kNames[op];
  return "premulsum";
}

}  // namespace collie
