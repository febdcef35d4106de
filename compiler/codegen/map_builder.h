// MapBuilder: the element-parallel kernel skeleton of the per-node lowerings (lower_map.cc).
// One thread per element of an iteration domain in a grid-stride loop; the flat index i is split into
// coordinates c0..cR-1 only as far as some operand needs them; callers add parameters, loads, body lines and
// stores. The index arithmetic is int or long long (`ix`, kernel.h's IndexWidth); callers write their own
// offsets and literals in it through ix() and lit().
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "ops/op_util.h"
#include "support/check.h"

namespace stitch::codegen {

class MapBuilder {
 public:
  MapBuilder(const Node& n, int index, Dims domain, IndexWidth ix)
      : MapBuilder(fmt::format("k{:03d}_map_{}", index, snake(n.op_type)), {&n}, std::move(domain), ix) {}
  MapBuilder(std::string name, std::vector<const Node*> nodes, Dims domain, IndexWidth ix)
      : domain_(std::move(domain)), ix_(ix) {
    k_.name = std::move(name);
    k_.nodes = std::move(nodes);
    uses_.assign(domain_.size(), false);
  }

  // The kernel parameter for `v` (one per distinct value).
  std::string param(const Value* v, bool output) {
    for (const KernelParam& p : k_.params)
      if (p.value == v && p.output == output) return p.name;
    std::string name = fmt::format("{}{}", output ? "y" : "x", output ? outs_++ : ins_++);
    k_.params.push_back({name, v, output});
    const int64_t bytes = num_elements(*v->dims) * dtype_size(v->dtype);
    k_.bytes_moved += bytes;
    return name;
  }
  // The kernel being built (a StitchIndexCheck's expression adds its fault to it).
  Kernel& kernel() { return k_; }
  // A run-time check of `n` (kernel.h's fault_call and index_check).
  std::string fault(const Node& n, const std::string& message, const std::string& value) {
    return fault_call(k_, n, message, value);
  }
  void check_index(const Node& n, const std::string& j, int64_t data_axis, int64_t component = -1) {
    line(index_check(k_, n, j, data_axis, component));
  }
  std::string coord(size_t d) {
    uses_[d] = true;
    return fmt::format("c{}", d);
  }
  std::string flat() {
    uses_i_ = true;
    return "i";
  }
  const IndexWidth& ix() const { return ix_; }
  std::string lit(int64_t v) const { return ix_.lit(v); }
  // base + sum(c_d * stride_d); "i" when that is the flat index itself.
  std::string affine(int64_t base, const Dims& strides) {
    if (base == 0 && strides == ops::strides_of(domain_)) return flat();
    std::string s;
    for (size_t d = 0; d < strides.size(); ++d) {
      if (strides[d] == 0 || domain_[d] == 1) continue;
      std::string term = strides[d] == 1 ? coord(d) : fmt::format("{} * {}", coord(d), lit(strides[d]));
      if (!s.empty()) s += " + ";
      s += term;
    }
    if (base != 0 || s.empty()) s = s.empty() ? lit(base) : fmt::format("{} + {}", lit(base), s);
    return s;
  }
  // Loads v[offset] converted to its compute type.
  std::string load(const Value* v, const std::string& offset) {
    const std::string p = param(v, false);
    const std::string ct = compute_type(v->dtype), st = storage_type(v->dtype);
    if (ct == st) return fmt::format("{}[{}]", p, offset);
    return fmt::format("stitch_dev::cvt<{}>({}[{}])", ct, p, offset);
  }
  // y[offset] = value (value in the compute type of v).
  void store(const Value* v, const std::string& offset, const std::string& value) {
    const std::string p = param(v, true);
    const std::string ct = compute_type(v->dtype), st = storage_type(v->dtype);
    if (ct == st) line(fmt::format("{}[{}] = {};", p, offset, value));
    else line(fmt::format("{}[{}] = stitch_dev::cvt<{}>({});", p, offset, st, value));
  }
  void line(const std::string& s) { body_.push_back(std::string(static_cast<size_t>(2 * depth_), ' ') + s); }
  void indent(int delta) { depth_ += delta; }

