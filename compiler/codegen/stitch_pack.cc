// Independent (horizontal) stitching: groups with no path between them in one launch. Each part
// is a stitched kernel generated as a static __device__ function over its own range of blocks;
// the entry dispatches on blockIdx.x.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/cuda_writer.h"
#include "codegen/lower.h"
#include "codegen/stitch.h"
#include "support/check.h"

namespace stitch::codegen {

namespace {

// One part of a packed kernel named `name`: a KV cache's update written into the cache's storage
// (lower_tensor_scatter), or a stitched kernel whose row caches stay out when they would not fit
// next to the `smem` bytes the parts before it take (they share one block's budget).
StatusOr<Kernel> lower_part(const StitchPart& part, int index, const std::string& name, int64_t smem) {
  if (part.scatter_in_place) {
    const Node& n = *part.nodes.front();
    return lower_tensor_scatter(n, index, index_width({&n}, kIndex32Limit), true, name);
  }
  ASSIGN_OR_RETURN(StitchInfo info, analyze_stitch(part.nodes, part.stored));
  ASSIGN_OR_RETURN(Kernel k, lower_stitched_part(part.nodes, info, index, true, name));
  if (smem + k.static_smem_bytes > kRowCacheBudget + 1024)
    return lower_stitched_part(part.nodes, info, index, false, name);
  return k;
}

// The packed kernel's name for parameter p of part i: the fault word is one parameter of them all.
std::string part_arg(size_t i, const KernelParam& p) {
  return p.value == fault_word() ? p.name : fmt::format("p{}_{}", i, p.name);
}

}  // namespace

StatusOr<Kernel> lower_packed(const std::vector<StitchPart>& parts, int index) {
  STITCH_CHECK(parts.size() >= 2, "a packed kernel needs two parts");
  std::vector<Kernel> ks;
  int64_t smem = 0;
  Kernel out;
  out.name =
      fmt::format("k{:03d}_pack{}_{}", index, parts.size(), snake(parts.front().nodes.front()->op_type));
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string name =
        fmt::format("{}_part{}", out.name, i);  // the kernel's name first: renaming it renames these
    ASSIGN_OR_RETURN(Kernel k, lower_part(parts[i], index, name, smem));
    smem += k.static_smem_bytes;
    if (!ks.empty() && k.block != ks.front().block)
      return Status::internal(fmt::format("packed kernel {}: parts with different block sizes", index));
    ks.push_back(std::move(k));
  }
  out.block = ks.front().block;
  // A part that asks for fewer resident blocks (a tiled GEMM's accumulators) keeps its room.
  for (const Kernel& k : ks)
    if (k.min_blocks_per_sm > 0 &&
        (out.min_blocks_per_sm == 0 || k.min_blocks_per_sm < out.min_blocks_per_sm))
      out.min_blocks_per_sm = k.min_blocks_per_sm;
  out.scheme = "independent";
  out.static_smem_bytes = smem;
  int64_t blocks = 0;
  std::string mapping =
      fmt::format("independent (horizontal) packing of {} kernels in one launch", ks.size());
  for (size_t i = 0; i < ks.size(); ++i) {
    for (const Node* n : ks[i].nodes) out.nodes.push_back(n);
    for (const KernelParam& p : ks[i].params)  // one fault word for every part
      if (p.value != fault_word() || std::none_of(out.params.begin(), out.params.end(),
                                                  [&](const KernelParam& q) { return q.value == p.value; }))
        out.params.push_back({part_arg(i, p), p.value, p.output});
    for (const KernelFault& f : ks[i].faults)
      if (std::none_of(out.faults.begin(), out.faults.end(),
                       [&](const KernelFault& g) { return g.code == f.code; }))
        out.faults.push_back(f);
    mapping += fmt::format("; blocks [{}, {}): {}", blocks, blocks + ks[i].grid[0], ks[i].mapping);
    blocks += ks[i].grid[0];
    out.bytes_moved += ks[i].bytes_moved;
    out.evaluations += ks[i].evaluations;
    out.lane_exchanges += ks[i].lane_exchanges;
    out.node_evaluations.insert(ks[i].node_evaluations.begin(), ks[i].node_evaluations.end());
  }
  out.grid = {blocks, 1, 1};
  out.mapping = mapping;
  CudaWriter w;
  w.raw_line(kernel_header(
      out, "//   scheme: independent (horizontal packing); each part owns a range of blocks\n"));
  for (const Kernel& k : ks) w.raw_line(k.source);
  open_kernel(w, out, out.block[0]);
  w.line("const long long b = blockIdx.x;");
  int64_t first = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    std::string args;
    for (const KernelParam& p : ks[i].params) args += part_arg(i, p) + ", ";
    // Block counts fit an int (gridDim.x); b is the part's long long bid.
    const std::string call = fmt::format("{}({}b - {}, {});", ks[i].name, args, first, ks[i].grid[0]);
    if (i + 1 < ks.size())
      w.line("if (b < {}) {{ {} return; }}", first + ks[i].grid[0], call);
    else
      w.line("{}", call);
    first += ks[i].grid[0];
  }
  w.close();
  out.source = w.text();
  return out;
}

}  // namespace stitch::codegen
