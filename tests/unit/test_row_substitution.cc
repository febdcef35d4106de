// fold_row_substitutions and StitchRowSubstitution: the chunked gated delta rule's triangular solve,
// written out row by row as torch.onnx exports it (a Gather of row i, Slices of its prefix and of
// the matrix's leading corner, Mul, ReduceSum and Add, and the two scatters that write the row
// back), becomes one node; the reference computes what the steps compute bit for bit, and the kernel
// matches the reference running the steps as written, on emu.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "fusion_test_util.h"
#include "ir/legacy_forms.h"
#include "ir/op_table.h"
#include "passes/pass.h"
#include "reference/compare.h"
#include "test_util.h"

using namespace stitch;
using stitch::test::count_op;

namespace {

// How the written-out steps differ from the exported form, to see the fold refuse.
struct StepVariant {
  std::string add = "Add";   // the step's combine
  int64_t skip_step = -1;    // a step left out (the run breaks there)
  int64_t escape_step = -1;  // a step whose matrix is also a graph output
  std::string dtype = "f32";
  bool transposes = true;  // the slice_scatter between Transposes (the export's form)
  bool plus_eye = false;   // the identity added to the result (attn + torch.eye(n))
};

// The steps first..last of an n x n solve over leading dims `lead`, as torch.onnx writes them once
// constants are folded (the row axis is the second to last; R's column axis is moved to the front
// for the ScatterND, and back).
std::string solve_steps(const std::vector<int64_t>& lead, int64_t n, int64_t first, int64_t last,
                        const StepVariant& v = {}) {
  std::string dl, body, consts;
  int64_t lead_count = 1;
  for (int64_t d : lead) {
    dl += fmt::format("{},", d);
    lead_count *= d;
  }
  const int64_t rank = static_cast<int64_t>(lead.size()) + 2, row_axis = rank - 2;
  const std::string t = v.dtype;
  // R's axes with the column axis (its last) and axis 0 swapped.
  std::string perm, rowt;
  for (int64_t d = 0; d < rank - 1; ++d) {
    const int64_t p = d == 0 ? rank - 2 : d == rank - 2 ? 0 : d;
    perm += fmt::format("{}{}", d ? ", " : "", p);
  }
  consts +=
      fmt::format("  const %zero: i64[1] = [0]\n  const %one: i64[1] = [1]\n  const %last: i64[1] = [-1]\n");
  consts += fmt::format("  const %rows: i64[1] = [-2]\n  const %row_axis: i64[1] = [{}]\n", row_axis);
  consts +=
      fmt::format("  const %col_axis: i64[1] = [{}]\n  const %r_axis: i64[1] = [{}]\n", rank - 1, rank - 2);
  std::string s = "%s0";
  std::vector<std::string> outputs;
  for (int64_t i = first; i <= last; ++i) {
    if (i == v.skip_step) continue;
    const std::string k = std::to_string(i);
    consts += fmt::format("  const %i{0}: i64[] = [{0}]\n  const %e{0}: i64[1] = [{0}]\n", i);
    std::string idx, fill;
    for (int64_t j = 0; j < i; ++j) idx += fmt::format("{}{}", j ? ", " : "", j);
    for (int64_t j = 0; j < lead_count * n; ++j) fill += fmt::format("{}{}", j ? ", " : "", i);
    consts += fmt::format("  const %idx{}: i64[{},1] = [{}]\n", k, i, idx);
    consts += fmt::format("  const %at{}: i64[{}1,{}] = [{}]\n", k, dl, n, fill);
    body += fmt::format("  %R{0} = Gather({1}, %i{0}) {{axis = {2}}} @\"select_{0}\"\n", k, s, row_axis);
    body += fmt::format("  %a{0} = Slice(%R{0}, %zero, %e{0}, %r_axis, %one) @\"row_{0}\"\n", k);
    body += fmt::format("  %c{0} = Slice({1}, %zero, %e{0}, %row_axis, %one) @\"rows_{0}\"\n", k, s);
    body += fmt::format("  %P{0} = Slice(%c{0}, %zero, %e{0}, %col_axis, %one) @\"corner_{0}\"\n", k);
    body += fmt::format("  %u{0} = Unsqueeze(%a{0}, %last) @\"unsqueeze_{0}\"\n", k);
    body += fmt::format("  %m{0} = Mul(%u{0}, %P{0}) @\"mul_{0}\"\n", k);
    body += fmt::format("  %sum{0} = ReduceSum(%m{0}, %rows) {{keepdims = 0}} @\"sum_{0}\"\n", k);
    body += fmt::format("  %n{0} = {1}(%a{0}, %sum{0}) @\"add_{0}\"\n", k, v.add);
    if (v.transposes && rank > 2) {  // a row of one axis has its columns in front already
      body += fmt::format("  %tn{0} = Transpose(%n{0}) {{perm = ints[{1}]}} @\"tn_{0}\"\n", k, perm);
      body += fmt::format("  %tr{0} = Transpose(%R{0}) {{perm = ints[{1}]}} @\"tr_{0}\"\n", k, perm);
      body += fmt::format("  %sc{0} = ScatterND(%tr{0}, %idx{0}, %tn{0}) @\"slice_scatter_{0}\"\n", k);
      body += fmt::format("  %w{0} = Transpose(%sc{0}) {{perm = ints[{1}]}} @\"back_{0}\"\n", k, perm);
    } else {  // along axis 0 of R itself: the columns for a row of one axis, a wrong axis otherwise
      body += fmt::format("  %w{0} = ScatterND(%R{0}, %idx{0}, %n{0}) @\"slice_scatter_{0}\"\n", k);
    }
    body += fmt::format("  %U{0} = Unsqueeze(%w{0}, %row_axis) @\"one_row_{0}\"\n", k);
    body +=
        fmt::format("  %s{0} = ScatterElements({1}, %at{0}, %U{0}) {{axis = {2}}} @\"select_scatter_{0}\"\n",
                    k, s, row_axis);
    s = "%s" + k;
    if (i == v.escape_step) outputs.push_back(s);
  }
  if (v.plus_eye) {
    std::string eye;
    for (int64_t e = 0; e < n * n; ++e) eye += fmt::format("{}{}", e ? ", " : "", e % (n + 1) == 0 ? 1 : 0);
    consts += fmt::format("  const %eye: {}[{},{}] = [{}]\n", t, n, n, eye);
    body += fmt::format("  %solved = Add({}, %eye) @\"plus_eye\"\n", s);
    s = "%solved";
  }
  outputs.push_back(s);
  std::string out;
  for (const std::string& o : outputs) out += fmt::format("  output {}\n", o);
  return fmt::format("graph \"g\" opset 18 {{\n  input %s0: {}[{}{},{}]\n{}{}{}}}\n", t, dl, n, n, consts,
                     body, out);
}

// The front end's graph of `text`, whose outputs the reference computes bit for bit as the graph
// as written does (on `inputs` seeded inputs and a strictly lower-triangular one, the delta rule's).
std::unique_ptr<Graph> solve_folded_exactly(const std::string& text, uint32_t seed) {
  INFO(text);
  auto before = test::as_written(text);
  auto after = test::parse_or_die(text);
  test::run_frontend_or_die(*after);
  for (int round = 0; round < 3; ++round) {
    TensorMap in;
    for (const Value* v : before->inputs) {
      Tensor x = test::random_tensor(v->dtype, *v->dims, seed++);
      if (round == 2 && x.dtype() == DType::kF32) {  // strictly lower-triangular, as the delta rule's
        const int64_t n = v->dims->back();
        for (int64_t e = 0; e < x.size(); ++e)
          if ((e % n) >= (e / n) % n) x.set_f64(e, 0.0);
      }
      in[v->name] = x;
    }
    test::same_reference_outputs(*before, *after, in, true);
  }
  return after;
}

}  // namespace

