// Run-time checks of input data on the emu backend (codegen/kernel.h's KernelFault): a graph
// compiled into an artifact of its own, a run whose error the reference interpreter must share,
// and the nodes a schedule's kernels check.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fusion_test_util.h"

namespace stitch::test {

// `g` (through the front end) compiled for emu with `groups` (every node alone without) and
// `packs`, into a directory of its own; `schedule` receives the schedule.
inline std::filesystem::path compile_for_faults(const Graph& g, const std::string& tag,
                                                const codegen::NodeGroups* groups = nullptr,
                                                const std::vector<int>* packs = nullptr,
                                                codegen::Schedule* schedule = nullptr) {
  auto s = codegen::build_schedule(g, groups, packs);
  INFO(s.status().message());
  REQUIRE(s.is_ok());
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("stitch_unit_faults_{}_{}", tag, getpid());
  write_emu_artifact(g, *s, dir);
  if (schedule) *schedule = std::move(*s);
  return dir;
}

// Feeds `feed` and runs: "" when the run succeeds and every output equals the reference
// interpreter's (within `tol`; exactly by default, as gathers and scatters copy), else the run's error
// message, which must be a user error (code 2) that the reference interpreter shares (it refuses the same
// inputs).
inline std::string run_error(rt::Session& session, const Graph& g, const TensorMap& feed,
                             const Tolerance& tol = kExact) {
  for (const auto& [name, t] : feed)
    session.set_input(name, std::string(dtype_name(t.dtype())), t.dims(), t.data(), t.byte_size());
  auto want = run_reference(g, feed);
  try {
    session.run();
  } catch (const rt::Error& e) {
    CHECK(e.code() == 2);
    CHECK_FALSE(want.is_ok());
    if (!want.is_ok()) CHECK(want.status().code() == Code::kUser);
    std::vector<uint8_t> out(1);
    CHECK_THROWS_WITH(session.get_output(g.outputs[0]->name, out.data(), out.size()),
                      Catch::Contains("the last run() failed"));
    return e.what();
  }
  INFO(want.status().message());
  REQUIRE(want.is_ok());
  for (const Value* v : g.outputs) {
    Tensor got(v->dtype, *v->dims);
    session.get_output(v->name, got.data(), static_cast<size_t>(got.byte_size()));
    CHECK(compare_tensors(got, want->at(v->name), tol.rtol, tol.atol).ok);
  }
  return "";
}

// The kernels of `s` that take the fault word, and the nodes of their checks.
inline std::vector<std::string> checked_nodes(const codegen::Schedule& s) {
  std::vector<std::string> out;
  for (const codegen::Kernel& k : s.kernels) {
    int words = 0;
    for (const codegen::KernelParam& p : k.params) words += p.value == codegen::fault_word();
    CHECK(words == (k.faults.empty() ? 0 : 1));
    for (const codegen::KernelFault& f : k.faults) out.push_back(f.node);
  }
  return out;
}

}  // namespace stitch::test
