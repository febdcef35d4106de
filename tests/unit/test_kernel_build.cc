// The kernels through nvcc ahead of the artifact (codegen::build_kernels): write_artifact takes
// that build's fatbin and ptxas report in place of a second nvcc run, refuses a build of other
// kernel sources, and the build's scratch directory goes with it. Also the emulation library's build
// (codegen/emu_build.h): its cache, and one library that serves several artifacts.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "backend_test_util.h"
#include "codegen/artifact.h"
#include "codegen/build_tools.h"
#include "stitch/artifact_format.h"

using namespace stitch;
using namespace stitch::codegen;
namespace fs = std::filesystem;

namespace {

// The entries of `dir` whose names start with `prefix`.
std::vector<std::string> entries_named(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A Sigmoid and a LogSoftmax at [5, 33] through the front end, scheduled with each node a kernel
// of its own (`apart`) and with both in one (`fused`).
struct TwoSchedules {
  std::unique_ptr<Graph> g;
  std::optional<Schedule> apart, fused;
};
TwoSchedules sigmoid_log_softmax() {
  TwoSchedules t;
  t.g = test::parse_or_die(R"(graph "g" opset 17 {
  input %x: f32[5,33]
  %s = Sigmoid(%x) @"sigmoid"
  %y = LogSoftmax(%s) @"log_softmax"
  output %y
}
)");
  test::run_frontend_or_die(*t.g);
  auto apart = build_schedule(*t.g);
  REQUIRE(apart.is_ok());
  const NodeGroups one = {{t.g->nodes()[0].get(), t.g->nodes()[1].get()}};
  auto fused = build_schedule(*t.g, &one);
  REQUIRE(fused.is_ok());
  REQUIRE(apart->kernels.size() == 2);
  REQUIRE(fused->kernels.size() == 1);
  t.apart = std::move(*apart);
  t.fused = std::move(*fused);
  return t;
}

}  // namespace

TEST_CASE("an artifact takes the fatbin nvcc built ahead of it for the same kernels only",
          "[codegen][emu][nvcc]") {
  auto [g, apart, fused] = sigmoid_log_softmax();
  const fs::path scratch =
      fs::temp_directory_path() / ("stitch_unit_kernel_build_" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const fs::path dir = scratch / "artifact";
  CompileOptions o;
  o.archs = {"sm_90"};
  o.model_path = "/dev/null";

  std::string scratch_dir;
  {
    auto built = build_kernels(*g, *apart, o, dir.string());
    INFO(built.status().message());
    REQUIRE(built.is_ok());
    // nvcc ran beside the artifact's directory, which is not made yet.
    CHECK(entries_named(scratch, "artifact") ==
          std::vector<std::string>{fs::path(built->dir).filename().string()});
    CHECK(fs::exists(fs::path(built->dir) / artifact::kFatbinFile));
    REQUIRE(built->resources.size() == 2);
    for (const KernelResources& r : built->resources) {
      CHECK(r.arch == "sm_90");
      CHECK(r.registers > 0);
    }
    CHECK(built->log.find("registers") != std::string::npos);
    CHECK(built->sources.size() == 3);  // the two kernels and the file that includes both
    CHECK(built->seconds > 0);

    // A schedule of other kernels is refused, and leaves nothing behind.
    ArtifactSummary summary;
    const Status other = write_artifact(*g, *fused, o, dir.string(), &summary, &*built);
    CHECK(other.code() == Code::kInternal);
    CHECK(other.message().find("not this schedule's") != std::string::npos);
    CHECK(entries_named(scratch, "artifact").size() == 1);

    // The same schedule's artifact holds that build's fatbin, log and report, and runs on emu.
    summary = {};
    const Status st = write_artifact(*g, *apart, o, dir.string(), &summary, &*built);
    INFO(st.message());
    REQUIRE(st.is_ok());
    CHECK(test::read_text_file(dir / artifact::kFatbinFile) ==
          test::read_text_file(fs::path(built->dir) / artifact::kFatbinFile));
    CHECK(test::read_text_file(dir / "kernels" / "nvcc.log") == built->log);
    CHECK(summary.nvcc_seconds == built->seconds);
    REQUIRE(summary.resources.size() == built->resources.size());
    for (size_t i = 0; i < summary.resources.size(); ++i) {
      CHECK(summary.resources[i].kernel == built->resources[i].kernel);
      CHECK(summary.resources[i].registers == built->resources[i].registers);
    }
    CHECK(test::read_text_file(dir / artifact::kManifestFile).find(artifact::kFatbinFile) !=
          std::string::npos);
    const TensorMap feed = {{"x", test::random_tensor(DType::kF32, {5, 33}, 11)}};
    auto want = run_reference(*g, feed);
    REQUIRE(want.is_ok());
    const TensorMap got = test::run_artifact_on_emu(*g, dir, feed);
    CHECK(compare_tensors(got.at("y"), want->at("y"), kEmuF32.rtol, kEmuF32.atol).ok);

    // A moved build keeps its directory; the one moved from owns none.
    KernelBuild moved = std::move(*built);
    CHECK(built->dir.empty());
    scratch_dir = moved.dir;
    CHECK(fs::exists(scratch_dir));
  }
  // The build's scratch directory went with it; the artifact stays.
  CHECK_FALSE(fs::exists(scratch_dir));
  CHECK(entries_named(scratch, "artifact") == std::vector<std::string>{"artifact"});

  // An output that is not an artifact directory is refused before nvcc runs.
  const fs::path taken = scratch / "taken";
  fs::create_directories(taken);
  { std::ofstream(taken / "notes.txt") << "mine\n"; }
  auto refused = build_kernels(*g, *apart, o, taken.string());
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == Code::kUser);
  CHECK(refused.status().message().find("is not a stitch artifact directory") != std::string::npos);
  CHECK(entries_named(scratch, "taken") == std::vector<std::string>{"taken"});
  fs::remove_all(scratch);
}

