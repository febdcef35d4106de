// Memory planner: hand-made lifetimes, seeded random ones (no live overlap, bounds hold), and
// the unfused schedules of every model in models/.
#include <filesystem>
#include <random>

#include "codegen/memory_plan.h"
#include "importer/onnx_importer.h"
#include "importer/tensor_io.h"
#include "test_util.h"

using namespace stitch;

namespace {

BufferRequest req(const char* name, int64_t bytes, int first, int last, int reuse_of = -1) {
  return BufferRequest{name, bytes, first, last, reuse_of};
}

void require_valid(const std::vector<BufferRequest>& r, const MemoryPlan& p) {
  const Status st = verify_memory_plan(r, p);
  INFO(st.message());
  REQUIRE(st.is_ok());
  CHECK(p.arena_bytes >= p.peak_live_bytes);
  CHECK(p.arena_bytes <= p.total_bytes);
}

}  // namespace

TEST_CASE("buffers with disjoint lifetimes share memory, overlapping ones do not", "[memory_plan]") {
  const std::vector<BufferRequest> r = {req("a", 1000, 0, 1), req("b", 1000, 2, 3), req("c", 300, 1, 2)};
  const MemoryPlan p = plan_memory(r);
  require_valid(r, p);
  CHECK(p.offsets[0] == p.offsets[1]);  // a and b never live together
  CHECK(p.offsets[2] == 1024);          // c is live with both: after them, aligned
  CHECK(p.arena_bytes == 1024 + 512);
  CHECK(p.total_bytes == 1024 + 1024 + 512);
}

TEST_CASE("in-place chains share one storage, illegal reuse is refused", "[memory_plan]") {
  // x -> relu (in place) -> add (in place); y read later than the step that would reuse it.
  const std::vector<BufferRequest> r = {req("x", 4096, 0, 1),      req("relu", 4096, 1, 2, 0),
                                        req("add", 4096, 2, 4, 1), req("y", 4096, 0, 3),
                                        req("bad", 4096, 2, 3, 3), req("big", 8192, 4, 5, 2)};
  const MemoryPlan p = plan_memory(r);
  require_valid(r, p);
  CHECK(p.storage[0] == p.storage[1]);
  CHECK(p.storage[1] == p.storage[2]);
  CHECK(p.offsets[0] == p.offsets[2]);
  CHECK(p.storage[4] != p.storage[3]);  // y is still read at step 3
  CHECK(p.storage[5] != p.storage[2]);  // a larger writer cannot take a smaller storage
  CHECK(p.in_place == 2);
}

TEST_CASE("the verifier catches overlapping live buffers", "[memory_plan]") {
  const std::vector<BufferRequest> r = {req("a", 512, 0, 2), req("b", 512, 1, 3)};
  MemoryPlan p = plan_memory(r);
  require_valid(r, p);
  p.offsets[1] = p.offsets[0];
  const Status st = verify_memory_plan(r, p);
  REQUIRE_FALSE(st.is_ok());
  CHECK(st.message().find("'a'") != std::string::npos);
  CHECK(st.message().find("'b'") != std::string::npos);
}

TEST_CASE("random lifetimes: never overlapping, within the bounds", "[memory_plan]") {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 60), steps = 1 + static_cast<int>(rng() % 40);
    std::vector<BufferRequest> r;
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % steps);
      const int last = first + static_cast<int>(rng() % 8);
      const int64_t bytes = 1 + static_cast<int64_t>(rng() % 5000);
      int reuse = -1;
      if (i > 0 && rng() % 3 == 0) reuse = static_cast<int>(rng() % i);
      r.push_back(BufferRequest{"b" + std::to_string(i), bytes, first, last, reuse});
    }
    const MemoryPlan p = plan_memory(r);
    INFO("trial " << trial);
    require_valid(r, p);
  }
}

TEST_CASE("unfused schedules of the shipped models plan without overlap", "[memory_plan][models]") {
  const std::filesystem::path models = std::filesystem::path(STITCH_SOURCE_DIR) / "models";
  int planned = 0;
  for (const char* name : {"bert_tiny", "gpt2_tiny", "llama_tiny", "cnn_small", "seg_small"}) {
    INFO(name);
    auto g = import_onnx_file((models / name / "model.onnx").string());
    REQUIRE(g.is_ok());
    PassContext ctx;
    // Bind dynamic inputs from the shipped test data, in input order.
    for (size_t i = 0; i < (*g)->inputs.size(); ++i) {
      auto t = read_tensor_file(
          (models / name / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string());
      REQUIRE(t.is_ok());
      ctx.bindings.by_input[(*g)->inputs[i]->name] = t->tensor.dims();
    }
    test::run_frontend_or_die(**g, ctx);
    const auto requests = graph_buffer_requests(**g);
    REQUIRE(!requests.empty());
    const MemoryPlan p = plan_memory(requests);
    require_valid(requests, p);
    CHECK(p.arena_bytes < p.total_bytes);  // reuse happens on every real model
    ++planned;
  }
  CHECK(planned == 5);
}
