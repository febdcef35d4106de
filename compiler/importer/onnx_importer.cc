#include "importer/onnx_importer.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "importer/contrib_ops.h"
#include "importer/inline_if.h"
#include "importer/op_schema.h"
#include "importer/tensor_proto.h"
#include "ir/legacy_forms.h"
#include "ir/op_table.h"

namespace stitch {
namespace fs = std::filesystem;

namespace {

class Importer {
 public:
  // `m` loses its initializers' raw bytes as they become constants (one copy of the weights in
  // memory, not two).
  Importer(onnx::ModelProto& m, std::string base_dir)
      : model_(m), base_dir_(std::move(base_dir)), g_(std::make_unique<Graph>()) {}

  StatusOr<std::unique_ptr<Graph>> run() {
    RETURN_IF_ERROR(read_opsets());
    const onnx::GraphProto& gp = model_.graph();
    g_->name = gp.name().empty() ? "main" : gp.name();
    RETURN_IF_ERROR(read_initializers(*model_.mutable_graph()));
    RETURN_IF_ERROR(read_inputs(gp));
    RETURN_IF_ERROR(read_nodes(gp));
    RETURN_IF_ERROR(read_outputs(gp));
    read_declared_types(gp);
    RETURN_IF_ERROR(g_->topo_sort());
    RETURN_IF_ERROR(expand_contrib_ops(*g_));
    RETURN_IF_ERROR(g_->topo_sort());
    return std::move(g_);
  }

 private:
  Status read_opsets() {
    std::optional<int64_t> dflt;
    for (const auto& o : model_.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") dflt = o.version();
      domain_opset_[o.domain()] = o.version();
    }
    if (!dflt)
      return Status::user("the model imports no version of the default ONNX operator set; re-export it "
                          "with an explicit opset (e.g. opset_version=17)");
    if (*dflt < kMinModelOpset || *dflt > kMaxOpset)
      return Status::user(
          fmt::format("the model uses ONNX opset {}; stitch supports opsets {} to {}. Convert it with "
                      "onnx.version_converter.convert_version(model, 17) or re-export with opset_version=17",
                      *dflt, kMinModelOpset, kMaxOpset));
    // Nodes of an older model keep its opset until infer_shapes upgrades them (ir/legacy_forms.h);
    // the graph, and every node a pass adds, is at opset 11 or later.
    g_->model_opset = static_cast<int>(*dflt);
    g_->opset = std::max(g_->model_opset, kMinOpset);
    return Status::ok();
  }

  Status read_initializers(onnx::GraphProto& gp) {
    for (auto& init : *gp.mutable_initializer()) {
      if (init.name().empty()) return Status::user("an initializer has no name");
      if (g_->find_value(init.name()))
        return Status::user(fmt::format("initializer '{}' is defined twice", init.name()));
      ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(init, base_dir_, "initializer '" + init.name() + "'"));
      if (init.has_raw_data()) std::string().swap(*init.mutable_raw_data());
      Value* v = g_->add_value(init.name());
      v->dtype = t.dtype();
      v->dims = t.dims();
      v->constant = std::move(t);
    }
    if (gp.sparse_initializer_size() > 0)
      return Status::user(fmt::format("sparse initializer '{}' is not supported; densify it before export",
                                      gp.sparse_initializer(0).values().name()));
    return Status::ok();
  }

  Status read_type(const onnx::ValueInfoProto& vi, Value& v, const char* role) {
    if (!vi.type().has_tensor_type())
      return Status::user(fmt::format("{} '{}' is not a tensor (sequences, maps and optionals are not supported)",
                                      role, vi.name()));
    const auto& tt = vi.type().tensor_type();
    auto dt = dtype_from_onnx(tt.elem_type());
    if (!dt)
      return Status::user(fmt::format("{} '{}' has element type {}, which stitch does not support", role,
                                      vi.name(), onnx_dtype_name(tt.elem_type())));
    v.dtype = *dt;
    if (!tt.has_shape()) return Status::ok();  // rank unknown: --shape must give it
    Dims d;
    std::vector<std::string> params;
    for (const auto& dim : tt.shape().dim()) {
      if (dim.has_dim_value() && dim.dim_value() >= 0) {
        d.push_back(dim.dim_value());
        params.emplace_back();
      } else {
        d.push_back(-1);
        params.push_back(dim.has_dim_param() ? dim.dim_param() : "");
      }
    }
    v.dims = d;
    v.dim_params = params;
    return Status::ok();
  }

