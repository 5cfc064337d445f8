#include "common/test_util.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <type_traits>

#include "executor/reduce_ops.h"

namespace collie {
namespace test {

namespace {

// Collie's host tests pass host buffers. On a machine with a GPU the default
// backend is CUDA, so these tests ask for the host one unless the environment
// already names a backend; tests/gpu choose theirs in the config.
const bool kHostBackendByDefault = [] { return setenv("COLLIE_DEVICE", "host", 0) == 0; }();

bool isFloat(collieDataType_t t) {
  return t == collieFloat16 || t == collieFloat32 || t == collieFloat64 || t == collieBfloat16 ||
         t == collieFloat8e4m3 || t == collieFloat8e5m2;
}
bool isSigned(collieDataType_t t) { return t == collieInt8 || t == collieInt32 || t == collieInt64; }

// Stores a double into a float-type element (round to nearest, via the CUDA conversion headers).
void storeFloat(collieDataType_t t, void* buf, size_t i, double v) {
  switch (t) {
    case collieFloat16:
      static_cast<__half*>(buf)[i] = __float2half_rn(static_cast<float>(v));
      break;
    case collieBfloat16:
      static_cast<__nv_bfloat16*>(buf)[i] = __float2bfloat16_rn(static_cast<float>(v));
      break;
    case collieFloat8e4m3:
      static_cast<__nv_fp8_e4m3*>(buf)[i] = __nv_fp8_e4m3(static_cast<float>(v));
      break;
    case collieFloat8e5m2:
      static_cast<__nv_fp8_e5m2*>(buf)[i] = __nv_fp8_e5m2(static_cast<float>(v));
      break;
    case collieFloat32:
      static_cast<float*>(buf)[i] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(buf)[i] = v;
      break;
  }
}

double loadFloat(collieDataType_t t, const void* buf, size_t i) {
  switch (t) {
    case collieFloat16:
      return __half2float(static_cast<const __half*>(buf)[i]);
    case collieBfloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(buf)[i]);
    case collieFloat8e4m3:
      return static_cast<float>(static_cast<const __nv_fp8_e4m3*>(buf)[i]);
    case collieFloat8e5m2:
      return static_cast<float>(static_cast<const __nv_fp8_e5m2*>(buf)[i]);
    case collieFloat32:
      return static_cast<const float*>(buf)[i];
    default:
      return static_cast<const double*>(buf)[i];
  }
}

// Integers as raw 64-bit patterns: sign-extended for signed types.
uint64_t loadInt(collieDataType_t t, const void* buf, size_t i) {
  switch (t) {
    case collieInt8:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<const int8_t*>(buf)[i]));
    case collieUint8:
      return static_cast<const uint8_t*>(buf)[i];
    case collieInt32:
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<const int32_t*>(buf)[i]));
    case collieUint32:
      return static_cast<const uint32_t*>(buf)[i];
    case collieInt64:
      return static_cast<uint64_t>(static_cast<const int64_t*>(buf)[i]);
    default:
      return static_cast<const uint64_t*>(buf)[i];
  }
}

// Truncates to the type's width: this is the wrap-around the library promises.
void storeInt(collieDataType_t t, void* buf, size_t i, uint64_t v) {
  switch (t) {
    case collieInt8:
    case collieUint8:
      static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v);
      break;
    case collieInt32:
    case collieUint32:
      static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(v);
      break;
    default:
      static_cast<uint64_t*>(buf)[i] = v;
      break;
  }
}

// The largest magnitude inputs may have so that sums over 8 ranks stay exact.
int sumRange(collieDataType_t t) {
  switch (t) {
    case collieFloat16:
      return 64;  // 8 * 64 = 512 < 2^11
    case collieBfloat16:
      return 16;  // 8 * 16 = 128 < 2^8
    case collieFloat8e4m3:
      return 2;  // 8 * 2 = 16 = 2^4
    case collieFloat8e5m2:
      return 1;  // 8 * 1 = 8 = 2^3
    case collieUint8:
    case collieUint32:
    case collieUint64:
      return 200;
    default:
      return 1000;
  }
}

}  // namespace