TEST_CASE("a triangular solve written out row by row is one StitchRowSubstitution, bit for bit") {
  uint32_t seed = 1;
  // Qwen3.5's form: leading batch, head and chunk axes, all steps; then a 2-D matrix, and a run
  // that starts and stops inside the matrix.
  for (const auto& [lead, n, first, last] :
       std::vector<std::tuple<std::vector<int64_t>, int64_t, int64_t, int64_t>>{
           {{2, 3, 1}, 8, 1, 7}, {{}, 6, 1, 5}, {{4}, 9, 3, 6}}) {
    INFO("lead " << lead.size() << " n " << n << " steps " << first << ".." << last);
    auto g = solve_folded_exactly(solve_steps(lead, n, first, last), seed);
    seed += 10;
    CHECK(count_op(*g, "StitchRowSubstitution") == 1);
    CHECK(count_op(*g, "ScatterElements") == 0);
    CHECK(count_op(*g, "ScatterND") == 0);
    CHECK(count_op(*g, "ReduceSum") == 0);
  }
}

TEST_CASE("the identity added to the solve's result is the op's addend") {
  // Read by nothing else, the Add of the constant goes into the op (its kernel adds it as it
  // finishes); with the solve's result also an output, the Add stays.
  StepVariant v;
  v.plus_eye = true;
  auto g = solve_folded_exactly(solve_steps({2, 3}, 8, 1, 7, v), 500);
  CHECK(count_op(*g, "StitchRowSubstitution") == 1);
  CHECK(count_op(*g, "Add") == 0);
  v.escape_step = 7;
  auto kept = solve_folded_exactly(solve_steps({2, 3}, 8, 1, 7, v), 510);
  CHECK(count_op(*kept, "StitchRowSubstitution") == 1);
  CHECK(count_op(*kept, "Add") == 1);
}

