#include "fusion/cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "codegen/library.h"
#include "codegen/lower.h"
#include "codegen/scalar_ops.h"

namespace stitch::fusion {
namespace {

int64_t bytes_of(const Value* v) { return num_elements(*v->dims) * dtype_size(v->dtype); }

// Bandwidth-bound time or the longest per-thread chain of memory round trips and arithmetic,
// whichever is larger (a kernel with few threads is latency-bound, not bandwidth-bound).
double kernel_time(int64_t bytes, int64_t reread, double flops, int64_t threads, double round_trips,
                   double barrier_time, const DeviceSpec& d, double loop_steps = 0) {
  const double serial =
      round_trips * d.latency + flops / std::max<int64_t>(threads, 1) / d.clock + loop_steps * d.loop_step;
  return d.launch + std::max(bytes / (d.dram_bw * d.bw_eff), std::max(serial, flops / d.fp32)) +
         reread / d.l2_bw + barrier_time;
}

// The math rate of a library call (cost.h): what the runtime asks cuBLASLt and cuDNN for.
double library_rate(const Node& n, const DeviceSpec& d) {
  const DType t = n.input(0) ? n.input(0)->dtype : DType::kF32;
  if (t == DType::kF16 || t == DType::kBF16) return 2 * d.tensor;
  if (t == DType::kF64) return d.fp32 / 2;
  return d.tf32 ? d.tensor : d.fp32;
}

// Whether `n` reads only some elements of input `i`, at most as many as its output has: a Slice's
// data, a Gather's table.
bool reads_part(const Node& n, size_t i) {
  return i == 0 && (n.op_type == "Slice" || n.op_type == "Gather" || n.op_type == "GatherElements" ||
                    n.op_type == "GatherND");
}

// Dependent round trips of an element kernel: one per grid-stride iteration.
double element_trips(int64_t n) {
  const int64_t threads = std::min<int64_t>(std::max<int64_t>(n, 1), codegen::kMaxMapBlocks * codegen::kMapBlock);
  return static_cast<double>((n + threads - 1) / threads);
}

// A tiled GEMM's kernel (cost.h): `bytes` each input once and each stored value once,
// `epilogue_flops` the instructions of its other nodes.
Cost tiled_cost(const codegen::GemmTile& t, int64_t bytes, double epilogue_flops, int64_t epilogue_reread,
                double epilogue_macs, const DeviceSpec& d) {
  const Value *a = t.node->input(0), *b = t.node->input(1);
  const double macs = static_cast<double>(t.rows) * static_cast<double>(t.n) * static_cast<double>(t.k);
  const double fill = std::min(1.0, static_cast<double>(t.blocks()) / d.sms);
  const int64_t threads = t.blocks() * codegen::kTileThreads;
  // Operand re-reads from L2 (every GEMM has them; the library call's time does not charge them
  // either, tiled_gemm_eff does), reported only; a fine-grained loop in the epilogue pays its own.
  const int64_t reread = (t.blocks_n() - 1) * bytes_of(a) + (t.blocks_m() - 1) * bytes_of(b);
  // The epilogue: one round trip for its loads and the arithmetic of its elements.
  const double epilogue = d.latency + epilogue_flops / static_cast<double>(threads) / d.clock +
                          epilogue_macs / static_cast<double>(threads) * d.loop_step;
  // A block's K loop waits for one global round trip per step (the next step's slices load while
  // this one computes, so a step takes at least the latency), once per wave of blocks: what bounds
  // a product of few tiles and a long K (a classifier's [1 x 576] x [576 x 1024] runs 16 blocks
  // through 36 steps), where the library spreads K over the SMs instead.
  const double waves =
      std::ceil(static_cast<double>(t.blocks()) / static_cast<double>(d.sms * codegen::kTileBlocksPerSm));
  const double serial = waves * static_cast<double>(t.steps()) * d.latency;
  Cost c;
  c.bytes = bytes;
  c.reread = reread + epilogue_reread;
  c.flops = 2 * macs + epilogue_flops;
  c.time = d.launch + std::max({2 * macs / (d.fp32 * d.tiled_gemm_eff * fill), epilogue, serial}) +
           bytes / (d.dram_bw * d.bw_eff) + epilogue_reread / d.l2_bw;
  c.launches = c.kernels = 1;
  return c;
}

}  // namespace

RowShape row_shape(const codegen::RowMapping& m, int64_t rows, int passes, int reductions,
                   const DeviceSpec& d, int shared) {
  const int trees = reductions + shared;
  const int64_t lanes = m.lanes();
  const int64_t iters = (m.segment + lanes - 1) / lanes;
  RowShape r;
  r.trips = passes * (static_cast<double>((iters + 3) / 4) + 1);
  if (m.warp_per_row) {
    r.threads = rows * 32 * m.replicas;
  } else if (m.column) {  // tiles of rows_per_block columns; two barriers per reduction and wave
    const int64_t blocks = (rows + m.rows_per_block - 1) / m.rows_per_block;
    r.threads = blocks * m.block;
    r.barrier_time = 2.0 * trees * ((blocks + d.sms - 1) / d.sms) * d.barrier;
  } else if (!m.split()) {
    r.threads = rows * m.block * m.replicas;
    r.barrier_time = 2.0 * trees * ((rows * m.replicas + d.sms - 1) / d.sms) * d.barrier;
  } else {
    r.threads = rows * m.segments * m.block;
    r.barrier_time = 2.0 * trees * d.barrier + reductions * d.grid_barrier;
  }
  return r;
}

StatusOr<DeviceSpec> device_spec(const std::string& arch) {
  DeviceSpec s;
  s.arch = arch;
  if (arch == "sm_90") {
    s.name = "H100 SXM5 80GB";
    s.sms = 132;
    s.smem_per_sm = 228 * 1024;
    s.dram_bw = 3.35e12;
    s.l2_bw = 3 * 3.35e12;
    s.fp32 = 67e12;
    s.tensor = 495e12;
    s.clock = 1.98e9;
    s.grid_barrier = 1.0e-6;
    s.sources =
        "sms, boost clock 1.98 GHz, fp32 67 TFLOPS, tf32 tensor 495 TFLOPS dense, HBM3 3.35 TB/s: NVIDIA "
        "H100 Tensor Core GPU datasheet (SXM5); "
        "228 KB shared memory and 2048 threads and 64K registers per SM: CUDA C++ Programming Guide, compute "
        "capability 9.0 table; L2 bandwidth 3x DRAM: assumed; bw_eff 0.85, launch 3 us, memory latency 0.5 "
        "us, barrier 0.1 us: "
        "assumed until calibrated (stitchc calibrate); tiled_gemm_eff 0.7: assumed from published SIMT "
        "SGEMMs (cost.h) "
        "until measured; loop_step 45 ns: fine-grained GEMM loops of 1024 and 1835 steps per thread timed "
        "on an H100 SXM5 (bench/gpu/results/2026-11-25-h100); grid barrier 1 us: 16 grid-wide barriers "
        "against none in an empty cooperative kernel of 128 to 264 blocks of 128 threads, 1.03 us each on "
        "an H200, the same SMs as the H100's (bench/gpu/grid_barrier.cu, bench/gpu/results/2026-12-04-h200)";
  } else if (arch == "sm_80") {
    s.name = "A100 SXM4 80GB";
    s.sms = 108;
    s.smem_per_sm = 164 * 1024;
    s.dram_bw = 2.039e12;
    s.l2_bw = 3 * 2.039e12;
    s.fp32 = 19.5e12;
    s.tensor = 156e12;
    s.clock = 1.41e9;
    s.loop_step = 6.3e-8;
    s.sources =
        "sms, boost clock 1.41 GHz, fp32 19.5 TFLOPS, tf32 tensor 156 TFLOPS dense, HBM2e 2039 GB/s: NVIDIA "
        "A100 Tensor Core GPU datasheet "
        "(SXM4 80GB); 164 KB shared memory and 2048 threads and 64K registers per SM: CUDA C++ Programming "
        "Guide, "
        "compute capability 8.0 table; L2 bandwidth 3x DRAM: assumed; bw_eff 0.85, launch 3 us, memory "
        "latency 0.5 us, barrier "
        "0.1 us, grid barrier 2 us: assumed until calibrated (stitchc calibrate); tiled_gemm_eff 0.7: "
        "assumed from "
        "published SIMT SGEMMs (cost.h) until measured; loop_step 63 ns: the H100's 45 ns scaled by the "
        "clocks, assumed until measured";
  } else {
    return Status::user(fmt::format("no device spec for '{}': the cost model knows sm_80 and sm_90 (or pass "
                                    "--device-spec FILE from stitchc calibrate)", arch));
  }
  return s;
}

std::string device_spec_json(const DeviceSpec& s) {
  nlohmann::json j = {{"arch", s.arch},
                      {"name", s.name},
                      {"sms", s.sms},
                      {"max_threads_per_sm", s.max_threads_per_sm},
                      {"smem_per_sm", s.smem_per_sm},
                      {"regs_per_sm", s.regs_per_sm},
                      {"dram_bw", s.dram_bw},
                      {"l2_bw", s.l2_bw},
                      {"fp32", s.fp32},
                      {"tensor", s.tensor},
                      {"bw_eff", s.bw_eff},
                      {"launch", s.launch},
                      {"latency", s.latency},
                      {"clock", s.clock},
                      {"tiled_gemm_eff", s.tiled_gemm_eff},
                      {"loop_step", s.loop_step},
                      {"barrier", s.barrier},
                      {"grid_barrier", s.grid_barrier},
                      {"sources", s.sources}};
  return j.dump(2) + "\n";
}

StatusOr<DeviceSpec> load_device_spec(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::user(fmt::format("{}: cannot read the device spec file", path));
  nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("arch"))
    return Status::user(fmt::format("{}: not a device spec (JSON from stitchc calibrate with an \"arch\" field)", path));
  auto base = device_spec(j["arch"].get<std::string>());
  if (!base.is_ok()) return Status::user(fmt::format("{}: {}", path, base.status().message()));
  DeviceSpec s = *base;
  auto num = [&](const char* k, double& out) -> Status {
    if (!j.contains(k)) return Status::ok();
    if (!j[k].is_number() || j[k].get<double>() <= 0)
      return Status::user(fmt::format("{}: \"{}\" must be a positive number", path, k));
    out = j[k].get<double>();
    return Status::ok();
  };
  RETURN_IF_ERROR(num("dram_bw", s.dram_bw));
  RETURN_IF_ERROR(num("l2_bw", s.l2_bw));
  RETURN_IF_ERROR(num("fp32", s.fp32));
  RETURN_IF_ERROR(num("tensor", s.tensor));
  RETURN_IF_ERROR(num("bw_eff", s.bw_eff));
  RETURN_IF_ERROR(num("launch", s.launch));
  RETURN_IF_ERROR(num("barrier", s.barrier));
  RETURN_IF_ERROR(num("grid_barrier", s.grid_barrier));
  RETURN_IF_ERROR(num("latency", s.latency));
  RETURN_IF_ERROR(num("clock", s.clock));
  RETURN_IF_ERROR(num("tiled_gemm_eff", s.tiled_gemm_eff));
  RETURN_IF_ERROR(num("loop_step", s.loop_step));
  // The device's sizes, for a part the built-in specs do not describe (an H100 PCIe has 114 SMs):
  // the cost model's parallelism and the register budget's check of resident blocks use them.
  auto count = [&](const char* k, int64_t most, auto& out) -> Status {
    if (!j.contains(k)) return Status::ok();
    if (!j[k].is_number_integer() || j[k].get<int64_t>() <= 0 || j[k].get<int64_t>() > most)
      return Status::user(fmt::format("{}: \"{}\" must be a whole number from 1 to {}", path, k, most));
    out = static_cast<std::remove_reference_t<decltype(out)>>(j[k].get<int64_t>());
    return Status::ok();
  };
  RETURN_IF_ERROR(count("sms", 100000, s.sms));
  RETURN_IF_ERROR(count("max_threads_per_sm", 100000, s.max_threads_per_sm));
  RETURN_IF_ERROR(count("smem_per_sm", int64_t{1} << 40, s.smem_per_sm));
  RETURN_IF_ERROR(count("regs_per_sm", int64_t{1} << 40, s.regs_per_sm));
  if (j.contains("name") && j["name"].is_string()) s.name = j["name"].get<std::string>();
  if (s.tiled_gemm_eff > 1)
    return Status::user(
        fmt::format("{}: \"tiled_gemm_eff\" is a fraction of the fp32 rate: at most 1", path));
  if (j.contains("sources") && j["sources"].is_string()) s.sources = j["sources"].get<std::string>();
  return s;
}

