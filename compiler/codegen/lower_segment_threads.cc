// Segment kernels with one thread per segment: ArgMax/ArgMin, TopK, Hardmax, CumSum/CumProd and the
// row-by-row triangular solve. The segments and the kernel writer are in codegen/segment_kernel.h;
// the ops that combine a segment through a tree are in lower_reduce.cc.
#include <fmt/format.h>

#include "codegen/scalar_ops.h"
#include "codegen/segment_kernel.h"
#include "ops/op_params.h"
#include "ops/op_util.h"
#include "ops/row_substitution.h"

namespace stitch::codegen::segments {

using ops::strides_of;

// ArgMax / ArgMin: one thread per segment, first (or last) extreme index.
StatusOr<Kernel> lower_arg(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", 0), r));
  std::vector<bool> red(r, false);
  red[axis] = true;
  Segments seg = make_segments(dims(x), red);
  SegmentKernel k(n, index, seg, Mapping::kThread, "red", ix);
  const std::string ct = compute_type(x->dtype);
  const bool last = n.attr_int("select_last_index", 0) != 0, is_max = n.op_type == "ArgMax";
  k.w().line("long long best = 0;");
  k.w().line("{} bv = {};", ct, k.load(x, "base", ct));
  k.begin_loop();
  k.w().line("const {} c = {};", ct, k.load(x, "off", ct));
  k.w().line("if (c {} bv{}) {{ best = r; bv = c; }}", is_max ? ">" : "<", last ? " || c == bv" : "");
  k.end_loop();
  k.w().line("{}", k.store(n.output(0), "o", "best"));
  return k.finish(n.op_type);
}

// TopK: one thread per segment picks the k elements in order, each the best of those that come
// after the previous pick (by value, then by index, the lower first): k passes over the segment,
// for the few experts of a mixture-of-experts router (4 to 256 per token, k of 1 to 8).
StatusOr<Kernel> lower_topk(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.attr_int("axis", -1), r));
  if (!n.input(1) || !n.input(1)->is_constant())
    return Status::user(fmt::format("{}: K must be a constant for the back end", n.describe()));
  const int64_t kk = n.input(1)->constant->get_i64(0);
  std::vector<bool> red(r, false);
  red[axis] = true;
  Segments seg = make_segments(dims(x), red);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < r; ++d) inner *= dims(x)[d];
  SegmentKernel k(n, index, seg, Mapping::kThread, "topk", ix);
  const std::string ct = compute_type(x->dtype), it = ix.type();
  const bool largest = n.attr_int("largest", 1) != 0;
  // NaN orders above every number (as ONNX's reference implementation and PyTorch put it): first
  // when the largest are taken, last when the smallest are.
  auto gt = [](const char* a, const char* b) {
    return fmt::format("(({0} != {0} && {1} == {1}) || {0} > {1})", a, b);
  };
  auto eq = [](const char* a, const char* b) {
    return fmt::format("({0} == {1} || ({0} != {0} && {1} != {1}))", a, b);
  };
  const std::string better = largest ? gt("c", "bv") : gt("bv", "c");
  const std::string after = largest ? gt("pv", "c") : gt("c", "pv");
  k.w().line("{} pi = -1;", it);
  k.w().line("{} pv = 0;", ct);
  k.w().open("for ({0} j = 0; j < {1}; ++j)", it, k.lit(kk));
  k.w().line("{} bi = -1;", it);
  k.w().line("{} bv = 0;", ct);
  k.begin_loop();
  k.w().line("const {} c = {};", ct, k.load(x, "off", ct));
  k.w().line("const bool after = pi < 0 || {} || ({} && r > pi);", after, eq("c", "pv"));
  k.w().line("if (after && (bi < 0 || {})) {{ bi = r; bv = c; }}", better);
  k.end_loop();
  const std::string at =
      inner == 1 ? fmt::format("o * {} + j", k.lit(kk))
                 : fmt::format("(o / {0}) * {1} + j * {0} + o % {0}", k.lit(inner), k.lit(kk * inner));
  k.w().line("{}", k.store(n.output(0), at, "bv"));
  if (n.outputs.size() > 1 && n.output(1)) k.w().line("{}", k.store(n.output(1), at, "(long long)bi"));
  k.w().line("pi = bi;");
  k.w().line("pv = bv;");
  k.w().close();
  return k.finish(
      fmt::format("TopK: {} passes, each the next {} element", kk, largest ? "largest" : "smallest"));
}

// Hardmax: 1 at the first maximum of each segment, 0 elsewhere; one thread per segment.
StatusOr<Kernel> lower_hardmax(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  ASSIGN_OR_RETURN(Segments seg, softmax_segments(n));
  SegmentKernel k(n, index, seg, Mapping::kThread, "row", ix);
  const std::string ct = compute_type(x->dtype);
  k.w().line("long long best = 0;");
  k.w().line("{} bv = {};", ct, k.load(x, "base", ct));
  k.begin_loop();
  k.w().line("const {} c = {};", ct, k.load(x, "off", ct));
  k.w().line("if (c > bv) {{ best = r; bv = c; }}");
  k.end_loop();
  k.begin_loop();
  k.w().line("{}", k.store(n.output(0), "off", "r == best ? 1 : 0"));
  k.end_loop();
  return k.finish("Hardmax: first maximum, then write");
}