TEST_CASE("nvcc's build is taken from the build cache for the same kernels and arguments only",
          "[codegen][nvcc]") {
  auto [g, apart, fused] = sigmoid_log_softmax();
  const fs::path scratch = fs::temp_directory_path() / ("stitch_unit_nvcc_cache_" + std::to_string(getpid()));
  fs::remove_all(scratch);
  CompileOptions o;
  o.archs = {"sm_90"};
  o.build_emu = false;
  o.model_path = "/dev/null";
  o.nvcc_cache_dir = (scratch / "cache").string();
  // Builds `s` ahead and writes its artifact into `name`: whether nvcc's run came from the cache.
  auto build = [&](const Schedule& s, const std::string& name) {
    auto built = build_kernels(*g, s, o, (scratch / name).string());
    INFO(built.status().message());
    REQUIRE(built.is_ok());
    REQUIRE(built->resources.size() == s.kernels.size() * o.archs.size());
    ArtifactSummary summary;
    const Status st = write_artifact(*g, s, o, (scratch / name).string(), &summary, &*built);
    INFO(st.message());
    REQUIRE(st.is_ok());
    CHECK(summary.nvcc_from_cache == built->from_cache);
    CHECK(test::read_text_file(scratch / name / "report.json")
              .find(fmt::format("\"nvcc_from_cache\": {}", built->from_cache)) != std::string::npos);
    return built->from_cache;
  };
  CHECK_FALSE(build(*apart, "a1"));  // built, and added: a fatbin and a log
  CHECK(entries_named(scratch / "cache", "").size() == 2);
  CHECK(build(*apart, "a2"));  // the same kernels: copied
  CHECK(test::read_text_file(scratch / "a1" / artifact::kFatbinFile) ==
        test::read_text_file(scratch / "a2" / artifact::kFatbinFile));
  CHECK(test::read_text_file(scratch / "a1" / "kernels" / "nvcc.log") ==
        test::read_text_file(scratch / "a2" / "kernels" / "nvcc.log"));
  CHECK_FALSE(build(*fused, "f1"));  // other kernels: built
  CHECK(build(*fused, "f2"));
  Schedule edited = *fused;  // a kernel's text edited, its name kept: built again
  edited.kernels.front().source += "\n// edited\n";
  CHECK_FALSE(build(edited, "e1"));
  o.archs = {"sm_80"};  // another target: built again
  CHECK_FALSE(build(*fused, "f3"));
  CHECK(entries_named(scratch / "cache", "").size() == 8);
  fs::remove_all(scratch);
}