  Status read_inputs(const onnx::GraphProto& gp) {
    for (const auto& in : gp.input()) {
      if (Value* c = g_->find_value(in.name()); c && c->constant) continue;  // initializer wins (IR < 4 style)
      if (g_->find_value(in.name())) return Status::user(fmt::format("graph input '{}' is listed twice", in.name()));
      Value* v = g_->add_value(in.name());
      RETURN_IF_ERROR(read_type(in, *v, "input"));
      g_->inputs.push_back(v);
    }
    return Status::ok();
  }

  Status read_attribute(const onnx::AttributeProto& a, const std::string& node, AttrValue* out) {
    using A = onnx::AttributeProto;
    if (!a.ref_attr_name().empty())
      return Status::user(fmt::format("node '{}': attribute '{}' refers to a function attribute; inline "
                                      "model-local functions first (onnx.inliner.inline_local_functions)",
                                      node, a.name()));
    switch (a.type()) {
      case A::INT: *out = static_cast<int64_t>(a.i()); return Status::ok();
      case A::FLOAT: *out = a.f(); return Status::ok();
      case A::STRING: *out = a.s(); return Status::ok();
      case A::INTS: *out = std::vector<int64_t>(a.ints().begin(), a.ints().end()); return Status::ok();
      case A::FLOATS: *out = std::vector<float>(a.floats().begin(), a.floats().end()); return Status::ok();
      case A::STRINGS: *out = std::vector<std::string>(a.strings().begin(), a.strings().end()); return Status::ok();
      case A::TENSOR: {
        ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(a.t(), base_dir_,
                                                     fmt::format("attribute '{}' of node '{}'", a.name(), node)));
        *out = std::move(t);
        return Status::ok();
      }
      default:
        return Status::user(fmt::format("node '{}': attribute '{}' has a kind stitch does not support "
                                        "(subgraphs, sparse tensors, type protos)", node, a.name()));
    }
  }

  // Constant nodes become constant values right away.
  StatusOr<Tensor> constant_value(const Node& n) {
    const auto& a = n.attrs;
    if (a.size() != 1) return Status::user(fmt::format("{} must have exactly one value attribute", n.describe()));
    const auto& [key, val] = *a.begin();
    if (key == "value") return std::get<Tensor>(val);
    if (key == "value_float") return Tensor::from_f64(DType::kF32, {}, {std::get<float>(val)});
    if (key == "value_int") return Tensor::scalar_i64(std::get<int64_t>(val));
    if (key == "value_ints") return Tensor::vector_i64(std::get<std::vector<int64_t>>(val));
    if (key == "value_floats") {
      const auto& f = std::get<std::vector<float>>(val);
      return Tensor::from_f64(DType::kF32, {static_cast<int64_t>(f.size())}, std::vector<double>(f.begin(), f.end()));
    }
    return Status::user(fmt::format("{}: a '{}' constant is not supported", n.describe(), key));
  }