uint64_t testSeed() {
  static uint64_t seed = [] {
    uint64_t s;
    if (const char* e = getenv("COLLIE_TEST_SEED")) {
      s = strtoull(e, nullptr, 0);
    } else {
      std::random_device rd;
      s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }
    printf("collie test seed: %llu (rerun with COLLIE_TEST_SEED=%llu)\n", static_cast<unsigned long long>(s),
           static_cast<unsigned long long>(s));
    fflush(stdout);
    return s;
  }();
  return seed;
}

void fillInput(collieDataType_t type, collieRedOp_t op, int rank, uint64_t seed, void* buf, size_t count) {
  std::mt19937_64 rng(seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1)) ^
                      (static_cast<uint64_t>(type) << 40) ^ (static_cast<uint64_t>(op) << 48));
  const bool prod = op == collieProd;
  const int range = sumRange(type);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    int64_t v;
    if (prod) {
      // Products of up to 8 values in {-2,-1,1,2} stay within +-256, exact in every float type.
      static const int kSigned[] = {-2, -1, 1, 2};
      v = isSigned(type) || isFloat(type) ? kSigned[r % 4] : static_cast<int64_t>(1 + r % 3);
    } else {
      const bool nonNegative = !isSigned(type) && !isFloat(type);
      v = nonNegative ? static_cast<int64_t>(r % static_cast<uint64_t>(range + 1))
                      : static_cast<int64_t>(r % static_cast<uint64_t>(2 * range + 1)) - range;
    }
    if (isFloat(type))
      storeFloat(type, buf, i, static_cast<double>(v));
    else
      storeInt(type, buf, i, static_cast<uint64_t>(v));
  }
}

void referenceAllReduce(collieDataType_t type, collieRedOp_t op, const std::vector<const void*>& inputs, size_t count,
                        void* expected) {
  const int n = static_cast<int>(inputs.size());
  for (size_t i = 0; i < count; ++i) {
    if (isFloat(type)) {
      double acc = loadFloat(type, inputs[0], i);
      for (int r = 1; r < n; ++r) {
        const double x = loadFloat(type, inputs[static_cast<size_t>(r)], i);
        switch (op) {
          case collieProd:
            acc *= x;
            break;
          case collieMax:
            acc = x > acc ? x : acc;
            break;
          case collieMin:
            acc = x < acc ? x : acc;
            break;
          default:
            acc += x;
            break;
        }
      }
      if (op == collieAvg) {
        // Division happens once, in the type's arithmetic: float for the narrow types, as documented.
        if (type == collieFloat64)
          acc = acc / n;
        else
          acc = static_cast<float>(acc) / static_cast<float>(n);
      }
      storeFloat(type, expected, i, acc);
    } else {
      uint64_t acc = loadInt(type, inputs[0], i);
      for (int r = 1; r < n; ++r) {
        const uint64_t x = loadInt(type, inputs[static_cast<size_t>(r)], i);
        const bool s = isSigned(type);
        switch (op) {
          case collieProd:
            acc *= x;
            break;
          case collieMax:
            acc = s ? (static_cast<int64_t>(x) > static_cast<int64_t>(acc) ? x : acc) : (x > acc ? x : acc);
            break;
          case collieMin:
            acc = s ? (static_cast<int64_t>(x) < static_cast<int64_t>(acc) ? x : acc) : (x < acc ? x : acc);
            break;
          default:
            acc += x;
            break;
        }
      }
      storeInt(type, expected, i, acc);
      if (op == collieAvg) {
        // Wrapped sum in the type, then truncating division, as the library promises.
        const uint64_t wrapped = loadInt(type, expected, i);
        const uint64_t q = isSigned(type) ? static_cast<uint64_t>(static_cast<int64_t>(wrapped) / n)
                                          : wrapped / static_cast<uint64_t>(n);
        storeInt(type, expected, i, q);
      }
    }
  }
}