TEST_CASE("an emulation library is taken from the cache for the same kernel sources only", "[codegen][emu]") {
  auto [g, apart, fused] = sigmoid_log_softmax();
  const fs::path scratch =
      fs::temp_directory_path() / ("stitch_unit_emu_cache_test_" + std::to_string(getpid()));
  fs::remove_all(scratch);
  CompileOptions o;
  o.run_nvcc = false;
  o.model_path = "/dev/null";
  o.emu_cache_dir = (scratch / "cache").string();
  const TensorMap feed{{"x", test::random_tensor(DType::kF32, {5, 33}, 3)}};
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  // Writes `s` into `name` and runs it on emu against the reference; whether its library came
  // from the cache.
  auto write_and_run = [&](const Schedule& s, const std::string& name) {
    ArtifactSummary summary;
    Status st = write_artifact(*g, s, o, (scratch / name).string(), &summary);
    INFO(st.message());
    REQUIRE(st.is_ok());
    const TensorMap got = test::run_artifact_on_emu(*g, scratch / name, feed);
    CHECK(compare_tensors(got.at("y"), want->at("y"), kEmuF32.rtol, kEmuF32.atol).ok);
    CHECK_FALSE(fs::exists(scratch / name / "emu" / "include"));
    return summary.emu_from_cache;
  };
  CHECK_FALSE(write_and_run(*apart, "a1"));  // built, and added to the cache
  CHECK(entries_named(scratch / "cache", "").size() == 1);
  CHECK(write_and_run(*apart, "a2"));        // the same kernels: copied
  CHECK_FALSE(write_and_run(*fused, "f1"));  // other kernels: built
  CHECK(entries_named(scratch / "cache", "").size() == 2);
  CHECK(write_and_run(*fused, "f2"));
  // The copied library is the one built, byte for byte (and each artifact's manifest, which the
  // runtime checked before running it, records its own copy).
  auto bytes = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  CHECK(bytes(scratch / "a1" / artifact::kEmuLibrary) == bytes(scratch / "a2" / artifact::kEmuLibrary));
  // A kernel's text edited, its name kept: built again, not the library of the text before.
  Schedule edited = *fused;
  edited.kernels.front().source += "\n// edited\n";
  CHECK_FALSE(write_and_run(edited, "e1"));
  CHECK(entries_named(scratch / "cache", "").size() == 3);
  fs::remove_all(scratch);
}

TEST_CASE("one emulation library serves several artifacts whose kernels are named apart", "[codegen][emu]") {
  auto [g, apart, fused] = sigmoid_log_softmax();
  const fs::path scratch = fs::temp_directory_path() / ("stitch_unit_emu_shared_" + std::to_string(getpid()));
  fs::remove_all(scratch);
  fs::create_directories(scratch / "lib");
  // The fused schedule's kernel takes a prefix, in its name and its source, as the node tests'
  // batches rename theirs; the two schedules' kernels then differ in name.
  prefix_kernel_names(fused->kernels, "f_");
  std::vector<const Kernel*> kernels;
  std::string code;
  for (const Schedule* s : {&*apart, &*fused})
    for (const Kernel& k : s->kernels) {
      kernels.push_back(&k);
      code += k.source + "\n";
    }
  REQUIRE(kernels.size() == 3);
  const std::string unit = emu_translation_unit(code, kernels);
  { std::ofstream(scratch / "lib" / "unit.cc") << unit; }
  const fs::path library = scratch / "lib" / "kernels.so";
  auto built = build_emu_library(scratch / "lib" / "unit.cc", unit, kernels, library, {});
  INFO(built.status().message());
  REQUIRE(built.is_ok());
  CHECK_FALSE(built->from_cache);
  CHECK_FALSE(fs::exists(scratch / "lib" / "include"));  // the headers went with the build

  const TensorMap feed{{"x", test::random_tensor(DType::kF32, {5, 33}, 7)}};
  auto want = run_reference(*g, feed);
  REQUIRE(want.is_ok());
  CompileOptions o;
  o.run_nvcc = false;
  o.model_path = "/dev/null";
  o.emu_library = library.string();
  for (const auto& [name, s] : {std::pair{"apart", &*apart}, std::pair{"fused", &*fused}}) {
    INFO(name);
    ArtifactSummary summary;
    Status st = write_artifact(*g, *s, o, (scratch / name).string(), &summary);
    INFO(st.message());
    REQUIRE(st.is_ok());
    const TensorMap got = test::run_artifact_on_emu(*g, scratch / name, feed);
    CHECK(compare_tensors(got.at("y"), want->at("y"), kEmuF32.rtol, kEmuF32.atol).ok);
  }

  // A library without the schedule's kernels is refused when the artifact loads, naming the kernel.
  const fs::path lone = scratch / "lib" / "fused_only.so";
  const std::vector<const Kernel*> fused_only = {&fused->kernels.front()};
  const std::string unit2 = emu_translation_unit(fused->kernels.front().source, fused_only);
  { std::ofstream(scratch / "lib" / "unit2.cc") << unit2; }
  REQUIRE(build_emu_library(scratch / "lib" / "unit2.cc", unit2, fused_only, lone, {}).is_ok());
  o.emu_library = lone.string();
  ArtifactSummary summary;
  REQUIRE(write_artifact(*g, *apart, o, (scratch / "wrong").string(), &summary).is_ok());
  try {
    rt::Session session(rt::Model::load((scratch / "wrong").string()), rt::Backend::kEmu);
    FAIL("an emulation library without the artifact's kernels loaded");
  } catch (const rt::Error& e) {
    CHECK(std::string(e.what()).find("has no kernel '" + apart->kernels.front().name + "'") !=
          std::string::npos);
  }

  // A library that does not exist is a user error naming it.
  o.emu_library = (scratch / "lib" / "missing.so").string();
  Status st = write_artifact(*g, *apart, o, (scratch / "none").string(), &summary);
  CHECK(st.code() == Code::kUser);
  CHECK(st.message().find("missing.so") != std::string::npos);
  CHECK_FALSE(fs::exists(scratch / "none"));

  // A host compiler error is an internal error with its output.
  const std::vector<const Kernel*> none;
  const std::string broken = emu_translation_unit("this is not C++;\n", none);
  { std::ofstream(scratch / "lib" / "broken.cc") << broken; }
  auto failed =
      build_emu_library(scratch / "lib" / "broken.cc", broken, none, scratch / "lib" / "broken.so", {});
  REQUIRE_FALSE(failed.is_ok());
  CHECK(failed.status().code() == Code::kInternal);
  CHECK_THAT(failed.status().message(),
             Catch::Contains("building the emulation library with ") && Catch::Contains(" failed (exit "));
  fs::remove_all(scratch);
}