  Status read_nodes(const onnx::GraphProto& gp) {
    struct Unsupported {
      int count = 0;
      std::vector<std::string> examples;
      std::string why;
    };
    std::map<std::string, Unsupported> unsupported;
    std::set<std::string> names;
    std::set<std::string> function_names;
    for (const auto& f : model_.functions()) function_names.insert(f.domain() + "::" + f.name());
    // Create all produced values first so node order in the file does not matter.
    for (int i = 0; i < gp.node_size(); ++i) {
      const auto& np = gp.node(i);
      if (np.op_type() == "Constant") continue;
      for (const auto& o : np.output()) {
        if (o.empty()) continue;
        if (g_->find_value(o))
          return Status::user(fmt::format("value '{}' is produced twice (node '{}'); each value must have one "
                                          "producer", o, np.name()));
        g_->add_value(o);
      }
    }
    std::vector<std::unique_ptr<Node>> pending;
    for (int i = 0; i < gp.node_size(); ++i) {
      const auto& np = gp.node(i);
      auto n = std::make_unique<Node>();
      n->op_type = np.op_type();
      n->domain = np.domain() == "ai.onnx" ? "" : np.domain();
      std::string base = np.name().empty() ? fmt::format("{}_{}", np.op_type(), i) : np.name();
      n->name = base;
      for (int k = 1; !names.insert(n->name).second; ++k) n->name = fmt::format("{}_{}", base, k);
      auto it = domain_opset_.find(np.domain());
      n->opset = n->domain.empty() ? g_->model_opset
                                   : (it == domain_opset_.end() ? 0 : static_cast<int>(it->second));
      for (const auto& a : np.attribute()) {
        AttrValue v;
        Status st = read_attribute(a, n->name, &v);
        if (!st.is_ok()) {
          if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) break;
          return st;
        }
        n->attrs[a.name()] = std::move(v);
      }
      if (n->op_type == "Constant" && n->domain.empty()) {
        RETURN_IF_ERROR(check_node_schema(*n, np.input_size(), np.output_size()));
        ASSIGN_OR_RETURN(Tensor t, constant_value(*n));
        if (np.output_size() != 1) return Status::user(fmt::format("{} must have one output", n->describe()));
        if (g_->find_value(np.output(0)))
          return Status::user(fmt::format("value '{}' is produced twice", np.output(0)));
        Value* v = g_->add_value(np.output(0));
        v->dtype = t.dtype();
        v->dims = t.dims();
        v->constant = std::move(t);
        continue;
      }
      n->def = find_model_op(n->domain, n->op_type, n->opset);
      if (!n->def && !is_contrib_op(*n)) {
        std::string key = n->domain.empty() ? n->op_type : n->domain + "::" + n->op_type;
        auto& u = unsupported[key];
        if (++u.count <= 3) u.examples.push_back("'" + n->name + "'");
        u.why = n->op_type == "If" && n->domain.empty() ? undecided_if_reason(np, gp)
                                                        : unsupported_reason(*n, function_names);
      }
      pending.push_back(std::move(n));
      pending_protos_.push_back(&np);
    }
    if (!unsupported.empty()) {
      int total = 0;
      std::string lines;
      for (const auto& [op, u] : unsupported) {
        total += u.count;
        lines += fmt::format("\n  {} x{} (e.g. {}){}", op, u.count, fmt::join(u.examples, ", "),
                             u.why.empty() ? "" : ": " + u.why);
      }
      return Status::user(fmt::format(
          "the model has {} node(s) of {} op type(s) that stitch does not support (it supports {} ops of the "
          "default ONNX domain at opsets {}-{}; `stitchc ops` lists them):{}",
          total, unsupported.size(),
          std::count_if(all_ops().begin(), all_ops().end(), [](const OpDef& d) { return !d.internal; }),
          kMinModelOpset, kMaxOpset, lines));
    }
    for (size_t i = 0; i < pending.size(); ++i) {
      Node& n = *pending[i];
      const auto& np = *pending_protos_[i];
      for (const auto& in : np.input()) {
        if (in.empty()) {
          n.inputs.push_back(nullptr);
          continue;
        }
        Value* v = g_->find_value(in);
        if (!v)
          return Status::user(fmt::format("{} reads '{}', which no node, input or initializer defines; the "
                                          "model is incomplete or corrupt", n.describe(), in));
        n.inputs.push_back(v);
      }
      for (const auto& o : np.output()) n.outputs.push_back(o.empty() ? nullptr : g_->find_value(o));
      if (n.domain.empty() && n.op_type == "LayerNormalization" && is_contrib_op(n)) {
        Node as_onnx = n;  // onnxruntime's LayerNormalization before opset 17 is ONNX's of opset 17
        as_onnx.opset = 17;
        RETURN_IF_ERROR(check_node_schema(as_onnx, np.input_size(), np.output_size()));
      } else {
        RETURN_IF_ERROR(check_node_schema(n, np.input_size(), np.output_size()));
      }
      // Trailing omitted optional inputs/outputs carry no meaning.
      while (!n.inputs.empty() && !n.inputs.back()) n.inputs.pop_back();
      g_->add_node(std::move(pending[i]));
    }
    return Status::ok();
  }

  std::string unsupported_reason(const Node& n, const std::set<std::string>& functions) {
    if (functions.count(n.domain + "::" + n.op_type))
      return "a model-local function; inline it first (onnx.inliner.inline_local_functions)";
    if (n.op_type == "Loop" || n.op_type == "Scan")
      return "control flow is not supported; export with static control flow (trace, not script)";
    if (n.domain == "com.microsoft")
      return fmt::format(
          "an onnxruntime contrib op stitch does not read (it reads {}, as onnxruntime's transformer "
          "optimizer and onnxruntime-genai's model builder write them); optimize without the fusion "
          "that wrote it, or export with standard ONNX ops",
          contrib_op_list());
    if (!n.domain.empty()) return "custom-domain ops are not supported; export with standard ONNX ops";
    for (const auto& d : all_ops())
      if (d.name == n.op_type && !d.internal)
        return fmt::format("supported for opsets {}-{}, the model uses {}", d.since, d.until, n.opset);
    return "";
  }

  Status read_outputs(const onnx::GraphProto& gp) {
    if (gp.output_size() == 0) return Status::user("the graph has no outputs");
    for (const auto& o : gp.output()) {
      Value* v = g_->find_value(o.name());
      if (!v) return Status::user(fmt::format("graph output '{}' is not produced by any node", o.name()));
      if (g_->is_graph_output(v)) return Status::user(fmt::format("graph output '{}' is listed twice", o.name()));
      g_->outputs.push_back(v);
    }
    return Status::ok();
  }

  // The element types the model declares for node outputs (graph outputs, value_info), for
  // infer_shapes to check. Types stitch lacks, and names no node produces, are left to the checks
  // that own them.
  void read_declared_types(const onnx::GraphProto& gp) {
    auto declare = [&](const onnx::ValueInfoProto& vi) {
      if (!vi.type().has_tensor_type() || vi.type().tensor_type().elem_type() == 0) return;
      Value* v = g_->find_value(vi.name());
      const auto dt = dtype_from_onnx(vi.type().tensor_type().elem_type());
      if (v && v->producer && dt) v->declared = *dt;
    };
    for (const auto& vi : gp.value_info()) declare(vi);
    for (const auto& o : gp.output()) declare(o);
  }

  onnx::ModelProto& model_;
  std::string base_dir_;
  std::unique_ptr<Graph> g_;
  std::map<std::string, int64_t> domain_opset_;
  std::vector<const onnx::NodeProto*> pending_protos_;
};

}  // namespace