  // The kernel; with `part_name`, a part of a packed kernel (lower_packed) instead: a static
  // __device__ function of that name taking the parameters, then its block index and count.
  Kernel finish(const std::string& mapping_extra = "", const std::string& part_name = "") {
    const int64_t n = num_elements(domain_);
    k_.block = {kMapBlock, 1, 1};
    k_.grid = {std::clamp<int64_t>((n + kMapBlock - 1) / kMapBlock, 1, kMaxMapBlocks), 1, 1};
    k_.mapping = fmt::format("grid-stride loop, one thread per element of {} ({} elements){}",
                             dims_to_string(domain_), n, mapping_extra);
    CudaWriter w;
    const char* t = ix_.type();
    std::string first = fmt::format("({})blockIdx.x", t), blocks = fmt::format("({})gridDim.x", t);
    if (part_name.empty()) {
      w.raw_line(kernel_header(k_));
      open_kernel(w, k_, kMapBlock);
    } else {
      k_.name = part_name;
      w.line("// {}: {}", k_.name, k_.mapping);
      w.open("static __device__ __forceinline__ void {}({}, const long long bid, const long long nblk)",
             k_.name, kernel_signature(k_));
      first = fmt::format("({})bid", t), blocks = fmt::format("({})nblk", t);
    }
    w.line("const {} n = {};", t, lit(n));
    w.open("for ({0} i = {1} * blockDim.x + threadIdx.x; i < n; i += {2} * blockDim.x)", t, first, blocks);
    if (n == 0) {
      w.comment("empty domain: nothing to compute");
    } else {
      emit_coords(w);
      for (const std::string& s : body_) w.raw_line(s);
    }
    w.close();
    w.close();
    k_.source = w.text();
    return std::move(k_);
  }

  const Dims& domain() const { return domain_; }

 private:
  // c_d for the used dims, innermost first: c_d = t % D_d; t /= D_d.
  void emit_coords(CudaWriter& w) {
    int lowest = -1;
    for (size_t d = 0; d < uses_.size(); ++d)
      if (uses_[d]) { lowest = static_cast<int>(d); break; }
    if (lowest < 0) return;
    const int r = static_cast<int>(domain_.size());
    const char* t = ix_.type();
    if (lowest == r - 1 && r == 1) {
      w.line("const {} c0 = i;", t);
      return;
    }
    w.line("{} t = i;", t);
    for (int d = r - 1; d >= lowest; --d) {
      if (d == 0) {
        w.line("const {} c0 = t;", t);
        break;
      }
      if (uses_[d]) w.line("const {} c{} = t % {};", t, d, lit(domain_[d]));
      if (d > lowest) w.line("t /= {};", lit(domain_[d]));
    }
  }

  Dims domain_;
  IndexWidth ix_;
  Kernel k_;
  std::vector<bool> uses_;
  bool uses_i_ = false;
  int ins_ = 0, outs_ = 0, depth_ = 0;
  std::vector<std::string> body_;
};

// Emits per-element nodes (scalar_ops.h) over the builder's domain in order: external inputs are
// loaded once at their broadcast offsets, each result is a named register (`reg` maps values to
// the expressions that hold them; callers may pre-bind values), and values in `stored` are
// written at the flat index. Every node's output must have the domain's shape. (lower_map.cc)
Status emit_chain(MapBuilder& b, const std::vector<const Node*>& nodes, std::map<const Value*, std::string>& reg,
                  const std::set<const Value*>& stored);

// Such an index, checked, in the kernel's index type.
inline std::string narrow(const IndexWidth& ix, const std::string& j) {
  return ix.narrow ? fmt::format("(int){}", j) : j;
}

}  // namespace stitch::codegen
