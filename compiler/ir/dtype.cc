#include "ir/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "support/check.h"

namespace stitch {
namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  int size;
  int onnx;
};
// ONNX codes from onnx.proto TensorProto.DataType.
constexpr DTypeInfo kInfo[] = {
    {DType::kUndefined, "undef", 0, 0}, {DType::kF32, "f32", 4, 1},
    {DType::kF16, "f16", 2, 10},        {DType::kBF16, "bf16", 2, 16},
    {DType::kF64, "f64", 8, 11},        {DType::kI64, "i64", 8, 7},
    {DType::kI32, "i32", 4, 6},         {DType::kI16, "i16", 2, 5},
    {DType::kI8, "i8", 1, 3},           {DType::kU64, "u64", 8, 13},
    {DType::kU32, "u32", 4, 12},        {DType::kU16, "u16", 2, 4},
    {DType::kU8, "u8", 1, 2},           {DType::kBool, "bool", 1, 9},
};
const DTypeInfo& info(DType t) {
  for (const auto& i : kInfo)
    if (i.type == t) return i;
  STITCH_UNREACHABLE("dtype {}", static_cast<int>(t));
}
}  // namespace

int dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).name; }
int dtype_to_onnx(DType t) { return info(t).onnx; }

int64_t int_min(DType t) {
  if (is_unsigned_int(t)) return 0;
  return -(int64_t{1} << (8 * dtype_size(t) - 1));
}

uint64_t int_max(DType t) {
  const int bits = 8 * dtype_size(t) - (is_signed_int(t) ? 1 : 0);
  return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name && i.type != DType::kUndefined) return i.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_onnx(int code) {
  for (const auto& i : kInfo)
    if (i.onnx == code && i.type != DType::kUndefined) return i.type;
  return std::nullopt;
}

std::string onnx_dtype_name(int code) {
  static const char* names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",
                                "INT16",     "INT32",  "INT64",     "STRING",     "BOOL",
                                "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",     "COMPLEX64",
                                "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4"};
  if (code >= 0 && code < static_cast<int>(std::size(names))) return names[code];
  return "type code " + std::to_string(code);
}

uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  // A NaN keeps its sign and its payload's top 10 bits (a quiet NaN when they are all 0), as the
  // kernels' conversions do (stitch_device.cuh).
  if (exp == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? ((mant >> 13) ? mant >> 13 : 0x200u) : 0u));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);  // underflow to zero
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exponent
  return static_cast<uint16_t>(sign | half);
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) & 0x7fu ? x >> 16 : (x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

}  // namespace stitch
