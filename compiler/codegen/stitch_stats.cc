// Stitched kernels (stitch.h): the passes of row kernels over each row, several reductions in
// one where they share it (StitchInfo::shared_pass), and the statistics of each row op.
#include <fmt/format.h>

#include "codegen/stitch_passes.h"
#include "codegen/stitcher.h"

namespace stitch::codegen::detail {

StatusOr<std::string> Stitcher::pass(const std::string& ct, const std::string& init, const std::string& op,
                                     const std::function<StatusOr<std::string>()>& elem, int64_t cols) {
  ASSIGN_OR_RETURN(std::vector<std::string> accs, shared_pass({{ct, init, op, elem}}, cols));
  return accs.front();
}

StatusOr<std::vector<std::string>> Stitcher::shared_pass(const std::vector<Reduction>& rs, int64_t cols) {
  const int64_t g = cols >= 0 ? outer_group_ : 1;
  STITCH_CHECK(!rs.empty() && (rs.size() == 1 || cols < 0),
               "a shared pass of {} reductions over an outer row", rs.size());
  scopes_[1] = Scope{};
  std::vector<std::string> es;  // in one scope: what the reductions' inputs share is computed once
  for (const Reduction& r : rs) {
    ASSIGN_OR_RETURN(std::string e, r.elem());
    es.push_back(std::move(e));
  }
  std::vector<std::string> body = std::move(scopes_[1].lines);
  scopes_[1] = Scope{};
  std::vector<std::string> accs;
  for (const Reduction& r : rs) {
    accs.push_back(fresh("acc"));
    line(0, fmt::format("{} {} = {};", r.ct, accs.back(), r.init));
  }
  if (g > 1)  // the group's warps take the row's elements in turn, 32 each
    line(0, fmt::format("for ({0} j = ({0})((threadIdx.x >> 5) % {1}) * 32 + lane; j < {2}; j += {3}) {{",
                        ix(), g, lit(cols), lit(32 * g)));
  else
    line(0, row_loop(cols));
  for (const std::string& l : body) line(0, "  " + l);
  for (size_t i = 0; i < rs.size(); ++i)
    line(0, fmt::format("  {0} = {1}({0}, {2});", accs[i], rs[i].op, es[i]));
  line(0, "}");
  if (g > 1) {  // each warp's partial, then the group's in warp order (the same in every warp)
    const std::string& acc = accs.front();
    const std::string& ct = rs.front().ct;
    const std::string& op = rs.front().op;
    const std::string sh = "outer_" + type_tag(ct);
    outer_scratch_.insert(ct);
    line(0, fmt::format("{0} = stitch_dev::warp_reduce({0}, {1});", acc, op));
    line(0, fmt::format("if (lane == 0) {}[threadIdx.x >> 5] = {};", sh, acc));
    line(0, "__syncthreads();");
    const std::string tot = fresh("acc");
    const std::string first = fmt::format("(threadIdx.x >> 5) / {0} * {0}", g);
    line(0, fmt::format("{} {} = {}[{}];", ct, tot, sh, first));
    line(0,
         fmt::format("for (int w = 1; w < {0}; ++w) {1} = {2}({1}, {3}[{4} + w]);", g, tot, op, sh, first));
    line(0, "__syncthreads();  // before the next pass writes the partials again");
    ++passes_;
    return std::vector<std::string>{tot};
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    const std::string& acc = accs[i];
    if (map_.column) {
      scratch_.insert(rs[i].ct);
      line(0, fmt::format("{0} = stitch_dev::tile_column_reduce({0}, {1}, tile_{2});", acc, rs[i].op,
                          type_tag(rs[i].ct)));
    } else if (map_.warp_per_row) {
      line(0, fmt::format("{0} = stitch_dev::warp_reduce({0}, {1});", acc, rs[i].op));
    } else {
      scratch_.insert(rs[i].ct);
      line(0, fmt::format("{0} = stitch_dev::block_reduce({0}, {1}, scratch_{2});", acc, rs[i].op,
                          type_tag(rs[i].ct)));
    }
  }
  if (map_.split() && cols < 0) {  // global stitching: this pass's partials of every row, then a grid barrier
    auto slot = [&](size_t i) {
      return fmt::format("ws + {} + row * {}",
                         lit((split_passes_ + static_cast<int64_t>(i)) * info_.rows * map_.segments),
                         lit(map_.segments));
    };
    if (rs.size() == 1) {
      line(0, fmt::format("{0} = stitch_dev::grid_row_reduce({0}, {1}, {2}, seg, {3}, scratch_{4});", accs[0],
                          rs[0].op, slot(0), lit(map_.segments), type_tag(rs[0].ct)));
    } else {  // every reduction's partial published, one barrier for all, then each combined
      for (size_t i = 0; i < rs.size(); ++i)
        line(0, fmt::format("stitch_dev::grid_row_publish({}, {}, seg);", accs[i], slot(i)));
      line(0, "stitch_dev::grid_sync();");
      for (size_t i = 0; i < rs.size(); ++i)
        line(0, fmt::format("{0} = stitch_dev::grid_row_combine({0}, {1}, {2}, {3}, scratch_{4});", accs[i],
                            rs[i].op, slot(i), lit(map_.segments), type_tag(rs[i].ct)));
    }
    split_passes_ += static_cast<int64_t>(rs.size());
  }
  ++passes_;
  return accs;
}

Status Stitcher::emit_row_op(const Node& n) {
  if (info_.shared_pass.count(&n)) {
    STITCH_CHECK(stats_.count(&n), "row op {} reached before the pass it shares", n.describe());
    return Status::ok();
  }
  std::vector<const Node*> joined;  // row ops whose pass is n's (StitchInfo::shared_pass), in order
  for (const Node* m : nodes_) {
    auto it = info_.shared_pass.find(m);
    if (it != info_.shared_pass.end() && it->second == &n) joined.push_back(m);
  }
  if (joined.empty()) {
    ASSIGN_OR_RETURN(stats_[&n], row_stats(n, dom_, info_.cols));
    return Status::ok();
  }
  joined.insert(joined.begin(), &n);
  std::vector<OnePass> ps;
  std::vector<Reduction> rs;
  for (const Node* m : joined) {
    ASSIGN_OR_RETURN(OnePass p, one_pass(*m, dom_, info_.cols));
    rs.push_back(p.r);
    ps.push_back(std::move(p));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> accs, shared_pass(rs));
  for (size_t i = 0; i < joined.size(); ++i)
    stats_[joined[i]].a = reduce_result(*joined[i], ps[i].result(accs[i]));
  return Status::ok();
}

StatusOr<SExpr> Stitcher::outer_value(const Node& n, const Coords& c, const std::string& k) {
  ASSIGN_OR_RETURN(RowOpInfo oi, row_op_info(n));
  const int64_t rank = static_cast<int64_t>(oi.in.size());
  STITCH_CHECK(static_cast<int64_t>(c.size()) == rank, "outer reduction {} read without its kept axes",
               n.describe());
  Coords xc(static_cast<size_t>(rank), SExpr{"0", 0});
  int64_t inner = 1;
  for (int64_t d = rank; d-- > 0;) {
    if (!oi.reduced[d]) {
      xc[d] = c[d];
      continue;
    }
    if (oi.in[d] != 1) xc[d] = index_piece("j", 1, oi.cols, inner, oi.in[d], ll());
    inner *= oi.in[d];
  }
  STITCH_CHECK(level_of(c) == 0, "outer reduction {} read along the row", n.describe());
  // Its passes go where the row's code is, before the loop now being built (if any).
  Scope loop = std::move(scopes_[1]);
  const bool vec = vec_;
  const int lane = lane_;
  vec_ = false;
  lane_ = 0;
  for (const StitchInfo::Outer& o : info_.outer)
    if (o.node == &n) outer_group_ = o.group;
  StatusOr<Stats> st = row_stats(n, xc, oi.cols);
  outer_group_ = 1;
  scopes_[1] = std::move(loop);
  vec_ = vec;
  lane_ = lane;
  RETURN_IF_ERROR(st.status());
  SExpr r{st->a, 0};
  scopes_[0].memo[k] = r;
  return r;
}

StatusOr<Stitcher::Stats> Stitcher::row_stats(const Node& n, const Coords& xc, int64_t cols) {
  const Value* x = n.input(0);
  const std::string ct = compute_type(x->dtype);
  const std::string& op = n.op_type;
  const int64_t pass_cols = info_.is_outer(&n) ? cols : -1;  // an outer reduction: its own row
  auto xv = [&, xc]() -> StatusOr<std::string> {
    ASSIGN_OR_RETURN(SExpr e, at(x, xc));
    return e.s;
  };
  auto xf = [&](std::function<std::string(const std::string&)> f) {
    return [&, f]() -> StatusOr<std::string> {
      ASSIGN_OR_RETURN(std::string e, xv());
      return f(e);
    };
  };
  const std::string len = fmt::format("({}){}", ct, cols);
  Stats st;
  if (op == "Softmax" || op == "LogSoftmax") {
    ASSIGN_OR_RETURN(st.a, pass(ct, literal(-INFINITY, ct), "stitch_dev::Max()", xv, pass_cols));
    const std::string mx = st.a;
    ASSIGN_OR_RETURN(std::string sum,
                     pass(ct, literal(0, ct), "stitch_dev::Sum()", xf([&, mx](const std::string& e) {
                            return fmt::format("{}({} - {})", fnm(ct, "exp"), e, mx);
                          }),
                          pass_cols));
    st.b = fresh("s");
    if (op == "LogSoftmax")
      line(0, fmt::format("const {} {} = {} + {}({});", ct, st.b, mx, fnm(ct, "log"), sum));
    else
      line(0, fmt::format("const {0} {1} = ({0})1 / {2};", ct, st.b, sum));
  } else if (op == "LayerNormalization" || op == "InstanceNormalization") {
    ASSIGN_OR_RETURN(std::string sum, pass(ct, literal(0, ct), "stitch_dev::Sum()", xv, pass_cols));
    st.a = fresh("mean");
    line(0, fmt::format("const {} {} = {} / {};", ct, st.a, sum, len));
    const std::string mean = st.a;
    ASSIGN_OR_RETURN(std::string sq,
                     pass(ct, literal(0, ct), "stitch_dev::Sum()", xf([mean](const std::string& e) {
                            return fmt::format("({0} - {1}) * ({0} - {1})", e, mean);
                          }),
                          pass_cols));
    st.b = fresh("rstd");
    line(0, fmt::format("const {0} {1} = {2}(({0})1 / ({3} / {4} + {5}));", ct, st.b, fnm(ct, "sqrt"), sq,
                        len, literal(n.attr_float("epsilon", 1e-5f), ct)));
  } else if (op == "ReduceLogSumExp") {
    ASSIGN_OR_RETURN(std::string mx, pass(ct, literal(-INFINITY, ct), "stitch_dev::Max()", xv, pass_cols));
    const std::string shift = fresh("shift");
    line(0, fmt::format("const {0} {1} = isinf({2}) ? ({0})0 : {2};", ct, shift, mx));
    ASSIGN_OR_RETURN(std::string sum,
                     pass(ct, literal(0, ct), "stitch_dev::Sum()", xf([&, shift](const std::string& e) {
                            return fmt::format("{}({} - {})", fnm(ct, "exp"), e, shift);
                          }),
                          pass_cols));
    st.a = reduce_result(n, fmt::format("{}({}) + {}", fnm(ct, "log"), sum, shift));
  } else {
    ASSIGN_OR_RETURN(OnePass p, one_pass(n, xc, cols));
    ASSIGN_OR_RETURN(std::string acc, pass(p.r.ct, p.r.init, p.r.op, p.r.elem, pass_cols));
    st.a = reduce_result(n, p.result(acc));
  }
  return st;
}

StatusOr<Stitcher::OnePass> Stitcher::one_pass(const Node& n, const Coords& xc, int64_t cols) {
  STITCH_CHECK(single_pass_reduction(n), "{} is not a reduction of one pass", n.describe());
  const Value* x = n.input(0);
  const std::string ct = compute_type(x->dtype);
  const std::string& op = n.op_type;
  auto elem = [this, x, xc](std::function<std::string(const std::string&)> f) {
    return [this, x, xc, f]() -> StatusOr<std::string> {
      ASSIGN_OR_RETURN(SExpr e, at(x, xc));
      return f(e.s);
    };
  };
  auto same = [](const std::string& e) { return e; };
  OnePass p;
  p.r.ct = ct;
  p.result = same;
  if (op == "ReduceMax" || op == "ReduceMin" || op == "GlobalMaxPool") {
    const bool mx = op != "ReduceMin";
    p.r.init = extreme_literal(mx, ct);
    p.r.op = mx ? "stitch_dev::Max()" : "stitch_dev::Min()";
    p.r.elem = elem(same);
    return p;
  }
  if (op == "ReduceProd") {
    p.r.init = literal(1, ct);
    p.r.op = "stitch_dev::Prod()";
    p.r.elem = elem(same);
    return p;
  }
  std::function<std::string(const std::string&)> f = same;
  if (op == "ReduceL1") f = [ct](const std::string& e) { return magnitude(e, ct); };
  if (op == "ReduceL2" || op == "ReduceSumSquare")
    f = [](const std::string& e) { return fmt::format("{0} * {0}", e); };
  p.r.init = literal(0, ct);
  p.r.op = "stitch_dev::Sum()";
  p.r.elem = elem(f);
  const std::string len = fmt::format("({}){}", ct, cols);
  if (op == "ReduceMean" || op == "GlobalAveragePool")
    p.result = [len](const std::string& sum) { return fmt::format("{} / {}", sum, len); };
  if (op == "ReduceL2")
    p.result = [ct](const std::string& sum) { return fmt::format("{}({})", fnm(ct, "sqrt"), sum); };
  if (op == "ReduceLogSum")
    p.result = [ct](const std::string& sum) { return fmt::format("{}({})", fnm(ct, "log"), sum); };
  return p;
}

std::string Stitcher::reduce_result(const Node& n, const std::string& result) {
  const std::string r = fresh("r");
  line(0, fmt::format("const {} {} = {};  // {} '{}'", compute_type(n.output(0)->dtype), r, result, n.op_type,
                      n.name));
  return r;
}

}  // namespace stitch::codegen::detail
