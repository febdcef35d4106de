// Element types of the IR, with their ONNX codes, sizes and text names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stitch {

enum class DType : uint8_t {
  kUndefined,
  kF32, kF16, kBF16, kF64,
  kI64, kI32, kI16, kI8,
  kU64, kU32, kU16, kU8,
  kBool,
};

// Size of one element in bytes.
int dtype_size(DType t);
// Short text name used by the IR text form and messages: f32, bf16, i64, bool...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// ONNX TensorProto.DataType code <-> DType. Types the IR lacks give nullopt.
std::optional<DType> dtype_from_onnx(int onnx_code);
int dtype_to_onnx(DType t);
// Name of an ONNX element type code for error messages ("STRING", "COMPLEX64"...).
std::string onnx_dtype_name(int onnx_code);

inline bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}
inline bool is_signed_int(DType t) {
  return t == DType::kI64 || t == DType::kI32 || t == DType::kI16 || t == DType::kI8;
}
inline bool is_unsigned_int(DType t) {
  return t == DType::kU64 || t == DType::kU32 || t == DType::kU16 || t == DType::kU8;
}
inline bool is_int(DType t) { return is_signed_int(t) || is_unsigned_int(t); }
// The smallest and the largest value of integer type t (kU64's largest does not fit an int64_t).
int64_t int_min(DType t);
uint64_t int_max(DType t);

// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t b);

}  // namespace stitch
