#include "ir/tensor.h"

#include <cmath>
#include <limits>
#include <utility>

#include "support/check.h"

namespace stitch {

int64_t num_elements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string dims_to_string(const Dims& dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims[i]);
  }
  return s;
}

Tensor::Tensor(DType dtype, Dims dims)
    : dtype_(dtype), dims_(std::move(dims)), bytes_(std::make_shared<Bytes>()) {
  for (int64_t d : dims_) STITCH_CHECK(d >= 0, "negative dim in {}", dims_to_string(dims_));
  bytes_->size = static_cast<size_t>(num_elements(dims_) * dtype_size(dtype));
  bytes_->v.resize(bytes_->size);
}

namespace {
std::atomic<int64_t> deferred_count{0};
}  // namespace

int64_t Tensor::deferred_computed() { return deferred_count.load(std::memory_order_relaxed); }

Tensor Tensor::deferred(DType dtype, Dims dims, std::function<Tensor()> compute) {
  Tensor t;
  t.dtype_ = dtype;
  t.dims_ = std::move(dims);
  for (int64_t d : t.dims_) STITCH_CHECK(d >= 0, "negative dim in {}", dims_to_string(t.dims_));
  t.bytes_ = std::make_shared<Bytes>();
  t.bytes_->size = static_cast<size_t>(num_elements(t.dims_) * dtype_size(dtype));
  t.bytes_->dtype = dtype;
  t.bytes_->dims = t.dims_;
  t.bytes_->compute = std::move(compute);
  t.bytes_->ready.store(false, std::memory_order_release);
  return t;
}

void Tensor::Bytes::materialize() {
  std::lock_guard<std::mutex> lock(compute_lock);
  if (ready.load(std::memory_order_acquire)) return;  // another thread computed them
  Tensor t = compute();
  STITCH_CHECK(t.dtype_ == dtype && t.dims_ == dims && t.bytes_ && t.bytes_->size == size,
               "a deferred tensor's computation gave {} {} for {} {}", dtype_name(t.dtype_),
               dims_to_string(t.dims_), dtype_name(dtype), dims_to_string(dims));
  if (t.bytes_.use_count() == 1 && t.bytes_->ready.load(std::memory_order_acquire))
    v = std::move(t.bytes_->v);
  else
    v.assign(std::as_const(t).data(), std::as_const(t).data() + size);
  compute = nullptr;  // and with it the tensors it read
  deferred_count.fetch_add(1, std::memory_order_relaxed);
  ready.store(true, std::memory_order_release);
}

uint8_t* Tensor::own() {
  if (!bytes_) return nullptr;
  bytes_->get();  // a deferred tensor's bytes first
  if (bytes_.use_count() > 1) {
    auto b = std::make_shared<Bytes>();
    b->v = bytes_->v;
    b->size = bytes_->size;
    bytes_ = std::move(b);
  }
  return bytes_->v.data();
}

Tensor Tensor::reshaped(Dims dims) const {
  STITCH_CHECK(num_elements(dims) == size(), "reshape {} -> {}", dims_to_string(dims_),
               dims_to_string(dims));
  Tensor t = *this;
  t.dims_ = std::move(dims);
  return t;
}

double Tensor::get_f64(int64_t i) const {
  const uint8_t* p = data();
  switch (dtype_) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return get_f32(i);
    case DType::kF64:
      return reinterpret_cast<const double*>(p)[i];
    case DType::kU64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    default: return static_cast<double>(get_i64(i));
  }
}

int64_t Tensor::get_i64(int64_t i) const {
  const uint8_t* p = data();
  switch (dtype_) {
    case DType::kI64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::kI32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kI16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::kI8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::kU64: return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::kU32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::kU16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::kU8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::kBool: return reinterpret_cast<const uint8_t*>(p)[i] != 0;
    default: {
      double v = get_f64(i);  // float -> int truncates toward zero, like a C cast
      if (std::isnan(v)) return 0;
      if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(v);
    }
  }
}

