// Mutation tests: malformed versions of ONNX's node-test models, made in memory.
//
// Every attribute of every node is set, one at a time, to values a malformed model carries
// (negative, zero, huge, empty or shortened lists, NaN, unknown strings) or removed; every graph
// input is given a shape it does not have (a rank more or less, a scalar, an empty or a longer
// axis). Each mutant goes through what `stitchc compile` runs (the front end, the planning
// rewrites, the beam planner, the schedule with its generated kernels) and, for attribute mutants,
// the reference interpreter on the test's inputs. Each must either go through or stop with a user
// error: an internal error fails the run, and a crash or a hang fails the test that runs it.
// Besides, every attribute is written, in the model file, as each other kind of value (an int as a
// float, a list as a single int...): the importer must refuse each such model with a user error
// naming the attribute, since read as absent it would silently take the op's default.
//
//   stitch_mutation_tests [--shard K/N] [--verbose] DIR...
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>

#include "codegen/schedule.h"
#include "fusion/plan.h"
#include "fusion/rewrites.h"
#include "importer/onnx_importer.h"
#include "ir/op_table.h"
#include "node_test_dirs.h"
#include "passes/pass.h"
#include "reference/interpreter.h"

namespace fs = std::filesystem;
using namespace stitch;

namespace {

// Values a malformed model gives an attribute of this kind in place of `v`.
std::vector<AttrValue> mutations(const AttrValue& v) {
  std::vector<AttrValue> out;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    for (int64_t x : {int64_t{-1000}, int64_t{-1}, int64_t{0}, int64_t{2}, int64_t{1000}, int64_t{1} << 40})
      if (x != *i) out.emplace_back(x);
  } else if (std::holds_alternative<float>(v)) {
    for (float x : {std::numeric_limits<float>::quiet_NaN(), -1.0f, 0.0f, 1e30f}) out.emplace_back(x);
  } else if (const auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    const auto n = std::max<size_t>(is->size(), 1);
    out.emplace_back(std::vector<int64_t>{});
    auto longer = *is;
    longer.push_back(0);
    out.emplace_back(longer);
    if (!is->empty()) out.emplace_back(std::vector<int64_t>(is->begin(), is->end() - 1));
    for (int64_t x : {int64_t{-1000}, int64_t{0}, int64_t{1000}})
      out.emplace_back(std::vector<int64_t>(n, x));
  } else if (const auto* fl = std::get_if<std::vector<float>>(&v)) {
    out.emplace_back(std::vector<float>{});
    auto longer = *fl;
    longer.push_back(1.0f);
    out.emplace_back(longer);
  } else if (std::holds_alternative<std::string>(v)) {
    out.emplace_back(std::string("bogus"));
    out.emplace_back(std::string());
  }
  return out;
}

// Shapes an input is given in place of `d`.
std::vector<Dims> shape_mutations(const Dims& d) {
  std::vector<Dims> out;
  if (!d.empty()) {
    out.emplace_back(d.begin(), d.end() - 1);
    Dims empty = d;
    empty[0] = 0;
    out.push_back(empty);
    Dims longer = d;
    longer.back() = longer.back() == 1 ? 3 : longer.back() + 1;
    out.push_back(longer);
  }
  Dims more{2};
  more.insert(more.end(), d.begin(), d.end());
  out.push_back(more);
  out.push_back({});
  return out;
}

// Elements above which the reference interpreter is not run on a mutant (a mutated window or pad
// may ask for a large output: 64 MiB of float32).
constexpr int64_t kMaxReferenceElements = int64_t{1} << 24;

// What stitchc compile runs, then (with `feed`) the reference interpreter.
Status compile_and_run(std::unique_ptr<Graph> g, PassContext& ctx, const TensorMap* feed) {
  RETURN_IF_ERROR(run_frontend(*g, ctx));
  if (feed) {
    bool small = true;
    for (const auto& v : g->values())
      if (v->has_static_shape() && num_elements(*v->dims) > kMaxReferenceElements) small = false;
    if (small) RETURN_IF_ERROR(run_reference(*g, *feed).status());
  }
  fusion::FusionOptions fo;
  fo.mode = "beam";
  RETURN_IF_ERROR(fusion::rewrite_for_planning(g, fo).status());
  ASSIGN_OR_RETURN(fusion::FusionPlan plan, fusion::make_plan(*g, fo));
  codegen::NodeGroups groups;
  std::vector<int> packs;
  for (const auto& grp : plan.groups) {
    groups.push_back(grp.nodes);
    packs.push_back(grp.pack);
  }
  return codegen::build_schedule(*g, &groups, &packs, plan.gemm_folds).status();
}