const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return "allreduce";
    case Coll::kReduceScatter:
      return "reducescatter";
    case Coll::kAllGather:
      return "allgather";
    case Coll::kBroadcast:
      return "broadcast";
    case Coll::kReduce:
      return "reduce";
    case Coll::kAllToAll:
      return "alltoall";
    case Coll::kGather:
      return "gather";
    case Coll::kScatter:
      return "scatter";
  }
  return "?";
}

bool collHasOp(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce; }
bool collHasInPlace(Coll c) { return c != Coll::kAllToAll; }
bool collRootOutputOnly(Coll c) { return c == Coll::kReduce || c == Coll::kGather; }

size_t collInputCount(Coll c, int nranks, size_t count) {
  const bool blocks = c == Coll::kReduceScatter || c == Coll::kAllToAll || c == Coll::kScatter;
  return blocks ? count * static_cast<size_t>(nranks) : count;
}
size_t collOutputCount(Coll c, int nranks, size_t count) {
  const bool blocks = c == Coll::kAllGather || c == Coll::kAllToAll || c == Coll::kGather;
  return blocks ? count * static_cast<size_t>(nranks) : count;
}

void referenceCollective(Coll c, collieDataType_t type, collieRedOp_t op, const std::vector<const void*>& inputs,
                         size_t count, int root, int rank, void* expected) {
  const size_t block = count * collie::typeSize(type);
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      referenceAllReduce(type, op, inputs, count, expected);
      break;
    case Coll::kReduceScatter: {
      std::vector<const void*> blocks;
      for (const void* in : inputs) blocks.push_back(static_cast<const char*>(in) + static_cast<size_t>(rank) * block);
      referenceAllReduce(type, op, blocks, count, expected);
      break;
    }
    case Coll::kAllGather:
    case Coll::kGather:
      for (size_t k = 0; k < inputs.size(); ++k) memcpy(static_cast<char*>(expected) + k * block, inputs[k], block);
      break;
    case Coll::kBroadcast:
      memcpy(expected, inputs[static_cast<size_t>(root)], block);
      break;
    case Coll::kAllToAll:  // block k of rank r's output is block r of rank k's input
      for (size_t k = 0; k < inputs.size(); ++k)
        memcpy(static_cast<char*>(expected) + k * block,
               static_cast<const char*>(inputs[k]) + static_cast<size_t>(rank) * block, block);
      break;
    case Coll::kScatter:
      memcpy(expected, static_cast<const char*>(inputs[static_cast<size_t>(root)]) + static_cast<size_t>(rank) * block,
             block);
      break;
  }
}

collieResult_t callCollective(Coll c, const void* send, void* recv, size_t count, collieDataType_t type,
                              collieRedOp_t op, int root, collieComm_t comm, collieStream_t stream) {
  switch (c) {
    case Coll::kAllReduce:
      return collieAllReduce(send, recv, count, type, op, comm, stream);
    case Coll::kReduceScatter:
      return collieReduceScatter(send, recv, count, type, op, comm, stream);
    case Coll::kAllGather:
      return collieAllGather(send, recv, count, type, comm, stream);
    case Coll::kBroadcast:
      return collieBroadcast(send, recv, count, type, root, comm, stream);
    case Coll::kReduce:
      return collieReduce(send, recv, count, type, op, root, comm, stream);
    case Coll::kAllToAll:
      return collieAllToAll(send, recv, count, type, comm, stream);
    case Coll::kGather:
      return collieGather(send, recv, count, type, root, comm, stream);
    case Coll::kScatter:
      return collieScatter(send, recv, count, type, root, comm, stream);
  }
  return collieInternalError;
}

// A zero-count case passes no buffer: memset's pointer must not be null even for 0 bytes.
void poison(void* buf, size_t bytes) {
  if (bytes > 0) memset(buf, 0x7b, bytes);
}