TEST_CASE("a run of row steps breaks where a matrix between them is read elsewhere or a step is missing") {
  uint32_t seed = 100;
  {
    StepVariant v;
    v.escape_step = 4;  // the matrix after step 4 is an output too: steps 1..4 and 5..7
    auto g = solve_folded_exactly(solve_steps({2}, 8, 1, 7, v), seed);
    CHECK(count_op(*g, "StitchRowSubstitution") == 2);
    CHECK(count_op(*g, "ScatterElements") == 0);
  }
  {
    StepVariant v;
    v.skip_step = 5;  // steps 1..4 and 6..7: a different computation, still two runs of its steps
    auto g = solve_folded_exactly(solve_steps({2}, 8, 1, 7, v), seed + 10);
    CHECK(count_op(*g, "StitchRowSubstitution") == 2);
  }
  {
    StepVariant v;
    v.skip_step = 2;  // step 1 alone stays as written; 3..7 is one run
    auto g = solve_folded_exactly(solve_steps({2}, 8, 1, 7, v), seed + 20);
    REQUIRE(count_op(*g, "StitchRowSubstitution") == 1);
    for (const auto& n : g->nodes())
      if (n->op_type == "StitchRowSubstitution") {
        CHECK(n->attr_int("first", 0) == 3);
        CHECK(n->attr_int("last", 0) == 7);
      }
  }
}

TEST_CASE("steps that compute something else are left as written") {
  uint32_t seed = 200;
  for (int which = 0; which < 3; ++which) {
    StepVariant v;
    if (which == 0) v.add = "Sub";         // row - sum
    if (which == 1) v.dtype = "f16";       // only float32 is folded
    if (which == 2) v.transposes = false;  // the row's prefix written along its leading axis
    INFO("variant " << which);
    const std::string text = solve_steps({2, 2}, 5, 1, 4, v);
    if (which == 2) {
      // The ScatterND writes R's leading rows: not the row's prefix. The graph may not even be
      // well formed for the reference at these shapes; only the fold's refusal matters.
      auto g = test::parse_or_die(text);
      PassContext ctx;
      REQUIRE(bind_shapes(*g, ctx).is_ok());
      if (!infer_shapes(*g, ctx).is_ok()) continue;
      REQUIRE(fold_constants(*g, ctx).is_ok());
      REQUIRE(fold_row_substitutions(*g, ctx).is_ok());
      CHECK(count_op(*g, "StitchRowSubstitution") == 0);
      continue;
    }
    auto g = solve_folded_exactly(text, seed + 10 * which);
    CHECK(count_op(*g, "StitchRowSubstitution") == 0);
  }
}