void Tensor::set_f64(int64_t i, double v) {
  if (dtype_ == DType::kF32 || dtype_ == DType::kF16 || dtype_ == DType::kBF16)
    return set_f32(i, static_cast<float>(v));
  uint8_t* p = own();
  switch (dtype_) {
    case DType::kF64:
      reinterpret_cast<double*>(p)[i] = v;
      return;
    case DType::kBool: reinterpret_cast<uint8_t*>(p)[i] = v != 0.0; return;
    // A float stored as an integer: toward zero, NaN as 0, a value past the type's range as its
    // nearest end (C and ONNX leave both undefined; the kernels' stitch_dev::float_to_int does
    // the same), never wrapped around.
    case DType::kU64:
      reinterpret_cast<uint64_t*>(p)[i] = std::isnan(v) || v <= 0       ? 0
                                          : v >= 18446744073709551616.0 ? int_max(dtype_)
                                                                        : static_cast<uint64_t>(v);
      return;
    default: {
      int64_t iv;
      if (std::isnan(v)) iv = 0;
      else if (v >= static_cast<double>(int_max(dtype_)))
        iv = static_cast<int64_t>(int_max(dtype_));
      else if (v <= static_cast<double>(int_min(dtype_)))
        iv = int_min(dtype_);
      else iv = static_cast<int64_t>(v);
      set_i64(i, iv);
    }
  }
}

float Tensor::get_f32(int64_t i) const {
  switch (dtype_) {
    case DType::kF32:
      return data_as<float>()[i];
    case DType::kF16:
      return half_bits_to_float(data_as<uint16_t>()[i]);
    case DType::kBF16:
      return bf16_bits_to_float(data_as<uint16_t>()[i]);
    default:
      STITCH_CHECK(false, "get_f32 of a {} tensor", dtype_name(dtype_));
      return 0;
  }
}

void Tensor::set_f32(int64_t i, float v) {
  uint8_t* p = own();
  switch (dtype_) {
    case DType::kF32:
      reinterpret_cast<float*>(p)[i] = v;
      return;
    case DType::kF16:
      reinterpret_cast<uint16_t*>(p)[i] = float_to_half_bits(v);
      return;
    case DType::kBF16:
      reinterpret_cast<uint16_t*>(p)[i] = float_to_bf16_bits(v);
      return;
    default:
      STITCH_CHECK(false, "set_f32 of a {} tensor", dtype_name(dtype_));
  }
}

void Tensor::set_i64(int64_t i, int64_t v) {
  uint8_t* p = own();
  switch (dtype_) {
    case DType::kI64: reinterpret_cast<int64_t*>(p)[i] = v; return;
    case DType::kI32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::kI16: reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DType::kI8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::kU64: reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); return;
    case DType::kU32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); return;
    case DType::kU16: reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); return;
    case DType::kU8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::kBool: reinterpret_cast<uint8_t*>(p)[i] = v != 0; return;
    default: set_f64(i, static_cast<double>(v));
  }
}

std::vector<double> Tensor::to_f64() const {
  std::vector<double> v(static_cast<size_t>(size()));
  if (dtype_ == DType::kF32) {
    const float* p = data_as<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    for (size_t i = 0; i < v.size(); ++i) v[i] = get_f64(static_cast<int64_t>(i));
  }
  return v;
}

std::vector<int64_t> Tensor::to_i64() const {
  std::vector<int64_t> v(static_cast<size_t>(size()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = get_i64(static_cast<int64_t>(i));
  return v;
}

Tensor Tensor::from_f64(DType dtype, Dims dims, const std::vector<double>& v) {
  Tensor t(dtype, std::move(dims));
  STITCH_CHECK(static_cast<int64_t>(v.size()) == t.size());
  if (dtype == DType::kF32) {
    float* p = t.data_as<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  }
  return t;
}

Tensor Tensor::from_i64(DType dtype, Dims dims, const std::vector<int64_t>& v) {
  Tensor t(dtype, std::move(dims));
  STITCH_CHECK(static_cast<int64_t>(v.size()) == t.size());
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  return t;
}

}  // namespace stitch
