// Tensor: a host-side dense tensor (row-major), used for initializers,
// folded constants, and the reference interpreter's values.
//
// Element access for computation goes through two widened views: floating
// types as double, integer and bool types as int64. The reference kernels
// compute in those and store back, which keeps them simple and exact.
//
// Copies share their bytes until one of them is written (copy on write): a
// graph's clone (clone_graph) costs no copy of its weights, and the judged
// rewrites clone the whole graph. Every non-const accessor (data(),
// data_as<T>(), set_f64, set_i64) takes a private copy first when the bytes
// are shared, so a pointer from a non-const accessor must not outlive a copy
// of its tensor made after it; read through a const Tensor to avoid the copy.
//
// A deferred tensor (Tensor::deferred) computes its bytes when they are first read, by any
// accessor, once for it and all its copies: the judged rewrites before planning build new weights
// (a row scale folded into a GEMM's weight, sibling weights concatenated) on graph copies that
// planning looks at by shape alone, and most of those copies are thrown away.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
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
  // A tensor of `dtype` and `dims` whose bytes are `compute`'s result (a tensor of the same type
  // and dims), computed when first read: from any thread, once. `compute` must own what it reads
  // (copies of tensors, which share their bytes), since it may run after the graph it was built
  // for has changed; it may read other deferred tensors.
  static Tensor deferred(DType dtype, Dims dims, std::function<Tensor()> compute);
  // Whether the bytes are still to be computed (for tests and statistics; reading computes them).
  bool pending() const { return bytes_ && !bytes_->ready.load(std::memory_order_acquire); }
  // How many deferred tensors this process has computed so far: `stitchc compile` reports those
  // computed while it planned (none, when planning reads weights by shape only).
  static int64_t deferred_computed();

  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t size() const { return num_elements(dims_); }
  int64_t byte_size() const { return bytes_ ? static_cast<int64_t>(bytes_->size) : 0; }

  uint8_t* data() { return own(); }
  const uint8_t* data() const { return bytes_ ? bytes_->get() : nullptr; }
  template <typename T>
  T* data_as() {
    return reinterpret_cast<T*>(own());
  }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data());
  }
  // Whether this tensor and `o` read the same bytes (a copy not written since).
  bool shares_bytes_with(const Tensor& o) const { return bytes_ && bytes_ == o.bytes_; }

  // Same bytes, new dims with the same element count.
  Tensor reshaped(Dims dims) const;

  // Widened element access.
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  void set_f64(int64_t i, double v);
  void set_i64(int64_t i, int64_t v);
  // Elements of float32, float16 and bfloat16 as float and back, with no double between: a
  // signaling NaN keeps its bits (a double would quiet it), and a NaN's sign and payload go from
  // one of these types to another as the kernels carry them (ir/dtype.cc's conversions).
  float get_f32(int64_t i) const;
  void set_f32(int64_t i, float v);
  std::vector<double> to_f64() const;
  std::vector<int64_t> to_i64() const;
  static Tensor from_f64(DType dtype, Dims dims, const std::vector<double>& v);
  static Tensor from_i64(DType dtype, Dims dims, const std::vector<int64_t>& v);

  static Tensor scalar_i64(int64_t v) { return from_i64(DType::kI64, {}, {v}); }
  static Tensor vector_i64(const std::vector<int64_t>& v) {
    return from_i64(DType::kI64, {static_cast<int64_t>(v.size())}, v);
  }

  bool same_as(const Tensor& o) const {
    if (dtype_ != o.dtype_ || dims_ != o.dims_ || byte_size() != o.byte_size()) return false;
    return bytes_ == o.bytes_ || byte_size() == 0 ||
           std::memcmp(data(), o.data(), static_cast<size_t>(byte_size())) == 0;
  }

 private:
  // The bytes for writing: a private copy first when another tensor shares them.
  uint8_t* own();

  // The bytes that copies share; for a deferred tensor, what computes them and a lock for that.
  struct Bytes {
    std::vector<uint8_t> v;
    size_t size = 0;  // v's size, known before a deferred tensor's bytes are computed
    std::atomic<bool> ready{true};
    std::mutex compute_lock;
    std::function<Tensor()> compute;  // set while not ready
    DType dtype = DType::kUndefined;  // what compute must return
    Dims dims;

    const uint8_t* get() {
      if (!ready.load(std::memory_order_acquire)) materialize();
      return v.data();
    }
    void materialize();
  };

  DType dtype_ = DType::kUndefined;
  Dims dims_;
  std::shared_ptr<Bytes> bytes_;  // null for a default-constructed tensor
};

}  // namespace stitch
