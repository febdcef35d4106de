// Helpers for unit tests: parse IR text, run the pipeline, seeded data.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/text.h"
#include "passes/pass.h"
#include "reference/compare.h"
#include "reference/interpreter.h"

namespace stitch::test {

inline std::unique_ptr<Graph> parse_or_die(const std::string& text) {
  auto g = parse_graph(text);
  INFO(g.status().message());
  REQUIRE(g.is_ok());
  return std::move(g).value();
}

// Runs the front-end pipeline; fails the test with the message on error.
inline void run_frontend_or_die(Graph& g, PassContext& ctx) {
  Status st = run_frontend(g, ctx);
  INFO(st.message());
  REQUIRE(st.is_ok());
}
inline void run_frontend_or_die(Graph& g) {
  PassContext ctx;
  run_frontend_or_die(g, ctx);
}

// IR text `text` as written: its shapes bound and inferred, no other pass run (the oracle that a
// front-end rewrite is checked against).
inline std::unique_ptr<Graph> as_written(const std::string& text) {
  auto g = parse_or_die(text);
  PassContext raw;
  REQUIRE(bind_shapes(*g, raw).is_ok());
  REQUIRE(infer_shapes(*g, raw).is_ok());
  return g;
}

// The reference's outputs of `before` and `after` on `in`: each of before's outputs the same in
// after, bit for bit when `bits`, else as compare_tensors with no tolerance (NaN equal to NaN).
inline void same_reference_outputs(const Graph& before, const Graph& after, const TensorMap& in, bool bits) {
  auto a = run_reference(before, in);
  auto b = run_reference(after, in);
  REQUIRE(a.is_ok());
  REQUIRE(b.is_ok());
  for (const Value* o : before.outputs) {
    INFO(o->name);
    if (bits)
      CHECK(b->at(o->name).same_as(a->at(o->name)));
    else
      CHECK(compare_tensors(b->at(o->name), a->at(o->name), 0, 0).ok);
  }
}

// The front end's error message for IR text `text`, or "" when it succeeds.
inline std::string frontend_error(const std::string& text) {
  auto g = parse_or_die(text);
  PassContext ctx;
  Status st = run_frontend(*g, ctx);
  return st.is_ok() ? "" : st.message();
}

// The range integer test inputs are drawn from: by default, a signed type's values either side
// of 0 and an unsigned type's past the signed byte (the whole range for 8-bit types), so that
// integer paths see negative and large values. A test whose integer inputs are indices, lengths or
// positions (which must lie inside an axis) narrows it for its scope with IntInputsIn.
struct IntRange {
  int64_t lo = 0, hi = -1;  // empty: the type's default
};
inline IntRange& int_inputs_range() {
  static IntRange r;
  return r;
}
class IntInputsIn {
 public:
  IntInputsIn(int64_t lo, int64_t hi) : saved_(int_inputs_range()) { int_inputs_range() = {lo, hi}; }
  ~IntInputsIn() { int_inputs_range() = saved_; }
  IntInputsIn(const IntInputsIn&) = delete;
  IntInputsIn& operator=(const IntInputsIn&) = delete;

 private:
  IntRange saved_;
};
inline IntRange default_int_range(DType t) {
  switch (t) {
    case DType::kBool:
      return {0, 1};
    case DType::kI8:
      return {-128, 127};
    case DType::kU8:
      return {0, 255};
    default:
      return is_unsigned_int(t) ? IntRange{0, 2000} : IntRange{-1000, 1000};
  }
}

inline Tensor random_tensor(DType t, Dims d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  const IntRange set = int_inputs_range();
  const IntRange r = set.lo <= set.hi && t != DType::kBool ? set : default_int_range(t);
  const auto span = static_cast<uint64_t>(r.hi - r.lo) + 1;
  Tensor x(t, d);
  for (int64_t i = 0; i < x.size(); ++i) {
    if (is_float(t)) x.set_f64(i, u(rng));
    else
      x.set_i64(i, r.lo + static_cast<int64_t>(rng() % span));
  }
  return x;
}

// A front-end rewrite against the ops it replaces: `text` with shapes inferred alone (its ops as
// written) and through the whole front end, each run by the reference interpreter on the same
// seeded inputs (a seed each, from `seed` on).
struct RewriteRun {
  std::unique_ptr<Graph> graph;  // through the front end
  TensorMap feed, want, got;     // the inputs, the ops' outputs and the rewrite's
};
inline RewriteRun run_rewrite(const std::string& text, uint32_t seed, PassContext frontend = {}) {
  auto raw = parse_or_die(text);
  PassContext ctx;
  REQUIRE(infer_shapes(*raw, ctx).is_ok());
  RewriteRun r;
  r.graph = parse_or_die(text);
  run_frontend_or_die(*r.graph, frontend);
  for (const Value* v : raw->inputs) r.feed[v->name] = random_tensor(v->dtype, *v->dims, seed++);
  auto want = run_reference(*raw, r.feed);
  auto got = run_reference(*r.graph, r.feed);
  REQUIRE(want.is_ok());
  REQUIRE(got.is_ok());
  r.want = std::move(*want);
  r.got = std::move(*got);
  return r;
}

// The whole of a text file ("" when it cannot be read).
inline std::string read_text_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Nodes of op type `op` in `g`.
inline int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type == op;
  return n;
}

// Whether `g` has a node named `name`.
inline bool has_node(const Graph& g, const std::string& name) {
  for (const auto& node : g.nodes())
    if (node->name == name) return true;
  return false;
}

}  // namespace stitch::test