// The mutant being run, written out if it crashes the process (a crash is what the test looks
// for, and the one thing it cannot report as a status).
char g_current[512] = "";

void on_crash(int sig) {
  const char* head = "mutation-tests: CRASH (signal) while running ";
  (void)!write(2, head, std::strlen(head));
  (void)!write(2, g_current, std::strlen(g_current));
  (void)!write(2, "\n", 1);
  signal(sig, SIG_DFL);
  raise(sig);
}

struct Counts {
  int mutants = 0, went_through = 0, refused = 0, failed = 0;
};

void record(Counts& c, const Status& st, const std::string& what, bool verbose) {
  ++c.mutants;
  if (st.is_ok()) {
    ++c.went_through;
  } else if (st.code() == Code::kUser) {
    ++c.refused;
    if (verbose) fmt::print("refused {}: {}\n", what, st.message());
  } else {
    ++c.failed;
    fmt::print("FAIL {}: {}\n", what, st.message());
  }
}

Status run_guarded(std::unique_ptr<Graph> g, PassContext& ctx, const TensorMap* feed,
                   const std::string& what) {
  std::snprintf(g_current, sizeof g_current, "%s", what.c_str());
  try {
    return compile_and_run(std::move(g), ctx, feed);
  } catch (const std::bad_alloc&) {
    return Status::user("out of memory");  // what stitchc reports for a tensor too large to hold
  }
}

// All mutants of one test directory.
Status mutate_test(const fs::path& dir, Counts& c, bool verbose) {
  const std::string name = dir.filename().string();
  ASSIGN_OR_RETURN(auto g, import_onnx_file((dir / "model.onnx").string()));
  ASSIGN_OR_RETURN(auto inputs, node_tests::read_set(dir / "test_data_set_0", "input"));
  if (inputs.size() != g->inputs.size()) return Status::ok();  // not a layout the node tests run either
  // Integer inputs (shape operands) become constants, as a user's model holds them.
  TensorMap feed;
  std::vector<Value*> kept;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value* v = g->inputs[i];
    if (inputs[i].dtype() != v->dtype) return Status::ok();  // bfloat16 stored as uint16: not mutated
    if (!is_float(v->dtype)) {
      v->dims = inputs[i].dims();
      v->constant = std::move(inputs[i]);
      continue;
    }
    kept.push_back(v);
    feed[v->name] = std::move(inputs[i]);
  }
  g->inputs = kept;
  const auto bind = [&](PassContext& ctx) {
    for (const auto& [input, t] : feed) ctx.bindings.by_input[input] = t.dims();
  };
  for (size_t i = 0; i < g->nodes().size(); ++i) {
    const Node& n = *g->nodes()[i];
    for (const auto& [attr, value] : n.attrs) {
      std::vector<std::optional<AttrValue>> variants{std::nullopt};  // removed
      for (AttrValue& m : mutations(value)) variants.emplace_back(std::move(m));
      for (const auto& m : variants) {
        auto copy = clone_graph(*g);
        Node& target = *copy->nodes()[i];
        if (m)
          target.attrs[attr] = *m;
        else
          target.attrs.erase(attr);
        PassContext ctx;
        bind(ctx);
        const std::string what =
            fmt::format("{}: {} {}", name, n.describe(),
                        m ? "with attribute '" + attr + "' changed" : "without '" + attr + "'");
        record(c, run_guarded(std::move(copy), ctx, &feed, what), what, verbose);
      }
    }
  }
  // The input's type itself changed (a binding that contradicts a static dim is refused before
  // any op sees it), and every declared shape after it forgotten, as a model exported for that
  // shape would carry.
  for (const auto& [input, t] : feed) {
    for (const Dims& d : shape_mutations(t.dims())) {
      auto copy = clone_graph(*g);
      for (const auto& v : copy->values()) {
        if (v->name == input) {
          v->dims = d;
          v->dim_params.assign(d.size(), "");
        } else if (v->producer) {
          v->dims.reset();
        }
      }
      PassContext ctx;
      for (const auto& [other, x] : feed)
        if (other != input) ctx.bindings.by_input[other] = x.dims();
      const std::string what = fmt::format("{}: input '{}' of shape {}", name, input, dims_to_string(d));
      record(c, run_guarded(std::move(copy), ctx, nullptr, what), what, verbose);
    }
  }
  return Status::ok();
}

