// Tensor: a host-side dense tensor (row-major), used for initializers,
// folded constants, and the reference interpreter's values.
//
// Element access for computation goes through two widened views: floating
// types as double, integer and bool types as int64. The reference kernels
// compute in those and store back, which keeps them simple and exact.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace stitch {

using Dims = std::vector<int64_t>;

int64_t num_elements(const Dims& dims);
std::string dims_to_string(const Dims& dims);  // "2x3x4", "scalar" for rank 0

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Dims dims);  // zero-filled

  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t size() const { return num_elements(dims_); }
  int64_t byte_size() const { return static_cast<int64_t>(bytes_.size()); }

  uint8_t* data() { return bytes_.data(); }
  const uint8_t* data() const { return bytes_.data(); }
  template <typename T>
  T* data_as() { return reinterpret_cast<T*>(bytes_.data()); }
  template <typename T>
  const T* data_as() const { return reinterpret_cast<const T*>(bytes_.data()); }

  // Same bytes, new dims with the same element count.
  Tensor reshaped(Dims dims) const;

  // Widened element access.
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);
  std::vector<double> to_f64() const;
  std::vector<int64_t> to_i64() const;
  static Tensor from_f64(DType dtype, Dims dims, const std::vector<double>& v);
  static Tensor from_i64(DType dtype, Dims dims, const std::vector<int64_t>& v);

  static Tensor scalar_i64(int64_t v) { return from_i64(DType::kI64, {}, {v}); }
  static Tensor vector_i64(const std::vector<int64_t>& v) {
    return from_i64(DType::kI64, {static_cast<int64_t>(v.size())}, v);
  }

  bool same_as(const Tensor& o) const {
    return dtype_ == o.dtype_ && dims_ == o.dims_ && bytes_ == o.bytes_;
  }

 private:
  DType dtype_ = DType::kUndefined;
  Dims dims_;
  std::vector<uint8_t> bytes_;
};

}  // namespace stitch