Cost single_cost(const Node& n, const DeviceSpec& d) {
  Cost c;
  switch (codegen::classify_node(n)) {
    case codegen::NodeLowering::kView:
    case codegen::NodeLowering::kUnsupported:
      return c;
    case codegen::NodeLowering::kLibrary: {
      // 2*M*N*K from the output and the reduced dimension of input 0 (MatMul/Gemm), or the output
      // times the filter volume (Conv), or the input times it (ConvTranspose); the operands once each.
      int64_t bytes = 0;
      for (const Value* v : n.inputs)
        if (v) bytes += bytes_of(v);
      for (const Value* v : n.outputs)
        if (v) bytes += bytes_of(v);
      double flops = 0;
      const Value* y = n.output(0);
      if (n.op_type == "Conv" && n.input(1)) {
        const Dims& w = *n.input(1)->dims;
        flops = 2.0 * num_elements(*y->dims) * (num_elements(w) / std::max<int64_t>(1, w[0]));
      } else if (n.op_type == "ConvTranspose" && n.input(1)) {
        // each input value times its group's weights, W [C, M / group, k...]
        const Dims& w = *n.input(1)->dims;
        flops = 2.0 * num_elements(*n.input(0)->dims) * (num_elements(w) / std::max<int64_t>(1, w[0]));
      } else if (n.input(0) && !n.input(0)->dims->empty()) {
        const int64_t k = n.op_type == "Gemm" && n.attr_int("transA", 0) ? n.input(0)->dims->front() : n.input(0)->dims->back();
        flops = 2.0 * num_elements(*y->dims) * k;
      }
      c.time = d.launch + flops / library_rate(n, d) + bytes / (d.dram_bw * d.bw_eff);
      c.launches = 1;
      c.library_calls = 1;
      c.library_bytes = bytes;
      // C is broadcast into the output by a generated kernel first, unless it is a bias vector the
      // call adds in its epilogue.
      if (n.op_type == "Gemm" && n.input(2) && n.attr_float("beta", 1.0f) != 0.0f && !codegen::gemm_bias_epilogue(n)) {
        const int64_t fill = bytes_of(n.input(2)) + bytes_of(y);
        c.time += kernel_time(
            fill, 0, static_cast<double>(num_elements(*y->dims)),
            std::min<int64_t>(num_elements(*y->dims), codegen::kMaxMapBlocks * codegen::kMapBlock),
            element_trips(num_elements(*y->dims)), 0.0, d);
        c.bytes += fill;
        c.launches += 1;
        c.kernels += 1;
      }
      c.flops = flops;
      return c;
    }
    case codegen::NodeLowering::kKernel:
      break;
  }
  int64_t bytes = 0, elements = 0;
  if (n.op_type == "TensorScatter" && n.input(1)) {
    // The front end leaves a TensorScatter only where it writes its update in place (into a cache
    // input: ops::tensor_scatter_in_place): the update read and written, one thread an element.
    bytes = 2 * bytes_of(n.input(1)) + (n.input(2) ? bytes_of(n.input(2)) : 0);
    elements = num_elements(*n.input(1)->dims);
  } else {
    // A Slice reads only the elements it keeps, a Gather those it picks.
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (const Value* v = n.input(i))
        bytes += reads_part(n, i) ? std::min(bytes_of(n.output(0)), bytes_of(v)) : bytes_of(v);
    for (const Value* v : n.outputs)
      if (v) {
        bytes += bytes_of(v);
        elements = std::max(elements, num_elements(*v->dims));
      }
  }
  int64_t threads = std::min<int64_t>(std::max<int64_t>(elements, 1), codegen::kMaxMapBlocks * codegen::kMapBlock);
  int64_t reread = 0;
  double trips = element_trips(elements), barrier_time = 0;
  if (auto ri = codegen::row_op_info(n); ri.is_ok() && !ri->column) {
    const RowShape rs =
        row_shape(codegen::row_mapping(ri->rows, ri->cols), ri->rows, ri->passes + 1, ri->passes, d);
    threads = rs.threads;
    barrier_time = rs.barrier_time;
    reread = ri->passes * bytes_of(n.input(0));  // later passes and the write pass read the input again
    elements = std::max(elements, num_elements(ri->in)) * (ri->passes + 1);
    trips = rs.trips;
  } else if (auto ss = codegen::segment_shape(n); ss.is_ok()) {
    // Segment kernels the row mapping does not describe (column reductions, integer ones,
    // reductions of inner and outer axes): tiled ones as a stitched column kernel; otherwise each
    // loop over a segment is split over its lanes, 4 loads in flight per thread, then a combine
    // when there are several lanes.
    if (ss->tiled) {
      const RowShape rs =
          row_shape(codegen::column_mapping(ss->length), ss->count, ss->loops, ss->reductions, d);
      threads = rs.threads;
      trips = rs.trips;
      barrier_time = rs.barrier_time;
    } else {
      const int64_t iters = (ss->length + ss->lanes - 1) / ss->lanes;
      threads = ss->threads;
      trips = ss->loops * (static_cast<double>((iters + 3) / 4) + (ss->lanes > 1 ? 1 : 0));
    }
    reread = (ss->loops - 1) * bytes_of(n.input(0));
    elements = std::max(elements, ss->count * ss->length) * ss->loops;
  }
  c.bytes = bytes;
  c.reread = reread;
  c.flops = static_cast<double>(elements) * codegen::op_instructions(n);
  c.time = kernel_time(bytes, reread, c.flops, threads, trips, barrier_time, d);
  c.launches = c.kernels = 1;
  return c;
}

