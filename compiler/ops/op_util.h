// Helpers shared by the op rows: axis handling, broadcasting, attribute or
// input operands, and the registration list.
#pragma once

#include <fmt/format.h>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/op_table.h"
#include "ops/op_params.h"
#include "support/check.h"

namespace stitch::ops {

// Registration: each op family file appends its rows.
void register_unary(std::vector<OpDef>& table);
void register_elementwise(std::vector<OpDef>& table);
void register_casts(std::vector<OpDef>& table);
void register_reduce(std::vector<OpDef>& table);
void register_normalization(std::vector<OpDef>& table);
void register_layout(std::vector<OpDef>& table);
void register_gather_scatter(std::vector<OpDef>& table);
void register_nn(std::vector<OpDef>& table);
void register_pool(std::vector<OpDef>& table);
void register_shape(std::vector<OpDef>& table);
void register_resize(std::vector<OpDef>& table);
void register_einsum(std::vector<OpDef>& table);
void register_attention(std::vector<OpDef>& table);
void register_signal(std::vector<OpDef>& table);
void register_recurrent(std::vector<OpDef>& table);
void register_quantize(std::vector<OpDef>& table);
void register_integer_gemm(std::vector<OpDef>& table);
void register_grid_sample(std::vector<OpDef>& table);
void register_loss(std::vector<OpDef>& table);
void register_blocks(std::vector<OpDef>& table);
void register_row_substitution(std::vector<OpDef>& table);

inline Status node_error(const Node& n, const std::string& msg) {
  return Status::user(fmt::format("{}: {}", n.describe(), msg));
}

// Normalises a possibly negative axis against `rank`; error if out of range (a scalar has none).
inline StatusOr<int64_t> norm_axis(const Node& n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return node_error(n, rank == 0 ? fmt::format("axis {} is given for a scalar, which has no axes", axis)
                                   : fmt::format("axis {} is out of range for rank {}", axis, rank));
  return axis < 0 ? axis + rank : axis;
}

// The keys an Attention query sees besides its mask (opsets 23 to 25): with is_causal, none after
// its absolute position p = offset + i (offset: the keys cached before the queries); with a
// sliding window (opset 25), only those in [p - left, p + right], -1 leaving a side unbounded.
struct AttentionWindow {
  bool causal = false;
  int64_t left = -1, right = -1;
  static AttentionWindow of(const Node& n) {
    return {n.attr_int("is_causal", 0) != 0, n.attr_int("left_window_size", -1),
            n.attr_int("right_window_size", -1)};
  }
  bool bounded() const { return causal || left >= 0 || right >= 0; }
  bool visible(int64_t offset, int64_t i, int64_t j) const {
    const int64_t p = offset + i;
    return !(causal && j > p) && !(left >= 0 && j < p - left) && !(right >= 0 && j > p + right);
  }
};

// Whether TensorScatter `n` may write its update into its past_cache's storage: past_cache is a
// graph input (storage the runtime owns and the caller cannot read back) that nothing else reads
// and that is not itself a graph output. Its present_cache then shares that storage, and a
// decoding loop carries it to the next step without copying the cache (Session::carry).
bool tensor_scatter_in_place(const Graph& g, const Node& n);

// Numpy-style broadcast of two shapes; nullopt if incompatible.
std::optional<Dims> broadcast_dims(const Dims& a, const Dims& b);

// Row-major strides of `dims`.
Dims strides_of(const Dims& dims);
// out[i] = src[base + sum(idx[d] * strides[d])] for every output index, element bytes copied
// (exact for every type): the reference's transposes, slices and broadcasts.
Tensor copy_strided(const Tensor& src, const Dims& out_dims, int64_t base, const Dims& strides);

// Strides of `in` aligned to the broadcast output `out` (0 on broadcast axes).
Dims broadcast_strides(const Dims& in, const Dims& out);

// Visits every index of `out` in row-major order, tracking one offset per
// input (with its broadcast strides). f(out_index, offsets...).
class BroadcastWalker {
 public:
  BroadcastWalker(const Dims& out, std::vector<Dims> in_strides);
  template <typename F>
  void run(F&& f) {
    const int64_t n = num_elements(out_);
    const size_t k = strides_.size();
    std::vector<int64_t> off(k, 0);
    std::vector<int64_t> idx(out_.size(), 0);
    const int64_t r = static_cast<int64_t>(out_.size());
    for (int64_t i = 0; i < n; ++i) {
      f(i, off);
      for (int64_t d = r - 1; d >= 0; --d) {
        if (++idx[d] < out_[d]) {
          for (size_t j = 0; j < k; ++j) off[j] += strides_[j][d];
          break;
        }
        for (size_t j = 0; j < k; ++j) off[j] -= strides_[j][d] * (out_[d] - 1);
        idx[d] = 0;
      }
    }
  }

 private:
  Dims out_;
  std::vector<Dims> strides_;
};

// The error for an operand stitch needs at compile time that only the run knows: what to bind
// when shapes decide it, or that a graph input must become an initializer.
Status run_time_operand_error(const InferContext& ctx, size_t input, const char* what);

// The int64 contents of a constant 1-D (or scalar) tensor input, or an error
// naming the input when it is not a compile-time constant.
StatusOr<std::vector<int64_t>> const_ints(const InferContext& ctx, size_t input,
                                          const char* what);

// Axes given as attribute `attr` (older opsets) or as input `input` (newer).
// Returns nullopt when neither is given.
StatusOr<std::optional<std::vector<int64_t>>> axes_operand(const InferContext& ctx,
                                                           size_t input, const char* attr);
// The same at evaluation time.
std::optional<std::vector<int64_t>> axes_operand_eval(const Node& n,
                                                      std::span<const Tensor* const> in,
                                                      size_t input, const char* attr);

// The element types and shapes of a node's inputs (at shape inference, or of the tensors an
// evaluation reads), an omitted input's dims null: what quant_spec and integer_gemm_spec check.
std::vector<QuantOperand> quant_operands(const InferContext& ctx);
std::vector<QuantOperand> quant_operands(std::span<const Tensor* const> in);

// No-op test: output 0 has exactly input 0's dtype and dims.
bool same_type_as_input0(const Node& n);

// Shape rule that copies input 0's dtype and dims to output 0.
Status same_as_input0(InferContext& ctx);

}  // namespace stitch::ops
