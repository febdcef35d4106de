// What the node-test programs (stitch_node_tests, stitch_mutation_tests) share: the test
// directories under a root, their tensor files, and the --shard argument.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "importer/tensor_io.h"

namespace stitch::node_tests {

// The test directories under `root` (those holding a model.onnx), sorted by name.
inline std::vector<std::filesystem::path> test_dirs(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> dirs;
  for (const auto& e : std::filesystem::directory_iterator(root))
    if (e.is_directory() && std::filesystem::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// PREFIX_0.pb, PREFIX_1.pb... of one test data set, in order.
inline StatusOr<std::vector<Tensor>> read_set(const std::filesystem::path& dir, const char* prefix) {
  std::vector<Tensor> out;
  for (int i = 0;; ++i) {
    const std::filesystem::path p = dir / fmt::format("{}_{}.pb", prefix, i);
    if (!std::filesystem::exists(p)) break;
    ASSIGN_OR_RETURN(NamedTensor t, read_tensor_file(p.string()));
    out.push_back(std::move(t.tensor));
  }
  return out;
}

// "--shard K/N": run every N-th test starting at the K-th. False when the text is not that.
inline bool parse_shard(const char* text, int* k, int* n) {
  return std::sscanf(text, "%d/%d", k, n) == 2 && *n >= 1 && *k >= 0 && *k < *n;
}

}  // namespace stitch::node_tests
