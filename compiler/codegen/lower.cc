// Dispatch of single nodes to their lowering, and what every generated file starts with.
#include "codegen/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>

#include "codegen/cuda_writer.h"
#include "codegen/library.h"
#include "codegen/scalar_ops.h"
#include "ir/op_table.h"
#include "ops/index_check.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "ops/row_substitution.h"
#include "ops/value_range.h"
#include "stitch/artifact_format.h"
#include "support/check.h"

namespace stitch::codegen {

std::string storage_type(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF16: return "__half";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kF64: return "double";
    case DType::kI64: return "long long";
    case DType::kI32: return "int";
    case DType::kI16: return "short";
    case DType::kI8: return "signed char";
    case DType::kU64: return "unsigned long long";
    case DType::kU32: return "unsigned int";
    case DType::kU16: return "unsigned short";
    case DType::kU8: return "unsigned char";
    case DType::kBool: return "bool";
    case DType::kUndefined: break;
  }
  return "void";
}

std::string compute_type(DType t) {
  switch (t) {
    case DType::kF32: case DType::kF16: case DType::kBF16: return "float";
    case DType::kF64: return "double";
    case DType::kU64: return "unsigned long long";
    case DType::kBool: return "bool";
    case DType::kUndefined: return "void";
    default: return "long long";
  }
}

int compute_bytes(const std::string& ct) {
  return ct == "double" || ct == "long long" || ct == "unsigned long long" ? 8 : 4;
}

std::string type_tag(const std::string& ct) {
  if (ct == "double") return "d";
  if (ct == "long long") return "i";
  if (ct == "unsigned long long") return "u";
  if (ct == "bool") return "b";
  return "f";
}