namespace {

// A parsed model into the IR; `m` is edited (fixed inputs, decided Ifs inlined).
StatusOr<std::unique_ptr<Graph>> import_model(onnx::ModelProto& m, const std::string& base_dir,
                                              const std::string& display, const ImportOptions& options) {
  if (!m.has_graph() || m.ir_version() <= 0 || m.opset_import_size() == 0)
    return Status::user(fmt::format("{}: not an ONNX model (no graph, IR version or opset import found)", display));
  if (m.graph().node_size() == 0 && m.graph().output_size() == 0)
    return Status::user(fmt::format("{}: the ONNX model's graph is empty", display));
  std::vector<FixedInput> fixed;
  std::vector<std::string> log;
  Status decided = fix_inputs(*m.mutable_graph(), options.constant_inputs, &fixed);
  if (decided.is_ok()) decided = inline_decided_ifs(*m.mutable_graph(), base_dir, &log);
  if (!decided.is_ok()) return decided.with_context(display);
  auto g = Importer(m, base_dir).run();
  if (!g.is_ok()) return g.status().with_context(display);
  (*g)->fixed_inputs = std::move(fixed);
  (*g)->import_log = std::move(log);
  return g;
}

Status not_parsed(const std::string& display) {
  return Status::user(
      fmt::format("{}: not a valid ONNX model (the protobuf does not parse: the file is "
                  "truncated, corrupt, or not ONNX)",
                  display));
}

}  // namespace

StatusOr<std::unique_ptr<Graph>> import_onnx_bytes(const std::string& bytes, const std::string& base_dir,
                                                   const std::string& display, const ImportOptions& options) {
  onnx::ModelProto m;
  if (bytes.empty()) return Status::user(fmt::format("{}: the file is empty", display));
  if (!m.ParseFromString(bytes)) return not_parsed(display);
  return import_model(m, base_dir, display, options);
}

StatusOr<std::unique_ptr<Graph>> import_onnx_file(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Status::user(fmt::format("{}: no such file; check the path", path));
  if (fs::is_directory(path, ec))
    return Status::user(fmt::format("{}: is a directory, not an .onnx file", path));
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::user(fmt::format("{}: cannot be opened (permissions?)", path));
  if (fs::file_size(path, ec) == 0 && !ec) return Status::user(fmt::format("{}: the file is empty", path));
  // Parsed from the stream: the file's bytes are not held beside the parsed model.
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&f)) return not_parsed(path);
  return import_model(m, fs::path(path).parent_path().string(), path, options);
}

}  // namespace stitch