// Every attribute of the model file rewritten as each other kind; each must be refused.
void mutate_kinds(const fs::path& dir, Counts& c, bool verbose) {
  using A = onnx::AttributeProto;
  onnx::ModelProto m;
  std::ifstream f(dir / "model.onnx", std::ios::binary);
  if (!m.ParseFromIstream(&f)) return;
  const std::string name = dir.filename().string();
  const auto as_kind = [](const std::string& attr, A::AttributeType t) {
    A a;
    a.set_name(attr);
    a.set_type(t);
    if (t == A::INT) a.set_i(1);
    if (t == A::FLOAT) a.set_f(1.0f);
    if (t == A::STRING) a.set_s("1");
    if (t == A::INTS) a.add_ints(1);
    if (t == A::FLOATS) a.add_floats(1.0f);
    return a;
  };
  for (int i = 0; i < m.graph().node_size(); ++i) {
    const onnx::NodeProto& n = m.graph().node(i);
    for (int j = 0; j < n.attribute_size(); ++j) {
      const A& a = n.attribute(j);
      for (A::AttributeType t : {A::INT, A::FLOAT, A::STRING, A::INTS, A::FLOATS}) {
        if (t == a.type()) continue;
        onnx::ModelProto copy = m;
        *copy.mutable_graph()->mutable_node(i)->mutable_attribute(j) = as_kind(a.name(), t);
        const std::string what = fmt::format("{}: node {} ({}) with attribute '{}' as {}", name, i,
                                             n.op_type(), a.name(), A::AttributeType_Name(t));
        std::snprintf(g_current, sizeof g_current, "%s", what.c_str());
        auto g = import_onnx_bytes(copy.SerializeAsString(), dir.string(), "model.onnx");
        const bool named = !g.is_ok() && g.status().code() == Code::kUser &&
                           g.status().message().find("'" + a.name() + "'") != std::string::npos;
        record(c,
               named ? g.status()
                     : Status::internal(g.is_ok() ? "imported, the attribute's kind unchecked"
                                                  : "refused without naming the attribute: " +
                                                        g.status().message()),
               what, verbose);
      }
    }
  }
}

bool claimed(const Graph& g) {
  return std::all_of(g.nodes().begin(), g.nodes().end(), [](const auto& n) { return n->def != nullptr; });
}

}  // namespace

int main(int argc, char** argv) {
  int shard_k = 0, shard_n = 1, ordinal = 0;
  bool verbose = false;
  std::vector<std::string> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--verbose") {
      verbose = true;
    } else if (a == "--shard" && i + 1 < argc) {
      if (!node_tests::parse_shard(argv[++i], &shard_k, &shard_n)) {
        fmt::print(stderr, "mutation-tests: --shard wants K/N with 0 <= K < N\n");
        return 2;
      }
    } else {
      roots.push_back(a);
    }
  }
  if (roots.empty()) {
    fmt::print(stderr, "usage: stitch_mutation_tests [--shard K/N] [--verbose] DIR...\n");
    return 2;
  }
  for (int sig : {SIGSEGV, SIGFPE, SIGABRT, SIGBUS}) signal(sig, on_crash);
  Counts c;
  int tests = 0;
  for (const auto& root : roots) {
    if (!fs::is_directory(root)) {
      fmt::print(stderr, "mutation-tests: '{}' is not a directory (is libonnx-testdata installed?)\n", root);
      return 2;
    }
    for (const auto& dir : node_tests::test_dirs(root)) {
      if (!fs::exists(dir / "test_data_set_0")) continue;
      if (ordinal++ % shard_n != shard_k) continue;
      auto g = import_onnx_file((dir / "model.onnx").string());
      if (!g.is_ok() || !claimed(**g)) continue;  // unclaimed ops or opsets: the node tests skip them too
      ++tests;
      mutate_kinds(dir, c, verbose);
      Status st = mutate_test(dir, c, verbose);
      if (!st.is_ok()) {
        ++c.failed;
        fmt::print("FAIL {}: {}\n", dir.filename().string(), st.message());
      }
    }
  }
  fmt::print(
      "mutation-tests: {} mutants of {} tests: {} went through, {} refused with a user error, {} failed\n",
      c.mutants, tests, c.went_through, c.refused, c.failed);
  return c.failed ? 1 : 0;
}