double elementAsDouble(collieDataType_t type, const void* buf, size_t i) {
  if (isFloat(type)) return loadFloat(type, buf, i);
  const uint64_t v = loadInt(type, buf, i);
  return isSigned(type) ? static_cast<double>(static_cast<int64_t>(v)) : static_cast<double>(v);
}

size_t countWrong(collieDataType_t type, const void* got, const void* expected, size_t count, std::string* first) {
  size_t wrong = 0;
  const size_t es = collie::typeSize(type);
  for (size_t i = 0; i < count; ++i) {
    const bool same = isFloat(type) ? loadFloat(type, got, i) == loadFloat(type, expected, i)
                                    : memcmp(static_cast<const char*>(got) + i * es,
                                             static_cast<const char*>(expected) + i * es, es) == 0;
    if (same) continue;
    if (wrong == 0 && first != nullptr) {
      char msg[160];
      snprintf(msg, sizeof(msg), "element %zu: got %g, expected %g", i, elementAsDouble(type, got, i),
               elementAsDouble(type, expected, i));
      *first = msg;
    }
    ++wrong;
  }
  return wrong;
}

const std::vector<collieDataType_t>& allTypes() {
  static const std::vector<collieDataType_t> types = {
      collieInt8,    collieUint8,   collieInt32,   collieUint32,   collieInt64,      collieUint64,
      collieFloat16, collieFloat32, collieFloat64, collieBfloat16, collieFloat8e4m3, collieFloat8e5m2};
  return types;
}

const std::vector<collieDataType_t>& sizeTypes() {
  static const std::vector<collieDataType_t> types = {collieInt8, collieBfloat16, collieFloat32, collieUint64};
  return types;
}

const std::vector<collieDataType_t>& sweepTypes() {
  static const std::vector<collieDataType_t> types = [] {
    const char* v = getenv("COLLIE_TEST_TYPES");
    if (v == nullptr || *v == '\0' || strcmp(v, "all") == 0) return allTypes();
    if (strcmp(v, "sizes") == 0) return sizeTypes();
    // A misspelt value must not quietly run a sweep other than the one asked for.
    fprintf(stderr, "COLLIE_TEST_TYPES=%s: expected 'all' or 'sizes'\n", v);
    abort();
  }();
  return types;
}

std::string sweepTypesLabel() {
  return std::to_string(sweepTypes().size()) + " types" +
         (sweepTypes().size() == allTypes().size() ? "" : " (COLLIE_TEST_TYPES=sizes)");
}

namespace {
bool bytesOnly(int nranks, bool tinySlots) { return nranks >= 7 || tinySlots; }
}  // namespace

const std::vector<collieDataType_t>& sweepTypes(int nranks, bool tinySlots) {
  return bytesOnly(nranks, tinySlots) ? sizeTypes() : sweepTypes();
}

std::string sweepTypesLabel(int nranks, bool tinySlots) {
  if (!bytesOnly(nranks, tinySlots) || sweepTypes().size() == sizeTypes().size()) return sweepTypesLabel();
  return std::to_string(sizeTypes().size()) + " types (one per element size on 7-8 ranks and with tiny slots)";
}

bool sweepTakesOp(collieDataType_t type, collieRedOp_t op, size_t key) {
  if (type == collieFloat32 || type == collieInt32) return true;
  return static_cast<size_t>(op) == (key + static_cast<size_t>(type)) % allOps().size();
}

const std::vector<collieRedOp_t>& allOps() {
  static const std::vector<collieRedOp_t> ops = {collieSum, collieProd, collieMax, collieMin, collieAvg};
  return ops;
}

TempFile::TempFile(const std::string& text, const char* suffix) {
  std::string name = std::string("/tmp/collie_test_XXXXXX") + suffix;
  const int fd = mkstemps(name.data(), static_cast<int>(strlen(suffix)));
  path = name;
  if (fd >= 0) {
    const ssize_t wrote = write(fd, text.data(), text.size());
    (void)wrote;
    close(fd);
  }
}

TempFile::~TempFile() { unlink(path.c_str()); }

}  // namespace test
}  // namespace collie
