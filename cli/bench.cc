// stitchc bench: latency of an artifact's schedule, after warm-up, over seeded random inputs
// (never zeros: they hide unwritten outputs and can run faster than real data). On the cuda
// backend every time comes from CUDA events; on emu from the host clock, and says nothing about a
// GPU.
//
// --steps times each step alone and gives its achieved bandwidth (the bytes the compiler counted
// for the kernel over its time) as a share of a measured device-to-device copy. --against DIR
// (an artifact of the same model, e.g. compiled with --fusion none) times that one too and sets
// each step beside the steps of DIR that run the same ONNX nodes, and sums them per kind of
// subgraph: normalization (layer norm, RMSNorm), softmax, GELU. --rounds N times the whole
// schedule in N rounds that alternate which artifact runs first, and gives each round's median and
// the ratio of the two in each round: a device whose speed drifts by a few percent over a run
// (bert_tiny's whole-schedule median moved from 137.7 to 142.9-152.4 us between two runs on an
// H200, with every step within 1 us) shows it as spread rather than as a change.
// --json writes every number.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "cli/common.h"
#include "cli/subcommands.h"
#include "stitch/runtime.hpp"

namespace stitch::cli {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint16_t f32_to_f16_bits(float f) {  // round to nearest; the values here are in [-1, 1]
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int exp = int((x >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // flush tiny values to zero
  return static_cast<uint16_t>(sign | (uint32_t(exp) << 10) | ((mant + 0x1000u) >> 13));
}

// Seeded values for one input: floats uniform in [-1, 1]; integers and bools 0 or 1 (valid ids of
// any embedding, valid masks).
std::vector<uint8_t> random_input(const rt::TensorInfo& t, std::mt19937& rng) {
  std::vector<uint8_t> out(static_cast<size_t>(t.bytes), 0);
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  std::uniform_real_distribution<float> uf(-1.0f, 1.0f);
  std::uniform_int_distribution<int> bit(0, 1);
  const size_t esz = n > 0 ? out.size() / static_cast<size_t>(n) : 0;
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* at = out.data() + static_cast<size_t>(i) * esz;
    if (t.dtype == "f32") {
      const float v = uf(rng);
      std::memcpy(at, &v, 4);
    } else if (t.dtype == "f64") {
      const double v = uf(rng);
      std::memcpy(at, &v, 8);
    } else if (t.dtype == "f16") {
      const uint16_t v = f32_to_f16_bits(uf(rng));
      std::memcpy(at, &v, 2);
    } else {
      at[0] = static_cast<uint8_t>(bit(rng));  // little-endian 0 or 1 in any integer width
    }
  }
  return out;
}

// What the artifact's files say about each schedule step: the ONNX nodes it runs (and their op
// types), the bytes the compiler counted for it, and a label.
struct StepMeta {
  std::string label;
  std::vector<std::string> nodes;
  std::set<std::string> ops;
  int64_t bytes = 0;  // kernels: the compiler's count; library calls: their buffers once each
  std::string kind;   // "norm", "softmax", "gelu" or ""
};

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  if (!f)
    throw rt::Error(
        2, fmt::format("cannot read '{}'; is it an artifact directory from stitchc compile?", p.string()));
  json j = json::parse(f, nullptr, false);
  if (j.is_discarded())
    throw rt::Error(2, fmt::format("'{}' is not valid JSON; recompile the model", p.string()));
  return j;
}

std::vector<StepMeta> step_meta(const std::string& dir) {
  const json sched = read_json(std::filesystem::path(dir) / "schedule.json");
  const json rep = read_json(std::filesystem::path(dir) / "report.json");
  std::map<std::string, std::string> op_of;
  std::map<std::string, int64_t> kernel_bytes;
  for (const json& k : rep.value("kernels", json::array())) {
    kernel_bytes[k.at("name").get<std::string>()] = k.value("bytes_moved", int64_t{0});
    for (const json& n : k.at("nodes"))
      op_of[n.at("name").get<std::string>()] = n.at("op").get<std::string>();
  }
  for (const json& c : rep.value("library_calls_detail", json::array()))
    op_of[c.at("node").get<std::string>()] = c.at("op").get<std::string>();
  std::vector<int64_t> buffer_bytes;
  for (const json& b : sched.at("buffers")) buffer_bytes.push_back(b.at("bytes").get<int64_t>());
  std::vector<std::string> kernel_names;
  for (const json& k : sched.at("kernels")) kernel_names.push_back(k.at("name").get<std::string>());
  std::vector<StepMeta> out;
  for (const json& s : sched.at("steps")) {
    StepMeta m;
    const std::string op = s.at("op").get<std::string>();
    for (const json& n : s.value("nodes", json::array())) {
      m.nodes.push_back(n.get<std::string>());
      if (auto it = op_of.find(m.nodes.back()); it != op_of.end()) m.ops.insert(it->second);
    }
    if (op == "kernel") {
      m.label = kernel_names.at(s.at("kernel").get<size_t>());
      m.bytes = kernel_bytes[m.label];
    } else {
      m.label = op;
      if (op == "gemm") m.label += " " + s.at("params").value("epilogue", std::string("none"));
      std::set<int> seen;
      for (const json& a : s.value("args", json::array()))
        if (seen.insert(a.get<int>()).second) m.bytes += buffer_bytes.at(a.get<size_t>());
      if (op == "copy") m.bytes = 2 * s.value("bytes", int64_t{0});
    }
    if (m.ops.count("Softmax"))
      m.kind = "softmax";
    else if (m.ops.count("LayerNormalization") || m.ops.count("ReduceMean") ||
             m.ops.count("RMSNormalization") || m.ops.count("SimplifiedLayerNormalization"))
      m.kind = "norm";
    else if (op == "kernel" &&
             (m.ops.count("Erf") || m.ops.count("Gelu") || (m.ops.count("Tanh") && m.ops.count("Pow"))))
      m.kind = "gelu";  // a GELU kernel; GELU in a GEMM's epilogue is timed with its GEMM
    out.push_back(std::move(m));
  }
  return out;
}

// One artifact under timing: its session, with the seeded inputs set once, and what its files say
// about its steps. `profile` is round 0's (steps and copy there), with the whole-schedule runs of
// every later round appended; `round_ms` is each round's median.
struct Timed {
  std::string describe;
  std::unique_ptr<rt::Session> session;
  std::vector<StepMeta> meta;
  rt::Profile profile;
  std::vector<double> round_ms;
};

Timed open_timed(const std::shared_ptr<const rt::Model>& model, const BenchArgs& a) {
  rt::SessionOptions opts;
  opts.cuda_graph = !a.no_cuda_graph;
  Timed t;
  t.session = std::make_unique<rt::Session>(model, rt::parse_backend(a.backend), opts);
  std::mt19937 rng(a.seed);
  for (const rt::TensorInfo& i : model->inputs()) {
    const std::vector<uint8_t> v = random_input(i, rng);
    t.session->set_input(i.name, i.dtype, i.dims, v.data(), v.size());
  }
  t.describe = t.session->describe();
  t.meta = step_meta(model->dir());
  return t;
}

// One round of `t`: its warm-up runs, then its timed runs (each step alone too, and the copy, when
// asked: round 0 only).
void time_round(Timed& t, const BenchArgs& a, bool steps, bool copy) {
  rt::Profile p = t.session->profile(a.warmup, a.iters, steps, copy);
  t.round_ms.push_back(median(p.run_ms));
  if (t.round_ms.size() == 1)
    t.profile = std::move(p);
  else
    t.profile.run_ms.insert(t.profile.run_ms.end(), p.run_ms.begin(), p.run_ms.end());
}

std::string joined_ms(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.4f}", s.empty() ? "" : " ", x);
  return s;
}