std::string snake(const std::string& s) {
  std::string r;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

namespace {

bool is_one_of(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

bool view_op(const Node& n) {
  if (is_one_of(n.op_type, {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})) return true;
  // Dropout in inference mode copies its input; the mask output is not produced here.
  return n.op_type == "Dropout" && n.output(1) == nullptr;
}

}  // namespace

NodeLowering classify_node(const Node& n, std::string* why) {
  auto unsupported = [&](const std::string& reason) {
    if (why) *why = reason;
    return NodeLowering::kUnsupported;
  };
  const std::string& op = n.op_type;
  for (const Value* v : n.outputs)
    if (v && (!v->has_static_shape() || v->dtype == DType::kUndefined))
      return unsupported("an output has no static shape; bind every dynamic input with --shape");
  if (view_op(n)) return NodeLowering::kView;
  if (is_one_of(op, {"MatMul", "Gemm", "Conv"})) {
    if (!is_float(n.output(0)->dtype))
      return unsupported(fmt::format("{} on {} is not supported by the back end (f32, f16, bf16 and f64 are)",
                                     op, dtype_name(n.output(0)->dtype)));
    return NodeLowering::kLibrary;
  }
  if (op == "ConvTranspose") {
    if (!is_float(n.output(0)->dtype))
      return unsupported(
          fmt::format("ConvTranspose on {} is not supported by the back end (f32, f16, bf16 and f64 are)",
                      dtype_name(n.output(0)->dtype)));
    // Forms the call does not take were written as a Conv by expand_conv_transpose where the
    // weights are constants.
    if (Status s = conv_transpose_call(n); !s.is_ok()) {
      if (n.input(1)->constant)  // its output is empty after the crop: no form of it applies
        return unsupported(fmt::format("{}, and no convolution computes it", s.message()));
      return unsupported(
          fmt::format("{}; stitch writes such a ConvTranspose as a convolution by weights known at "
                      "compile time, and its weights (input 1 '{}') are computed at run time: make "
                      "them an initializer, a constant in the model",
                      s.message(), n.input(1)->name));
    }
    return NodeLowering::kLibrary;
  }
  if (has_scalar_expr(n)) {
    if (op == "BatchNormalization" && n.outputs.size() > 1 && n.output(1))
      return unsupported("training-mode BatchNormalization (running statistics outputs) is not supported");
    return NodeLowering::kKernel;
  }
  if (is_one_of(op, {"Trilu",
                     "Transpose",
                     "Slice",
                     "Expand",
                     "Tile",
                     "Pad",
                     "Concat",
                     "Split",
                     "Gather",
                     "GatherElements",
                     "GatherND",
                     "Col2Im",
                     "ScatterElements",
                     "ScatterND",
                     "TensorScatter",
                     "ReduceSum",
                     "ReduceMean",
                     "ReduceMax",
                     "ReduceMin",
                     "ReduceProd",
                     "ReduceL1",
                     "ReduceL2",
                     "ReduceLogSum",
                     "ReduceLogSumExp",
                     "ReduceSumSquare",
                     "ArgMax",
                     "ArgMin",
                     "TopK",
                     "Softmax",
                     "LogSoftmax",
                     "Hardmax",
                     "LayerNormalization",
                     "InstanceNormalization",
                     "CumSum",
                     "CumProd",
                     "GlobalAveragePool",
                     "GlobalMaxPool",
                     "AveragePool"}))
    return NodeLowering::kKernel;
  if (op == "MaxPool") {
    if (n.output(1)) return unsupported("MaxPool's Indices output is not supported by the back end");
    return NodeLowering::kKernel;
  }
  if (op == "Dropout") return NodeLowering::kKernel;  // with its mask output
  if (op == ops::kRowSubstitution) return NodeLowering::kKernel;
  // The front end writes a DFT as a GEMM by its weights (expand_dft) unless they are too many.
  if (op == "DFT")
    return unsupported(
        fmt::format("a transform this long would need a weight matrix of more than {} elements to "
                    "run as a GEMM, and the back end has no FFT kernel; transform shorter signals "
                    "(dft_length) or run it with --backend reference",
                    ops::kMaxDftWeights));
  // The front end writes a recurrence out step by step (expand_recurrent) when its length is known.
  if (op == "LSTM" || op == "GRU" || op == "RNN")
    return unsupported(fmt::format(
        "stitch writes a recurrence out step by step, which takes its sequence length known at compile time "
        "(bind it with --shape) and at most {} steps over all directions; the back end has no kernel for a "
        "longer one (shorten the sequence, or run it with --backend reference)",
        ops::kMaxRecurrentSteps));
  return unsupported(fmt::format("the back end has no kernel for {} yet (the reference backend runs it: "
                                 "stitchc run MODEL --backend reference)", op));
}

StatusOr<Kernel> lower_node(const Node& n, int index, int64_t index32_limit) {
  const IndexWidth ix = index_width({&n}, index32_limit);
  if (n.def && n.def->category == OpCategory::kReduction) return lower_reduce(n, index, ix);
  if (n.op_type == ops::kRowSubstitution) return lower_reduce(n, index, ix);
  if (n.op_type == "MaxPool" || n.op_type == "AveragePool") return lower_pool(n, index, ix);
  if (n.op_type == "GlobalAveragePool" || n.op_type == "GlobalMaxPool") return lower_reduce(n, index, ix);
  return lower_map(n, index, ix);
}

std::string kernel_signature(const Kernel& k) {
  std::string sig;
  for (const KernelParam& p : k.params) {
    if (!sig.empty()) sig += ", ";
    const std::string st = storage_type(p.value->dtype);
    sig += fmt::format("{}{}* __restrict__ {}", p.output ? "" : "const ", st, p.name);
  }
  return sig;
}

namespace {
std::string launch_bounds(const Kernel& k, int64_t block) {
  const std::string bounds =
      k.min_blocks_per_sm > 0 ? fmt::format("{}, {}", block, k.min_blocks_per_sm) : std::to_string(block);
  return fmt::format("__launch_bounds__({}) {}(", bounds, k.name);
}
}  // namespace

void open_kernel(CudaWriter& w, const Kernel& k, int64_t block) {
  w.open("extern \"C\" __global__ void {}{})", launch_bounds(k, block), kernel_signature(k));
}

std::optional<int64_t> register_room(const Kernel& k, int registers) {
  const int64_t block = k.block[0] * k.block[1] * k.block[2];
  const int64_t min_blocks = std::max<int64_t>(1, kRegistersPerSm / (block * registers));
  if (k.min_blocks_per_sm > 0 && k.min_blocks_per_sm <= min_blocks) return std::nullopt;
  return min_blocks;
}

bool give_register_room(Kernel& k, int registers) {
  const std::optional<int64_t> min_blocks = register_room(k, registers);
  if (!min_blocks) return false;
  const std::string was = launch_bounds(k, k.block[0]);
  const size_t at = k.source.find(was);
  STITCH_CHECK(at != std::string::npos && k.source.find(was, at + 1) == std::string::npos,
               "kernel {}: its entry's launch bounds not found once", k.name);
  k.min_blocks_per_sm = *min_blocks;
  k.source.replace(at, was.size(), launch_bounds(k, k.block[0]));
  return true;
}

int64_t resident_blocks_per_sm(const Kernel& k, int registers, const SmLimits& sm) {
  const int64_t block = k.block[0] * k.block[1] * k.block[2];
  if (block <= 0 || registers <= 0) return 0;
  const int64_t warps = (block + 31) / 32;
  const int64_t per_warp = (registers + 7) / 8 * 8 * 32;
  const int64_t smem = k.smem_bytes + k.static_smem_bytes + kSmemReservedPerBlock;
  return std::min(
      {sm.registers / (warps * per_warp), sm.threads / (warps * 32), sm.smem / smem, kMaxBlocksPerSm});
}

bool grid_resident(const Kernel& k, int registers, int64_t sms, const SmLimits& sm) {
  const int64_t blocks = k.grid[0] * k.grid[1] * k.grid[2];
  return blocks <= sms * resident_blocks_per_sm(k, registers, sm);
}

void open_tile(CudaWriter& w, const std::string& block, const std::string& var, int64_t count,
               const std::string& index_type) {
  const char* ll = index_type == "int" ? "" : "LL";
  w.line("const {} first = {} * {}{} + (threadIdx.x % {});", index_type, block, kTileSegments, ll,
         kTileSegments);
  w.line("const bool live = first < {}{};", count, ll);
  w.line("const {} {} = live ? first : {}{};", index_type, var, count - 1, ll);
  w.line("const int lane = threadIdx.x / {};", kTileSegments);
  w.line("const int step = {};", kTileBlock / kTileSegments);
}

const Value* fault_word() {
  static const Value word = [] {
    Value v;
    v.name = "stitch.fault_word";
    v.dtype = DType::kU64;
    v.dims = Dims{2};
    return v;
  }();
  return &word;
}

uint64_t add_fault(Kernel& k, const Node& n, const std::string& message) {
  const auto [node, op] = ops::checked_node(n);
  const std::string key = node + '\0' + message;
  uint64_t code = artifact::checksum(key.data(), key.size());
  if (code == 0) code = 1;  // 0 is "no fault"
  for (const KernelFault& f : k.faults) {
    if (f.code != code) continue;
    STITCH_CHECK(f.node == node && f.message == message, "kernel {}: two run-time checks share code {:x}",
                 k.name, code);
    return code;
  }
  k.faults.push_back({code, node, op, message});
  return code;
}

namespace {
// The fault word's parameter name, added to k.params at the first check.
std::string fault_param(Kernel& k) {
  if (std::none_of(k.params.begin(), k.params.end(),
                   [](const KernelParam& p) { return p.value == fault_word(); }))
    k.params.push_back({"fault", fault_word(), true});
  return "fault";
}
}  // namespace

std::string fault_call(Kernel& k, const Node& n, const std::string& message, const std::string& value) {
  const uint64_t code = add_fault(k, n, message);
  return fmt::format("stitch_dev::fault({}, {}ull, {});", fault_param(k), code, value);
}

std::string index_check_expr(Kernel& k, const Node& n, const std::string& x) {
  const ops::IndexBounds b = ops::index_check_bounds(n);
  const uint64_t code = add_fault(k, n, b.message);
  auto bound = [](int64_t v) {  // -2^63 has no literal of its own
    return v == std::numeric_limits<int64_t>::min() ? std::string("(-9223372036854775807LL - 1)")
                                                    : fmt::format("{}LL", v);
  };
  if (b.nonzero)  // a divisor (passes/check_divisors.cc): its whole type else
    return fmt::format("stitch_dev::checked_nonzero({}, {}ull, {})", fault_param(k), code, x);
  return fmt::format("stitch_dev::checked({}, {}ull, {}, {}, {})", fault_param(k), code, x, bound(b.min),
                     bound(b.max));
}

std::string index_check(Kernel& k, const Node& n, const std::string& j, int64_t data_axis,
                        int64_t component) {
  const Value *data = n.input(0), *ind = n.input(1);
  const int64_t dim = (*data->dims)[static_cast<size_t>(data_axis)];
  const int64_t tuple = component < 0 ? 1 : ind->dims->back();
  if (known_in_range(ind, dim, tuple, std::max<int64_t>(component, 0)))
    return fmt::format("if ({0} < 0) {0} += {1}LL;", j, dim);
  const std::string what =
      component < 0 ? fmt::format("index {{value}} of '{}'", ind->name)
                    : fmt::format("index {{value}} of '{}' (component {} of a tuple)", ind->name, component);
  const std::string report = fault_call(
      k, n,
      fmt::format("{}, along axis {} of '{}', is outside [-{}, {})", what, data_axis, data->name, dim, dim),
      j);
  return fmt::format(
      "if ({0} < -{1}LL || {0} >= {1}LL) {{ {2} {0} = 0; }} else if ({0} < 0) {{ {0} += {1}LL; }}", j, dim,
      report);
}

bool known_in_range(const Value* ind, int64_t dim, int64_t stride, int64_t offset) {
  if (!ind) return false;
  if (!ind->is_constant()) {
    const std::optional<ops::IntRange> r = ops::int_range(ind);
    return r && r->min >= -dim && r->max < dim;
  }
  const std::vector<int64_t> v = ind->constant->to_i64();
  for (size_t i = static_cast<size_t>(offset); i < v.size(); i += static_cast<size_t>(stride))
    if (v[i] < -dim || v[i] >= dim) return false;
  return true;
}

std::string kernel_header(const Kernel& k, const std::string& extra) {
  std::string s = fmt::format("// {}: generated by stitchc; do not edit.\n", k.name);
  for (const Node* n : k.nodes) {
    s += fmt::format("//   node '{}' ({})\n", n->name, n->op_type);
    for (const Value* v : n->inputs)
      if (v) s += fmt::format("//     in  {:<28} {}\n", v->name, v->type_string());
    for (const Value* v : n->outputs)
      if (v) s += fmt::format("//     out {:<28} {}\n", v->name, v->type_string());
  }
  s += k.nodes.size() == 1 ? fmt::format("//   group: one node (unfused); mapping: {}\n", k.mapping)
                           : fmt::format("//   group: {} nodes stitched; mapping: {}\n", k.nodes.size(), k.mapping);
  s += fmt::format("//   launch: grid {}x{}x{}, block {}x{}x{}, {} B dynamic shared memory\n", k.grid[0], k.grid[1],
                   k.grid[2], k.block[0], k.block[1], k.block[2], k.smem_bytes);
  s += fmt::format("//   global memory: {} B read and written\n", k.bytes_moved);
  if (!extra.empty()) s += extra;
  s += "#include \"stitch_device.cuh\"\n";
  return s;
}

}  // namespace stitch::codegen
