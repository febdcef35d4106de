// Thread mappings of row kernels (stitch.h): warp or block per row, a row split over blocks,
// tiled columns, replicas of a row for wide stores, and the shared memory a row cache takes.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/lower.h"
#include "codegen/stitch.h"

namespace stitch::codegen {

RowMapping row_mapping(int64_t rows, int64_t cols, bool allow_split) {
  if (cols < 1024) return {true, 256, 8, 1, cols};
  RowMapping m{false, cols >= 4096 ? 512 : 256, 1, 1, cols};
  if (!allow_split || rows >= kSplitMaxRows || cols < 2 * kSplitMinSegment) return m;
  const int64_t segments = std::min(kCooperativeBlocks / std::max<int64_t>(rows, 1), cols / kSplitMinSegment);
  if (segments < 2) return m;
  m.block = kSplitBlock;
  m.segments = segments;
  m.segment = (cols + segments - 1) / segments;
  return m;
}

RowMapping column_mapping(int64_t cols) {
  RowMapping m{false, kTileBlock, kTileSegments, 1, cols};
  m.column = true;
  return m;
}

RowMapping row_mapping(const StitchInfo& info, bool allow_split) {
  if (info.column) return column_mapping(info.cols);
  if (!info.wide_widths.empty()) {
    RowMapping m = row_mapping(info.rows, info.cols, false);
    const int64_t blocks = (info.rows + m.rows_per_block - 1) / m.rows_per_block;
    const int64_t per_thread = (info.wide_widths.back() + m.lanes() - 1) / m.lanes();
    m.replicas = std::max<int64_t>(
        1, std::min((per_thread + kWideLoadsPerThread - 1) / kWideLoadsPerThread, kWideMaxBlocks / blocks));
    return m;
  }
  return row_mapping(info.rows, info.cols, allow_split && !info.mixed_partials);
}

int64_t wide_chunk(const RowMapping& m, int64_t width) {
  const int64_t share = (width + m.replicas - 1) / m.replicas;
  return (share + m.lanes() - 1) / m.lanes() * m.lanes();
}

std::string row_mapping_text(const RowMapping& m) {
  if (m.column)
    return fmt::format("tiled columns, {} per block of {} threads, {} threads down each", m.rows_per_block,
                       m.block, m.lanes());
  const std::string replicas =
      m.replicas > 1
          ? fmt::format(", {} blocks per {} (each recomputes the statistics and stores its share)",
                        m.replicas, m.warp_per_row ? fmt::format("{} rows", m.rows_per_block) : "row")
          : "";
  if (m.warp_per_row) return fmt::format("warp per row, {} rows per block{}", m.rows_per_block, replicas);
  if (!m.split()) return "block per row" + replicas;
  return fmt::format("row split over {} blocks of {} threads ({} elements each)", m.segments, m.block,
                     m.segment);
}

int64_t a_row_cache_bytes(const RowMapping& m, int64_t len, DType t) {
  return (m.warp_per_row ? m.rows_per_block : 1) * len * compute_bytes(compute_type(t));
}

int64_t row_cache_bytes(const RowMapping& m, int64_t cols, int64_t elem_bytes) {
  if (m.column) return 0;  // each thread holds a strided eighth of its column: recomputed instead
  const int64_t bytes = (m.split() ? m.segment : cols) * m.rows_per_block * elem_bytes;
  return bytes <= kRowCacheBudget ? bytes : 0;
}

}  // namespace stitch::codegen