std::string gbps(int64_t bytes, double ms) {
  return ms > 0 ? fmt::format("{:.1f}", bytes / (ms * 1e-3) / 1e9) : "-";
}

}  // namespace

int run_bench(const BenchArgs& a) {
  if (a.iters < 1 || a.warmup < 0 || a.rounds < 1)
    return report(Status::user("--iters and --rounds must be at least 1 and --warmup at least 0"));
  try {
    // Both artifacts and the --json file are checked before anything runs.
    auto model = rt::Model::load(a.dir);
    std::shared_ptr<const rt::Model> against;
    if (!a.against.empty()) against = rt::Model::load(a.against);
    std::ofstream json_file;
    if (!a.json.empty()) {
      json_file.open(a.json);
      if (!json_file) return report(Status::user(fmt::format("cannot write --json '{}'", a.json)));
    }
    const bool steps = a.steps || !a.against.empty();
    const bool device = a.backend == "cuda";
    Timed m = open_timed(model, a);
    Timed base;
    // Rounds alternate which artifact goes first (this one, then the other; the other, then this
    // one; ...), so that a drift of the device's speed over the run falls on both alike; both
    // sessions stay open. Steps alone and the copy are timed in round 0. One round holds one
    // session at a time, so that an artifact near the device's memory can still be compared.
    json rounds = json::array();
    for (int r = 0; r < a.rounds; ++r) {
      const bool this_first = r % 2 == 0 || !against;
      if (this_first) time_round(m, a, r == 0 && steps, r == 0 && steps && device);
      if (against) {
        if (a.rounds == 1) m.session.reset();
        if (!base.session) base = open_timed(against, a);
        time_round(base, a, r == 0, false);
      }
      if (!this_first) time_round(m, a, false, false);
      json j = {{"first", this_first ? "this" : "against"}, {"run_ms_median", m.round_ms.back()}};
      if (against)
        j["against_run_ms_median"] = base.round_ms.back(),
        j["ratio"] = base.round_ms.back() / std::max(m.round_ms.back(), 1e-12);
      rounds.push_back(j);
    }
    const rt::Profile& p = m.profile;
    std::vector<double> sorted = p.run_ms;
    std::sort(sorted.begin(), sorted.end());
    const double mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / sorted.size();
    fmt::print("{} on {}\n", a.dir, m.describe);
    fmt::print("timed with {}, seeded random inputs (seed {})\n", p.clock, a.seed);
    fmt::print("run(): {} iterations after {} warm-up{}: min {:.4f} ms, median {:.4f} ms, mean {:.4f} ms\n",
               a.iters, a.warmup, a.rounds > 1 ? fmt::format(", in each of {} rounds", a.rounds) : "",
               sorted.front(), sorted[sorted.size() / 2], mean);
    json out = {{"artifact", a.dir},
                {"backend", m.describe},
                {"clock", p.clock},
                {"seed", a.seed},
                {"iters", a.iters},
                {"warmup", a.warmup},
                {"rounds", rounds},
                {"run_ms_median", median(p.run_ms)},
                {"run_ms_min", sorted.front()}};
    if (a.rounds > 1) {
      const auto [lo, hi] = std::minmax_element(m.round_ms.begin(), m.round_ms.end());
      fmt::print("median per round: {} ms (spread {:.1f}% of the median)\n", joined_ms(m.round_ms),
                 100 * (*hi - *lo) / std::max(median(m.round_ms), 1e-12));
    }
    if (p.copy_bytes_per_s > 0) {
      fmt::print("device-to-device copy: {:.1f} GB/s (bytes read + written)\n", p.copy_bytes_per_s / 1e9);
      out["copy_gb_per_s"] = p.copy_bytes_per_s / 1e9;
    }
    std::vector<double> step_med;
    for (const auto& s : p.step_ms) step_med.push_back(median(s));
    std::vector<double> base_med;
    std::vector<int> owner;  // per step of the baseline: the step here that runs its first node, or -1
    if (against) {
      for (const auto& s : base.profile.step_ms) base_med.push_back(median(s));
      std::map<std::string, int> step_of_node;
      for (size_t i = 0; i < m.meta.size(); ++i)
        for (const std::string& n : m.meta[i].nodes) step_of_node[n] = static_cast<int>(i);
      for (const StepMeta& b : base.meta) {
        int o = -1;
        for (const std::string& n : b.nodes)
          if (auto it = step_of_node.find(n); it != step_of_node.end()) {
            o = it->second;
            break;
          }
        owner.push_back(o);
      }
      fmt::print("against {}: run() median {:.4f} ms ({:.2f}x)\n", a.against, median(base.profile.run_ms),
                 median(base.profile.run_ms) / std::max(median(p.run_ms), 1e-12));
      out["against"] = {{"artifact", a.against}, {"run_ms_median", median(base.profile.run_ms)}};
      // The ratio of each round's medians: a drift between rounds moves both sides of it alike.
      std::vector<double> ratio;
      for (const json& r : rounds) ratio.push_back(r.at("ratio").get<double>());
      std::sort(ratio.begin(), ratio.end());
      out["against"]["ratio_min"] = ratio.front();
      out["against"]["ratio_median"] = median(ratio);
      out["against"]["ratio_max"] = ratio.back();
      if (a.rounds > 1) {
        fmt::print("against, median per round: {} ms\n", joined_ms(base.round_ms));
        fmt::print("ratio per round (against / this): min {:.3f}, median {:.3f}, max {:.3f}\n", ratio.front(),
                   median(ratio), ratio.back());
      }
    }
    if (steps) {
      std::vector<double> same(m.meta.size(), 0.0);
      std::vector<int> count(m.meta.size(), 0);
      for (size_t b = 0; b < owner.size(); ++b)
        if (owner[b] >= 0) same[owner[b]] += base_med[b], count[owner[b]] += 1;
      fmt::print("\n{:>4}  {:<44} {:>6} {:>11} {:>10} {:>8} {:>6}{}\n", "step", "kernel or call", "nodes",
                 "bytes", "median us", "GB/s", "% copy",
                 a.against.empty() ? "" : "   same nodes there: us (steps)");
      json js = json::array();
      for (size_t i = 0; i < m.meta.size(); ++i) {
        const StepMeta& s = m.meta[i];
        const double ms = i < step_med.size() ? step_med[i] : 0;
        const double bw = ms > 0 ? s.bytes / (ms * 1e-3) : 0;
        const std::string pct =
            p.copy_bytes_per_s > 0 ? fmt::format("{:.0f}", 100 * bw / p.copy_bytes_per_s) : "-";
        std::string there;
        if (!a.against.empty()) there = fmt::format("   {:.2f} ({})", same[i] * 1e3, count[i]);
        fmt::print("{:>4}  {:<44} {:>6} {:>11} {:>10.2f} {:>8} {:>6}{}\n", i, s.label.substr(0, 44),
                   s.nodes.size(), s.bytes, ms * 1e3, gbps(s.bytes, ms), pct, there);
        json j = {{"step", i},      {"label", s.label}, {"nodes", s.nodes.size()},
                  {"kind", s.kind}, {"bytes", s.bytes}, {"median_us", ms * 1e3}};
        if (!a.against.empty()) j["against_us"] = same[i] * 1e3, j["against_steps"] = count[i];
        js.push_back(j);
      }
      out["steps"] = js;
      if (!a.against.empty()) {
        double alone = 0;
        int n = 0;
        for (size_t b = 0; b < owner.size(); ++b)
          if (owner[b] < 0) alone += base_med[b], ++n;
        // Nodes no step here names: work a GEMM call took over (bias adds, transposes, scalings),
        // views, and sibling GEMMs merged into one ('.../merged').
        if (n > 0)
          fmt::print(
              "{} step(s) there run nodes no step here names (taken over by GEMM calls, views, merged "
              "sibling GEMMs): {:.2f} us\n",
              n, alone * 1e3);
        out["against"]["unmatched_steps"] = n;
        out["against"]["unmatched_us"] = alone * 1e3;
      }
      // Per kind of subgraph: the steps here of that kind against the same nodes in the baseline.
      json kinds = json::object();
      for (const std::string kind : {"norm", "softmax", "gelu"}) {
        double here = 0, there = 0;
        int64_t bytes = 0;
        int n = 0;
        for (size_t i = 0; i < m.meta.size(); ++i)
          if (m.meta[i].kind == kind) here += step_med[i], there += same[i], bytes += m.meta[i].bytes, ++n;
        if (n == 0) continue;
        const std::string pct =
            p.copy_bytes_per_s > 0
                ? fmt::format(", {:.0f}% of copy", 100 * (bytes / (here * 1e-3)) / p.copy_bytes_per_s)
                : "";
        fmt::print("{}: {} step(s), {:.2f} us, {} GB/s{}{}\n", kind, n, here * 1e3, gbps(bytes, here), pct,
                   a.against.empty() ? ""
                                     : fmt::format("; the same nodes there: {:.2f} us ({:.2f}x)", there * 1e3,
                                                   there / std::max(here, 1e-12)));
        kinds[kind] = {{"steps", n}, {"us", here * 1e3}, {"bytes", bytes}};
        if (!a.against.empty()) kinds[kind]["against_us"] = there * 1e3;
      }
      out["kinds"] = kinds;
    }
    if (a.backend == "emu") fmt::print("note: emu times the CPU emulation layer, not a GPU\n");
    if (json_file.is_open()) json_file << out.dump(2) << "\n";
    return 0;
  } catch (const rt::Error& e) {
    return report(e.code() == 2 ? Status::user(e.what()) : Status::internal(e.what()));
  }
}

}  // namespace stitch::cli