Cost stitched_cost(const std::vector<const Node*>& nodes, const codegen::StitchInfo& info, const DeviceSpec& d) {
  std::set<const Value*> made, read;
  for (const Node* n : nodes) made.insert(n->output(0));
  // An input the group reads only through Slices and Gathers is read only where they look (a merged
  // GEMM's columns, a rotary half, an embedding table's rows): the elements they keep, at most the
  // whole input. Views and Transposes in between keep every element, so what is read of their
  // input is what the group reads of their result (one head of a Reshape of a merged GEMM's
  // columns); a Slice of a Slice keeps what the outer one keeps. A value the group stores is read
  // whole.
  // The group's reads as (value, node, input) in node order, grouped by value: a walk over every
  // node for every input was a fifth of the planning of an xLSTM export, whose element kernels
  // hold hundreds of nodes. One sorted vector, as the cost runs for every candidate group.
  const std::set<const Value*> stored(info.stored.begin(), info.stored.end());
  struct Read {
    const Value* v;
    const Node* n;
    size_t i;
  };
  std::vector<Read> reads;
  for (const Node* n : nodes)
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (n->inputs[i]) reads.push_back({n->inputs[i], n, i});
  const auto by_value = [](const Read& a, const Read& b) { return std::less<const Value*>()(a.v, b.v); };
  std::stable_sort(reads.begin(), reads.end(), by_value);
  std::function<int64_t(const Value*)> read_bytes = [&](const Value* v) {
    if (stored.count(v)) return bytes_of(v);
    int64_t part = 0;
    const auto [lo, hi] = std::equal_range(reads.begin(), reads.end(), Read{v, nullptr, 0}, by_value);
    for (auto it = lo; it != hi; ++it) {
      const Node* n = it->n;
      const size_t i = it->i;
      const Value* out = n->output(0);
      const bool keeps_all =
          i == 0 && out && num_elements(*out->dims) == num_elements(*v->dims) && out->dtype == v->dtype &&
          (codegen::stitch_role(*n) == codegen::StitchRole::kView || n->op_type == "Transpose");
      if (keeps_all)
        part += read_bytes(out);
      else if (reads_part(*n, i) && out)
        part += std::min(bytes_of(out), read_bytes(out));
      else
        return bytes_of(v);
    }
    return std::min(part, bytes_of(v));
  };
  // Row kernels with wide values: inputs no larger than the rows (narrow) are read by the row's
  // passes, so again by every replica; wider ones by the wide loops only, once.
  int64_t bytes = 0, in_bytes = 0, narrow_bytes = 0;
  double flops = static_cast<double>(info.recompute_elements);
  for (const Node* n : nodes) {
    // An in-place TensorScatter (StitchInfo::scattered) computes nothing and reads its write
    // indices, not the cache.
    const bool scatter = n->op_type == "TensorScatter" && info.scattered.count(n->input(1));
    for (size_t i = scatter ? 1 : 0; i < n->inputs.size(); ++i) {
      const Value* v = n->inputs[i];
      if (v && !made.count(v) && read.insert(v).second) {
        const int64_t r = read_bytes(v);
        in_bytes += r;
        if (num_elements(*v->dims) <= num_elements(info.domain)) narrow_bytes += r;
      }
    }
    if (codegen::stitch_role(*n) != codegen::StitchRole::kView && !scatter)
      flops += static_cast<double>(num_elements(*n->output(0)->dims)) * codegen::op_instructions(*n);
  }
  bytes = in_bytes;
  for (const Value* v : info.stored) bytes += bytes_of(v);
  int64_t threads = 0, reread = 0;
  double trips = 0, barrier_time = 0, loop_steps = 0;
  if (info.row) {
    const codegen::RowMapping m = codegen::row_mapping(info);
    bool full_store = false;  // a store pass over the rows (analyze_stitch counts it in passes)
    for (const Value* v : info.stored) full_store |= info.full_row(v);
    const RowShape rs = row_shape(m, info.rows, info.passes, info.passes - (full_store ? 1 : 0), d,
                                  static_cast<int>(info.shared_pass.size()));
    threads = rs.threads;
    barrier_time = rs.barrier_time;
    // Later passes read the row inputs again: from shared memory when they fit the cache budget,
    // else from L2. Every pass recomputes the per-element chain in front of the row ops.
    const bool cached = codegen::row_cache_bytes(m, info.cols, 4) > 0;
    const int64_t row_bytes = info.wide_widths.empty() ? in_bytes : narrow_bytes;
    if (!cached) reread = (info.passes - 1) * row_bytes;
    // Replicas after the first read their rows again from L2 (in every pass when uncached).
    reread += (m.replicas - 1) * row_bytes * (cached ? 1 : info.passes);
    flops *= info.passes + static_cast<int>(info.wide_widths.size());
    trips = rs.trips;
    // Each wide store loop: the thread's elements of its replica's share, 4 loads in flight, no tree.
    for (int64_t width : info.wide_widths) {
      const int64_t iters = (codegen::wide_chunk(m, width) + m.lanes() - 1) / m.lanes();
      trips += static_cast<double>((iters + 3) / 4);
    }
    // Outer reductions: every row runs their passes over its outer row (a loop of its own and a
    // tree each), reading it again after the first row that does (from the caches, charged at L2)
    // and evaluating the element-wise chain in front of them for each.
    for (const codegen::StitchInfo::Outer& o : info.outer) {
      const int64_t lanes = m.lanes() * o.group;  // a warp per row, or a group of warps together
      const int64_t iters = (o.cols + lanes - 1) / lanes;
      trips += o.passes * (static_cast<double>((iters + 3) / 4) + 1);
      const int64_t again = std::max<int64_t>(info.rows * m.replicas / o.group - o.rows, 0);
      reread += again * o.cols * dtype_size(o.node->input(0)->dtype) * o.passes;
      flops += static_cast<double>(again) * static_cast<double>(o.cols) * o.passes;
      const int64_t blocks = (info.rows + m.rows_per_block - 1) / m.rows_per_block * m.replicas;
      if (!m.warp_per_row || o.group > 1)  // a tree (or the group's partials) through shared memory
        barrier_time += 2.0 * o.passes * ((blocks + d.sms - 1) / d.sms) * d.barrier;
    }
    // A fine-grained GEMM's loops run in the first pass only when the row is cached, else in
    // every pass.
    const int evals = cached ? 1 : info.passes;
    flops += (2 * info.contraction_macs + info.contraction_ops) * evals;
    reread += info.contraction_reads * evals;
    loop_steps = info.contraction_macs * evals / static_cast<double>(std::max<int64_t>(threads, 1));
  } else if (info.tile) {
    return tiled_cost(*info.tile, bytes, flops + 2 * info.contraction_macs + info.contraction_ops,
                      info.contraction_reads, info.contraction_macs, d);
  } else {
    threads = std::min<int64_t>(num_elements(info.domain), codegen::kMaxMapBlocks * codegen::kMapBlock);
    trips = element_trips(num_elements(info.domain));
    flops += 2 * info.contraction_macs + info.contraction_ops;
    reread += info.contraction_reads;
    loop_steps = info.contraction_macs / static_cast<double>(std::max<int64_t>(threads, 1));
  }
  Cost c;
  c.bytes = bytes;
  c.reread = reread;
  c.flops = flops;
  c.time =
      kernel_time(bytes, reread, flops, std::max<int64_t>(threads, 1), trips, barrier_time, d, loop_steps);
  c.launches = c.kernels = 1;
  return c;
}