// ---- CumSum -------------------------------------------------------------------------------------

StatusOr<Kernel> lower_cumsum(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const int64_t r = static_cast<int64_t>(dims(x).size());
  if (!n.input(1) || !n.input(1)->is_constant())
    return Status::user(fmt::format("{}: axis must be a compile-time constant", n.describe()));
  ASSIGN_OR_RETURN(int64_t axis, ops::norm_axis(n, n.input(1)->constant->get_i64(0), r));
  std::vector<bool> red(r, false);
  red[axis] = true;
  Segments seg = make_segments(dims(x), red);
  SegmentKernel k(n, index, seg, Mapping::kThread, "scan", ix);
  const std::string ct = compute_type(x->dtype);
  const bool exclusive = n.attr_int("exclusive", 0) != 0, reverse = n.attr_int("reverse", 0) != 0;
  const bool prod = n.op_type == "CumProd";
  const int64_t stride = strides_of(dims(x))[axis];
  k.w().line("{} acc = {};", ct, prod ? 1 : 0);
  const char* t = k.ix().type();
  k.w().open("for ({} j = 0; j < {}; ++j)", t, k.lit(seg.len));
  k.w().line("const {} off = base + ({}) * {};", t, reverse ? fmt::format("{} - 1 - j", k.lit(seg.len)) : "j",
             k.lit(stride));
  k.w().line("const {} v = {};", ct, k.load(x, "off", ct));
  const char* step = prod ? "acc *= v;" : "acc += v;";
  if (exclusive) {
    k.w().line("{}", k.store(n.output(0), "off", "acc"));
    k.w().line("{}", step);
  } else {
    k.w().line("{}", step);
    k.w().line("{}", k.store(n.output(0), "off", "acc"));
  }
  k.w().close();
  return k.finish(prod ? "running product" : "running sum");
}

// ---- StitchRowSubstitution (ops/row_substitution.h) ------------------------------------------

// A thread per column of each matrix (the segments along the row axis): it copies its column,
// then runs the steps in order, each the sum of row i's products with the column's rows above it
// (its own earlier results, or the input's rows before `first`) added to row i's own element. Row i
// is read from the input: no step before step i writes it. The products are rounded before they
// are summed (__fmul_rn), as the written-out steps' Mul rounds them.
StatusOr<Kernel> lower_row_substitution(const Node& n, int index, IndexWidth ix) {
  const Value* x = n.input(0);
  const Dims& d = dims(x);
  const int64_t r = static_cast<int64_t>(d.size()), size = d.back();
  const int64_t first = n.attr_int("first", 0), last = n.attr_int("last", 0);
  std::vector<bool> red(static_cast<size_t>(r), false);
  red[static_cast<size_t>(r - 2)] = true;
  SegmentKernel k(n, index, make_segments(d, red), Mapping::kThread, "steps", ix);
  const char* t = k.ix().type();
  const std::string y = k.param(n.output(0), true);
  k.w().line("const {} col = o % {};", t, k.lit(size));
  k.w().line("const {} mat = base - col;", t);
  k.w().open("for ({} i = 0; i < {}; ++i)", t, k.lit(size));
  k.w().line("{}", k.store(n.output(0), fmt::format("base + i * {}", k.lit(size)),
                           k.load(x, fmt::format("base + i * {}", k.lit(size)), "float")));
  k.w().close();
  k.w().open("for ({0} i = col + 1 > {1} ? col + 1 : {1}; i <= {2}; ++i)", t, k.lit(first), k.lit(last));
  k.w().line("const {} row = mat + i * {};", t, k.lit(size));
  k.w().line("float sum = 0.0f;");
  k.w().open("for ({} j = 0; j < i; ++j)", t);
  k.w().line("sum += __fmul_rn({}, {}[mat + j * {} + col]);", k.load(x, "row + j", "float"), y, k.lit(size));
  k.w().close();
  k.w().line("{}", k.store(n.output(0), fmt::format("base + i * {}", k.lit(size)),
                           fmt::format("{} + sum", k.load(x, "row + col", "float"))));
  k.w().close();
  const Value* addend = n.input(1);
  if (addend) {  // the constant added to the result (the solve's identity), once every step is done
    k.w().open("for ({} i = 0; i < {}; ++i)", t, k.lit(size));
    k.w().line("const {} at = base + i * {};", t, k.lit(size));
    k.w().line("{}", k.store(n.output(0), "at",
                             fmt::format("{}[at] + {}", y,
                                         k.load(addend, fmt::format("i * {} + col", k.lit(size)), "float"))));
    k.w().close();
  }
  return k.finish(fmt::format("steps {} to {} of a row-by-row triangular solve, in order{}", first, last,
                              addend ? ", then a constant added" : ""));
}

}  // namespace stitch::codegen::segments
