#include "importer/tensor_proto.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "importer/tensor_io.h"

namespace stitch {
namespace fs = std::filesystem;

namespace {

StatusOr<std::string> read_external(const onnx::TensorProto& p, const std::string& base_dir,
                                    const std::string& what, int64_t want_bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length") length = std::atoll(kv.value().c_str());
  }
  if (location.empty()) return Status::user(fmt::format("{} is stored externally but names no file", what));
  fs::path rel(location);
  if (rel.is_absolute() || rel.lexically_normal().string().rfind("..", 0) == 0)
    return Status::user(fmt::format("{} names external data '{}' outside the model's directory; keep "
                                    "external data files next to the model", what, location));
  fs::path full = fs::path(base_dir) / rel;
  std::ifstream f(full, std::ios::binary);
  if (!f)
    return Status::user(fmt::format("{} is stored in external file '{}', which cannot be opened; copy "
                                    "it next to the model", what, full.string()));
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (length < 0) length = want_bytes;
  if (offset < 0 || offset + length > size || length != want_bytes)
    return Status::user(fmt::format("{}: external file '{}' ({} bytes) does not hold {} bytes at offset {}; "
                                    "the file is truncated or does not belong to this model",
                                    what, full.string(), size, want_bytes, offset));
  std::string buf(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(buf.data(), length);
  return buf;
}

template <typename Field>
Status check_count(const Field& field, int64_t n, const std::string& what) {
  if (static_cast<int64_t>(field.size()) != n)
    return Status::user(fmt::format("{} holds {} values but its shape needs {}", what, field.size(), n));
  return Status::ok();
}

}  // namespace

StatusOr<Tensor> tensor_from_proto(const onnx::TensorProto& p, const std::string& base_dir,
                                   const std::string& what) {
  auto dt = dtype_from_onnx(p.data_type());
  if (!dt)
    return Status::user(fmt::format("{} has element type {}, which stitch does not support", what,
                                    onnx_dtype_name(p.data_type())));
  Dims dims(p.dims().begin(), p.dims().end());
  // Check the size before allocating: a corrupt file must not exhaust memory.
  constexpr int64_t kMaxElements = int64_t{1} << 38;
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status::user(fmt::format("{} has a negative dimension", what));
    if (d > 0 && count > kMaxElements / d)
      return Status::user(fmt::format("{} claims shape {}, larger than any real tensor; the file is corrupt",
                                      what, dims_to_string(dims)));
    count *= d;
  }
  int64_t need = count * dtype_size(*dt);
  if (p.data_location() != onnx::TensorProto::EXTERNAL && p.has_raw_data() &&
      static_cast<int64_t>(p.raw_data().size()) != need)
    return Status::user(fmt::format("{} holds {} bytes but its shape {} of {} needs {}; the file is "
                                    "truncated or corrupt", what, p.raw_data().size(),
                                    dims_to_string(dims), dtype_name(*dt), need));
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    ASSIGN_OR_RETURN(std::string raw, read_external(p, base_dir, what, need));
    Tensor t(*dt, dims);
    std::memcpy(t.data(), raw.data(), raw.size());
    return t;
  }
  if (!p.has_raw_data()) {
    int64_t held = 0;
    switch (*dt) {
      case DType::kF32: held = p.float_data_size(); break;
      case DType::kF64: held = p.double_data_size(); break;
      case DType::kI64: held = p.int64_data_size(); break;
      case DType::kU32: case DType::kU64: held = p.uint64_data_size(); break;
      default: held = p.int32_data_size(); break;
    }
    if (held != count)
      return Status::user(fmt::format("{} holds {} values but its shape {} needs {}", what, held,
                                      dims_to_string(dims), count));
  }
  Tensor t(*dt, dims);
  const int64_t n = t.size(), bytes = t.byte_size();
  if (p.has_raw_data()) {
    std::memcpy(t.data(), p.raw_data().data(), static_cast<size_t>(bytes));
    return t;
  }
  switch (*dt) {
    case DType::kF32:
      RETURN_IF_ERROR(check_count(p.float_data(), n, what));
      std::memcpy(t.data(), p.float_data().data(), bytes);
      break;
    case DType::kF64:
      RETURN_IF_ERROR(check_count(p.double_data(), n, what));
      std::memcpy(t.data(), p.double_data().data(), bytes);
      break;
    case DType::kI64:
      RETURN_IF_ERROR(check_count(p.int64_data(), n, what));
      std::memcpy(t.data(), p.int64_data().data(), bytes);
      break;
    case DType::kU32:
    case DType::kU64:
      RETURN_IF_ERROR(check_count(p.uint64_data(), n, what));
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, static_cast<int64_t>(p.uint64_data(i)));
      break;
    case DType::kF16:
    case DType::kBF16:
      RETURN_IF_ERROR(check_count(p.int32_data(), n, what));
      for (int64_t i = 0; i < n; ++i) t.data_as<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(i));
      break;
    default:  // i32, i16, i8, u16, u8, bool travel in int32_data
      RETURN_IF_ERROR(check_count(p.int32_data(), n, what));
      for (int64_t i = 0; i < n; ++i) t.set_i64(i, p.int32_data(i));
      break;
  }
  return t;
}

onnx::TensorProto tensor_to_proto(const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  p.set_name(name);
  p.set_data_type(dtype_to_onnx(t.dtype()));
  for (int64_t d : t.dims()) p.add_dims(d);
  p.set_raw_data(std::string(reinterpret_cast<const char*>(t.data()), static_cast<size_t>(t.byte_size())));
  return p;
}

StatusOr<NamedTensor> read_tensor_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::user(fmt::format("cannot open tensor file '{}'", path));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes))
    return Status::user(fmt::format("'{}' is not a TensorProto file (truncated or another format)", path));
  if (!p.has_data_type() || p.data_type() == 0)
    return Status::user(fmt::format("'{}' is not a TensorProto file: it has no element type", path));
  ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(p, fs::path(path).parent_path().string(), "tensor file '" + path + "'"));
  return NamedTensor{p.name(), std::move(t)};
}

Status write_tensor_file(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto p = tensor_to_proto(t, name);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f || !p.SerializeToOstream(&f))
    return Status::user(fmt::format("cannot write tensor file '{}'", path));
  return Status::ok();
}

}  // namespace stitch