namespace {

// Sets (or, with nullptr, unsets) an environment variable for a scope, then puts it back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("the emulation build finds its host compiler and the CUDA headers where it runs",
          "[codegen][emu]") {
  // An installed stitchc moved to another machine: the compiler and toolkit it was built with may
  // be elsewhere there.
  const fs::path dir = fs::temp_directory_path() / fmt::format("stitch_find_tools_{}", getpid());
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "cuda" / "include");
  const fs::path fake = dir / "bin" / "g++";
  REQUIRE(write_file(fake, "#!/bin/sh\nexit 0\n").is_ok());
  fs::permissions(fake, fs::perms::owner_all);
  REQUIRE(write_file(dir / "cuda" / "include" / "cuda_fp16.h", "").is_ok());
  REQUIRE(write_file(dir / "cuda" / "include" / "cuda_bf16.h", "").is_ok());
  const std::string gone = (dir / "gone" / "c++").string();
  SECTION("the compiler stitchc was built with, while it is there") {
    ScopedEnv unset("STITCH_HOST_CXX", nullptr);
    auto cxx = find_host_cxx(fake.string());
    REQUIRE(cxx.is_ok());
    CHECK(*cxx == fake.string());
  }
  SECTION("else c++ or g++ on PATH") {
    ScopedEnv unset("STITCH_HOST_CXX", nullptr);
    ScopedEnv path("PATH", (dir / "bin").c_str());
    auto cxx = find_host_cxx(gone);
    REQUIRE(cxx.is_ok());
    CHECK(*cxx == fake.string());
  }
  SECTION("neither: a user error that says what to install or set") {
    ScopedEnv unset("STITCH_HOST_CXX", nullptr);
    ScopedEnv path("PATH", (dir / "cuda").c_str());
    auto cxx = find_host_cxx(gone);
    REQUIRE_FALSE(cxx.is_ok());
    CHECK(cxx.status().code() == Code::kUser);
    CHECK_THAT(cxx.status().message(),
               Catch::Contains(gone) && Catch::Contains("install g++, or set STITCH_HOST_CXX"));
  }
  SECTION("STITCH_HOST_CXX, a path or a name on PATH, comes first and has no fallback") {
    ScopedEnv path("PATH", (dir / "bin").c_str());
    {
      ScopedEnv set("STITCH_HOST_CXX", "g++");
      auto cxx = find_host_cxx("/usr/bin/c++");
      REQUIRE(cxx.is_ok());
      CHECK(*cxx == fake.string());
    }
    {
      ScopedEnv set("STITCH_HOST_CXX", gone.c_str());
      auto cxx = find_host_cxx(fake.string());
      REQUIRE_FALSE(cxx.is_ok());
      CHECK(cxx.status().code() == Code::kUser);
      CHECK_THAT(cxx.status().message(), Catch::Contains("STITCH_HOST_CXX is '" + gone + "'"));
    }
    {
      ScopedEnv set("STITCH_HOST_CXX", "clang-none");
      auto cxx = find_host_cxx(fake.string());
      REQUIRE_FALSE(cxx.is_ok());
      CHECK_THAT(cxx.status().message(), Catch::Contains("not an executable on PATH"));
    }
  }
  SECTION("the CUDA headers: CUDA_HOME's, else the build's toolkit, else /usr/local/cuda") {
    {
      ScopedEnv home("CUDA_HOME", (dir / "cuda").c_str());
      auto inc = find_cuda_include("/nonexistent/include");
      REQUIRE(inc.is_ok());
      CHECK(*inc == (dir / "cuda" / "include").string());
    }
    {
      ScopedEnv home("CUDA_HOME", (dir / "gone").c_str());
      auto inc = find_cuda_include((dir / "cuda" / "include").string());
      REQUIRE_FALSE(inc.is_ok());
      CHECK(inc.status().code() == Code::kUser);
      CHECK_THAT(inc.status().message(), Catch::Contains("(from CUDA_HOME)"));
    }
    {
      ScopedEnv home("CUDA_HOME", nullptr);
      auto inc = find_cuda_include((dir / "cuda" / "include").string());
      REQUIRE(inc.is_ok());
      CHECK(*inc == (dir / "cuda" / "include").string());
      // The build's toolkit gone: /usr/local/cuda's, which every machine of this project has.
      if (fs::exists("/usr/local/cuda/include/cuda_fp16.h")) {
        auto fallback = find_cuda_include("/nonexistent/include");
        REQUIRE(fallback.is_ok());
        CHECK(*fallback == "/usr/local/cuda/include");
      }
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

TEST_CASE("the build cache is kept to its size, the entries least recently used going first", "[codegen]") {
  const fs::path root = fs::temp_directory_path() / fmt::format("stitch_prune_cache_{}", getpid());
  fs::remove_all(root);
  fs::create_directories(root / "nvcc");
  fs::create_directories(root / "emu");
  const auto now = fs::file_time_type::clock::now();
  // An entry of `bytes` in `dir` (its files `key` + each suffix), last used `age` seconds ago.
  auto entry = [&](const std::string& dir, const std::string& key, const std::vector<std::string>& suffixes,
                   size_t bytes, int age) {
    for (const std::string& suffix : suffixes) {
      const fs::path p = root / dir / (key + suffix);
      REQUIRE(write_file(p, std::string(bytes / suffixes.size(), 'x')).is_ok());
      fs::last_write_time(p, now - std::chrono::seconds(age));
    }
  };
  entry("nvcc", "aaaa", {".fatbin", ".log"}, 4000, 300);  // the oldest
  entry("emu", "bbbb", {".so"}, 3000, 200);
  entry("nvcc", "cccc", {".fatbin", ".log"}, 2000, 100);
  entry("emu", "dddd", {".so"}, 1000, 10);     // the newest
  CHECK(prune_build_cache(root, 10000) == 0);  // within the size: nothing goes
  CHECK(entries_named(root / "nvcc", "").size() == 4);
  // Taking an entry marks it used: the oldest becomes the newest.
  REQUIRE(take_from_cache(root / "nvcc", "aaaa",
                          {{".fatbin", root / "taken.fatbin"}, {".log", root / "taken.log"}}));
  fs::remove(root / "taken.fatbin");
  fs::remove(root / "taken.log");
  CHECK(prune_build_cache(root, 6000) == 5000);  // bbbb, then cccc with both its files
  CHECK(entries_named(root / "nvcc", "") == std::vector<std::string>{"aaaa.fatbin", "aaaa.log"});
  CHECK(entries_named(root / "emu", "") == std::vector<std::string>{"dddd.so"});
  CHECK(prune_build_cache(root, 1) == 5000);  // over even one entry's size: all go
  CHECK(entries_named(root / "nvcc", "").empty());
  CHECK(entries_named(root / "emu", "").empty());
  fs::remove_all(root);
}