StatusOr<DeviceSpec> calibrate(DeviceSpec base, const std::vector<Measurement>& m) {
  // Least squares for t = launches * L + bytes * a, with a = 1 / (dram_bw * bw_eff).
  double s_ll = 0, s_lb = 0, s_bb = 0, s_lt = 0, s_bt = 0;
  for (const Measurement& x : m) {
    if (x.seconds <= 0 || x.launches < 1 || x.bytes < 0)
      return Status::user("calibration: every measurement needs seconds > 0, launches >= 1 and bytes >= 0");
    const double l = x.launches, b = static_cast<double>(x.bytes), t = x.seconds;
    s_ll += l * l;
    s_lb += l * b;
    s_bb += b * b;
    s_lt += l * t;
    s_bt += b * t;
  }
  const double det = s_ll * s_bb - s_lb * s_lb;
  if (m.size() < 2 || det <= 1e-30 * s_ll * s_bb)
    return Status::user("calibration: need at least two measurements with different bytes per launch");
  const double launch = (s_lt * s_bb - s_bt * s_lb) / det;
  const double a = (s_ll * s_bt - s_lb * s_lt) / det;
  if (launch <= 0 || a <= 0)
    return Status::user(fmt::format("calibration: the fit gives launch {:.3g} s and {:.3g} s/B; both must be positive "
                                    "(measure kernels of more different sizes)", launch, a));
  base.launch = launch;
  base.bw_eff = std::min(1.0, 1.0 / (a * base.dram_bw));
  base.sources += fmt::format("; launch and bw_eff fitted from {} measurements", m.size());
  return base;
}

StatusOr<DeviceSpec> calibrate_tiled(DeviceSpec base, const std::vector<TiledMeasurement>& m) {
  if (m.empty()) return base;
  std::vector<double> eff;
  for (const TiledMeasurement& x : m) {
    if (x.seconds <= 0 || x.flops <= 0 || x.bytes < 0)
      return Status::user(
          "calibration: every tiled GEMM measurement needs seconds > 0, flops > 0 and bytes >= 0");
    const double math = x.seconds - base.launch - static_cast<double>(x.bytes) / (base.dram_bw * base.bw_eff);
    if (math <= 0)
      return Status::user(
          fmt::format("calibration: a tiled GEMM of {:.3g} flops took {:.3g} s, no more than its launch "
                      "and memory time: measure a larger one",
                      x.flops, x.seconds));
    eff.push_back(std::min(1.0, x.flops / base.fp32 / math));
  }
  std::sort(eff.begin(), eff.end());
  base.tiled_gemm_eff = eff[eff.size() / 2];
  base.sources += fmt::format("; tiled_gemm_eff fitted from {} tiled GEMM measurements", m.size());
  return base;
}

}  // namespace stitch::fusion