TEST_CASE("the row-by-row solve is one kernel on emu and matches the steps as written") {
  // The folded solve planned and run on emu, against the reference running the steps' nodes as
  // written: the 63 steps of a 64 x 64 solve (Qwen3.5's chunk), and a run inside a small matrix.
  // The inputs are strictly lower-triangular and small, as the delta rule's are (its keys are
  // normalized, its gates below 1); a full random 64 x 64 matrix's solve grows past what float
  // sums in two orders agree on.
  uint32_t seed = 300;
  for (const auto& [lead, n, first, last] :
       std::vector<std::tuple<std::vector<int64_t>, int64_t, int64_t, int64_t>>{{{2, 1}, 64, 1, 63},
                                                                                {{3}, 7, 2, 5}}) {
    INFO("n " << n);
    StepVariant v;
    v.plus_eye = n == 64;  // Qwen3.5's form adds the identity after the solve
    const std::string text = solve_steps(lead, n, first, last, v);
    auto original = test::as_written(text);
    auto g = test::parse_or_die(text);
    test::run_frontend_or_die(*g);
    CHECK(count_op(*g, "ScatterElements") == 0);
    TensorMap feed;
    const Value* in = original->inputs[0];
    Tensor x = test::random_tensor(DType::kF32, *in->dims, seed++);
    for (int64_t e = 0; e < x.size(); ++e) x.set_f64(e, (e % n) < (e / n) % n ? x.get_f64(e) / 4 : 0.0);
    feed[in->name] = x;
    int kernels = 0;
    const TensorMap got = test::planned_emu_run(*g, feed, &kernels);
    CHECK(kernels == 1);
    auto want = run_reference(*original, feed);
    REQUIRE(want.is_ok());
    for (const Value* o : original->outputs) {
      const CompareResult r = compare_tensors(got.at(o->name), want->at(o->name), kEmuF32.rtol, kEmuF32.atol);
      INFO(o->name << ": max abs " << r.max_abs << ", " << r.mismatches << " outside the tolerance "
                   << r.problem);
      CHECK(r.ok);
    }
  }
}

TEST_CASE("a model cannot hold the compiler's own StitchRowSubstitution", "[importer]") {
  // The op is the compiler's: the importer does not know it, `stitchc ops` leaves it out, and its
  // shape rule refuses what the fold never writes (as an internal error: no model reaches it).
  CHECK(find_model_op("", "StitchRowSubstitution", 18) == nullptr);
  REQUIRE(find_op("", "StitchRowSubstitution", 18) != nullptr);
  CHECK(find_op("", "StitchRowSubstitution", 18)->internal);
  for (const char* text : {R"(graph "g" opset 18 {
  input %s: f32[3,4,5]
  %y = StitchRowSubstitution(%s) {first = 1, last = 3}
  output %y
})",
                           R"(graph "g" opset 18 {
  input %s: f32[4,4]
  %y = StitchRowSubstitution(%s) {first = 0, last = 3}
  output %y
})",
                           R"(graph "g" opset 18 {
  input %s: f16[4,4]
  %y = StitchRowSubstitution(%s) {first = 1, last = 3}
  output %y
})"}) {
    INFO(text);
    auto g = test::parse_or_die(text);
    PassContext ctx;
    REQUIRE(bind_shapes(*g, ctx).is_ok());
    const Status st = infer_shapes(*g, ctx).status();
    CHECK(st.code() == Code::kInternal);
  }
}
