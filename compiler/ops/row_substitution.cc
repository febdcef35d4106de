// StitchRowSubstitution's shape rule and reference (row_substitution.h).
#include "ops/row_substitution.h"

#include <fmt/format.h>

#include <vector>

#include "ir/op_table.h"
#include "ops/op_util.h"

namespace stitch::ops {

bool row_substitution_addend(const Value* v, int64_t size) {
  if (!v || !v->constant || v->dtype != DType::kF32 || !v->has_static_shape()) return false;
  const Dims& d = *v->dims;
  if (d.size() < 2 || d[d.size() - 1] != size || d[d.size() - 2] != size) return false;
  for (size_t k = 0; k + 2 < d.size(); ++k)
    if (d[k] != 1) return false;
  return true;
}

namespace {

Status infer_row_substitution(InferContext& ctx) {
  const Node& n = ctx.node();
  if (ctx.dtype(0) != DType::kF32)
    return Status::internal(
        fmt::format("{} on {}: only float32 is written", n.describe(), dtype_name(ctx.dtype(0))));
  const Dims& d = ctx.dims(0);
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    return Status::internal(
        fmt::format("{}: input 0 {} is not square in its last two axes", n.describe(), dims_to_string(d)));
  const int64_t first = n.attr_int("first", 0), last = n.attr_int("last", 0);
  if (first < 1 || last < first || last >= d.back())
    return Status::internal(
        fmt::format("{}: steps {} to {} do not lie in [1, {})", n.describe(), first, last, d.back()));
  if (ctx.num_inputs() > 1 && ctx.has_input(1)) {
    const Value* c = n.input(1);
    if (!row_substitution_addend(c, d.back()) || c->dims->size() > d.size())
      return Status::internal(fmt::format("{}: input 1 is not a float32 constant of {} x {} elements",
                                          n.describe(), d.back(), d.back()));
  }
  return same_as_input0(ctx);
}

Status eval_row_substitution(const Node& n, std::span<const Tensor* const> in, std::vector<Tensor>& out) {
  const Tensor& x = *in[0];
  const int64_t size = x.dims().back(), first = n.attr_int("first", 0), last = n.attr_int("last", 0);
  const int64_t matrices = size == 0 ? 0 : x.size() / (size * size);
  Tensor y = x;
  float* s = y.data_as<float>();
  std::vector<float> a(static_cast<size_t>(size));
  for (int64_t m = 0; m < matrices; ++m) {
    float* mat = s + m * size * size;
    for (int64_t i = first; i <= last; ++i) {
      for (int64_t j = 0; j < i; ++j) a[static_cast<size_t>(j)] = mat[i * size + j];
      for (int64_t k = 0; k < i; ++k) {
        double sum = 0.0;
        for (int64_t j = 0; j < i; ++j)
          sum += static_cast<double>(a[static_cast<size_t>(j)] * mat[j * size + k]);
        mat[i * size + k] = a[static_cast<size_t>(k)] + static_cast<float>(sum);
      }
    }
    if (in.size() > 1 && in[1])
      for (int64_t e = 0; e < size * size; ++e) mat[e] = mat[e] + in[1]->data_as<float>()[e];
  }
  out[0] = std::move(y);
  return Status::ok();
}

}  // namespace

void register_row_substitution(std::vector<OpDef>& t) {
  t.push_back({kRowSubstitution, kMinOpset, kMaxOpset, OpCategory::kOpaque, infer_row_substitution,
               eval_row_substitution, nullptr, /*internal=*/true});
}

}  // namespace stitch::ops
