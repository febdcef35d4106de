// stitch_model_fuzz: seeded mutants of whole models, through the stitchc command as a user runs it.
//
//   stitch_model_fuzz --stitchc PATH --work DIR [--seeds A:B] [--mutations N] [--timeout S]
//                     [--verbose] [--keep] MODEL_DIR_OR_ROOT...
//
// Seed s takes the models in turn (model s mod count), draws 1 to N mutations from s
// (model_mutations.h) and writes the mutant, its symbolic input axes fixed to those of the model's
// first data set, with inputs for its shapes made from that data set's values, one integer
// element changed in one seed of three (write_inputs). Then:
//   1. `stitchc compile MUTANT -o ART --no-nvcc` must exit 0, or 2 with an error message;
//   2. when it compiled, `stitchc run MUTANT --inputs IN --save-outputs REF` (the reference
//      interpreter) must exit 0, or 2 with an error message. Where it refuses the inputs (an
//      index out of range), `stitchc run ART --backend emu --inputs IN` must refuse them too, with
//      exit code 2 and a message (the kernels' run-time checks), never give outputs;
//   3. when that ran, `stitchc run ART --backend emu --inputs IN --expect REF` must exit 0: the
//      planned, fused and generated kernels compute what the reference does, within the
//      tolerances of support/tolerances.h. Four kinds of mismatch are excused, and counted
//      apart (excuse()): a mutant that overflows float32 (a reference output not finite) with NaN
//      wherever the reference has NaN, since past 3.4e38 float32 and the reference's double part
//      ways; a near miss, at most 5% of an output's elements out of tolerance (float16: any) and
//      all within ten times it; a mutant whose unfused kernels (`--fusion none`) miss the
//      reference too, its arithmetic ill-conditioned in float32 rather than fused wrongly; and a
//      float16 or bfloat16 mutant that, run in float32 by the reference, misses the reference too,
//      its answer set by where the halves are rounded. A kernel reading the wrong element is off
//      by the values themselves, and dropping a NaN is never excused.
// A signal, a run past the timeout, exit code 1 or 3, or exit code 2 without a message fails the
// seed: its directory (DIR/seed-S) stays, with the mutations and the commands in `repro.txt`.
// A seed's mutant depends only on the seed and the models, so `--seeds S:S+1` runs it again.
// --verbose prints every seed's mutations and outcome, with the first line of a refusal's message;
// --keep keeps every seed's directory, not only a failing one's.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "float32_copy.h"
#include "importer/tensor_io.h"
#include "ir/dtype.h"
#include "model_mutations.h"
#include "reference/compare.h"

namespace fs = std::filesystem;
using namespace stitch;

namespace {

struct Model {
  fs::path dir;
  onnx::ModelProto proto;
  std::map<std::string, Tensor> data;  // the first data set's inputs, by graph input name
};

bool is_initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return true;
  return false;
}

// The model in `dir`, its graph inputs' axes fixed to its first data set's (so that a mutant
// needs no --shape), or an error naming the file.
StatusOr<Model> load(const fs::path& dir) {
  Model m{dir, {}, {}};
  std::ifstream f(dir / "model.onnx", std::ios::binary);
  if (!m.proto.ParseFromIstream(&f))
    return Status::user(fmt::format("{}: not an ONNX model", (dir / "model.onnx").string()));
  int k = 0;
  for (auto& in : *m.proto.mutable_graph()->mutable_input()) {
    if (is_initializer(m.proto.graph(), in.name())) continue;
    const fs::path p = dir / "test_data_set_0" / fmt::format("input_{}.pb", k++);
    if (!fs::exists(p)) continue;
    ASSIGN_OR_RETURN(NamedTensor t, read_tensor_file(p.string()));
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : t.tensor.dims()) shape->add_dim()->set_dim_value(d);
    m.data[in.name()] = std::move(t.tensor);
  }
  return m;
}

// Inputs for the mutant's graph inputs in `dir`/inputs: each element taken in turn from the data
// set's tensor of that name and type (token ids stay in the vocabulary, masks stay 0 and 1), else
// small values from `rng` for float32, else zeros. One seed in three then sets one element of an
// integer input to a value a model may not expect (a token id past the vocabulary, a negative or
// huge position, an index one past its last value, 0, -2^63), said in `changes`: the kernels' run-time checks
// must refuse it where the reference does. False when an input has no static shape or a type
// stitch lacks (the mutant is then only compiled).
bool write_inputs(const onnx::ModelProto& mutant, const Model& seed, const fs::path& dir,
                  std::mt19937_64& rng, std::vector<std::string>& changes) {
  fs::create_directories(dir);
  const bool edit = rng() % 3 == 0;
  std::vector<int> integer;  // inputs of int32 or int64 with elements
  for (int i = 0; i < mutant.graph().input_size(); ++i)
    if (const int t = mutant.graph().input(i).type().tensor_type().elem_type();
        t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32)
      integer.push_back(i);
  const int target = edit && !integer.empty() ? integer[rng() % integer.size()] : -1;
  int k = 0, index = -1;
  for (const auto& in : mutant.graph().input()) {
    ++index;
    if (is_initializer(mutant.graph(), in.name())) continue;
    const auto& tt = in.type().tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (!dt || !tt.has_shape()) return false;
    Dims dims;
    int64_t count = 1;
    for (const auto& d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0 || d.dim_value() > (1 << 24)) return false;
      dims.push_back(d.dim_value());
      count *= d.dim_value();
      if (count > (int64_t{1} << 24)) return false;  // 64 MB of float32 at most
    }
    Tensor t(*dt, dims);
    const int64_t es = dtype_size(*dt);
    auto it = seed.data.find(in.name());
    if (it != seed.data.end() && it->second.dtype() == *dt && it->second.size() > 0) {
      const Tensor& from = it->second;
      for (int64_t i = 0; i < t.size(); ++i)
        std::memcpy(t.data() + i * es, from.data() + (i % from.size()) * es, es);
    } else if (*dt == DType::kF32) {
      std::uniform_real_distribution<float> u(-2.0f, 2.0f);
      for (int64_t i = 0; i < t.size(); ++i) t.data_as<float>()[i] = u(rng);
    }
    if (index == target && t.size() > 0) {
      const int64_t at = static_cast<int64_t>(rng() % static_cast<uint64_t>(t.size()));
      const int64_t was = t.get_i64(at);
      // One past it, -1, -was - 1 (written ~was: no overflow), far out either way, 0 (a divisor),
      // and the type's least value (-2^63 by -1 overflows a division).
      const int64_t values[] = {was == INT64_MAX ? was : was + 1,
                                -1,
                                ~was,
                                int64_t{1} << 20,
                                -(int64_t{1} << 20),
                                int64_t{1} << 31,
                                0,
                                INT64_MIN};
      const int64_t v = values[rng() % std::size(values)];
      t.set_i64(at, v);
      changes.push_back(fmt::format("input '{}' element {}: {} -> {}", in.name(), at, was, t.get_i64(at)));
    }
    if (!write_tensor_file((dir / fmt::format("input_{}.pb", k++)).string(), t, in.name()).is_ok())
      return false;
  }
  return true;
}

struct Outcome {
  int code = -1;   // the exit code, when it exited
  int signal = 0;  // the signal that ended it, if one did
  bool timed_out = false;
  std::string log;  // stdout and stderr together
  bool fine(bool zero_only) const {
    if (timed_out || signal) return false;
    if (code == 0) return true;
    return !zero_only && code == 2 && log.find("error") != std::string::npos;
  }
  std::string how() const {
    if (timed_out) return "ran past the timeout";
    if (signal) return fmt::format("killed by signal {} ({})", signal, strsignal(signal));
    return code == 2 ? "exit code 2 without an error message" : fmt::format("exit code {}", code);
  }
};

// Runs `args` with its output in `log`, killing its process group after `timeout_s`.
Outcome run(const std::vector<std::string>& args, const fs::path& log, int timeout_s) {
  Outcome o;
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      o.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!o.timed_out) {
    if (WIFEXITED(status)) o.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  }
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  o.log = ss.str();
  return o;
}

std::string quoted(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Why a mismatch of step 3 is not the kernels' fault.
enum class Excuse { kNone, kOverflow, kNearMiss, kUnfusedToo, kHalvesToo };
constexpr const char* kExcuses[] = {
    "", "overflows float32, NaN wherever the reference has NaN", "a near miss",
    "ill-conditioned: the unfused kernels miss the reference too",
    "ill-conditioned in half precision: the reference run in float32 misses it too"};

struct Counts {
  int mutants = 0, unchanged = 0, refused = 0, compiled = 0, compared = 0, reference_refused = 0, failed = 0;
  int excused[5] = {0, 0, 0, 0, 0};  // by Excuse
};

// The outputs in `dir`/reference and `dir`/emu, pairwise (reference first); empty when one cannot
// be read.
std::vector<std::pair<Tensor, Tensor>> outputs(const fs::path& dir) {
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int k = 0;; ++k) {
    const std::string name = fmt::format("output_{}.pb", k);
    if (!fs::exists(dir / "reference" / name)) return out;
    auto r = read_tensor_file((dir / "reference" / name).string());
    auto e = read_tensor_file((dir / "emu" / name).string());
    if (!r.is_ok() || !e.is_ok()) return {};
    out.emplace_back(std::move(r->tensor), std::move(e->tensor));
  }
}

// The widest tolerance in `stitchc run --expect`'s report ("tolerance...: rtol R atol A" lines,
// one per element type when they differ); false when it gives none.
bool report_tolerance(const std::string& report, double* rtol, double* atol) {
  std::istringstream in(report);
  *rtol = *atol = -1;
  for (std::string line; std::getline(in, line);) {
    double r = 0, a = 0;
    if (const auto at = line.find("rtol ");
        line.rfind("tolerance", 0) == 0 && at != std::string::npos &&
        std::sscanf(line.c_str() + at, "rtol %lf atol %lf", &r, &a) == 2) {
      *rtol = std::max(*rtol, r);
      *atol = std::max(*atol, a);
    }
  }
  return *rtol >= 0;
}

// Whether the float16 or bfloat16 mutant at `mutant` (its inputs and reference outputs under
// `dir`) gives another answer when run in float32 (float32_copy.h), beyond the tolerance: then
// where its halves are rounded decides its outputs, and a fused kernel, which keeps float32
// between the ops the reference rounds one by one, may miss the reference without computing
// anything wrong (a Div by a GEMM output that cancels to nearly zero).
bool halves_rounding_decides(const std::string& stitchc, const std::string& mutant, const fs::path& dir,
                             double rtol, double atol, int timeout_s) {
  onnx::ModelProto m;
  {
    std::ifstream f(mutant, std::ios::binary);
    if (!m.ParseFromIstream(&f)) return false;
  }
  auto wide = fuzz::float32_copy(m);
  if (!wide.is_ok() || !wide->has_value()) return false;
  const fs::path model = dir / "model_f32.onnx", inputs = dir / "inputs_f32", ref = dir / "reference_f32";
  {
    std::ofstream f(model, std::ios::binary);
    if (!(*wide)->SerializeToOstream(&f)) return false;
  }
  fs::create_directories(inputs);
  for (const auto& e : fs::directory_iterator(dir / "inputs")) {
    auto t = read_tensor_file(e.path().string());
    if (!t.is_ok() ||
        !write_tensor_file((inputs / e.path().filename()).string(), fuzz::widened(t->tensor), t->name)
             .is_ok())
      return false;
  }
  if (run({stitchc, "run", model.string(), "--inputs", inputs.string(), "--save-outputs", ref.string()},
          dir / "reference_f32.log", timeout_s)
          .code != 0)
    return false;
  for (int k = 0;; ++k) {
    const std::string name = fmt::format("output_{}.pb", k);
    if (!fs::exists(dir / "reference" / name)) return false;
    auto half = read_tensor_file((dir / "reference" / name).string());
    auto f32 = read_tensor_file((ref / name).string());
    if (!half.is_ok() || !f32.is_ok() || !is_float(half->tensor.dtype())) continue;
    if (!compare_tensors(f32->tensor, fuzz::widened(half->tensor), rtol, atol).ok) return true;
  }
}

// Why step 3's mismatch (`report`, its outputs saved under `dir`) is excused, if it is. Never
// when the kernels give a value where the reference gives NaN (a NaN dropped, as a folded ReLU
// once did). Else: the mutant overflows float32 (a reference output not finite): past 3.4e38 the
// kernels' float32 and the reference's double part ways (a sum is +inf in one and finite, or
// -inf, in the other; inf - inf gives the kernels a NaN where a norm's division by inf gives the
// reference 0), so the values say nothing. A near miss: at most 5% of an output's elements out of
// the report's tolerance (any number for float16 and bfloat16 outputs, whose fused kernels keep
// float32 between the ops the reference rounds one by one), all within ten times it. Or the
// mutant compiled without fusion (one kernel per op, each checked by ONNX's node tests) misses
// the reference too: its arithmetic is ill-conditioned in float32 (a Mul made a Div by a
// sigmoid; float16 scores near 65504), not fused wrongly. Or, for a float16 or bfloat16 mutant
// whose unfused kernels (rounding each op's output as the reference does) match, the mutant run in
// float32 misses the reference too (halves_rounding_decides).
Excuse excuse(const std::string& report, const std::string& stitchc, const std::string& mutant,
              const fs::path& dir, int timeout_s) {
  const auto outs = outputs(dir);
  if (outs.empty()) return Excuse::kNone;
  bool nonfinite = false;
  for (const auto& [r, e] : outs) {
    if (!is_float(r.dtype()) || r.dims() != e.dims()) continue;
    for (int64_t i = 0; i < r.size(); ++i) {
      const double a = r.get_f64(i);
      if (std::isnan(a) && !std::isnan(e.get_f64(i))) return Excuse::kNone;
      nonfinite |= !std::isfinite(a);
    }
  }
  if (nonfinite) return Excuse::kOverflow;
  double rtol = 0, atol = 0;
  if (report_tolerance(report, &rtol, &atol) && std::all_of(outs.begin(), outs.end(), [&](const auto& o) {
        const auto& [r, e] = o;
        const bool half = r.dtype() == DType::kF16 || r.dtype() == DType::kBF16;
        return compare_tensors(e, r, 10 * rtol, 10 * atol).ok &&
               (half || compare_tensors(e, r, rtol, atol).mismatches * 20 <= r.size());
      }))
    return Excuse::kNearMiss;
  const std::string none = (dir / "artifact_unfused").string();
  if (run({stitchc, "compile", mutant, "-o", none, "--no-nvcc", "--fusion", "none"}, dir / "unfused.log",
          timeout_s)
          .code != 0)
    return Excuse::kNone;
  const Outcome unfused = run({stitchc, "run", none, "--backend", "emu", "--inputs",
                               (dir / "inputs").string(), "--expect", (dir / "reference").string()},
                              dir / "unfused_run.log", timeout_s);
  if (unfused.code == 1) return Excuse::kUnfusedToo;
  if (unfused.code != 0 || rtol < 0) return Excuse::kNone;
  return halves_rounding_decides(stitchc, mutant, dir, rtol, atol, timeout_s) ? Excuse::kHalvesToo
                                                                              : Excuse::kNone;
}

int usage(const std::string& why) {
  fmt::print(stderr,
             "stitch_model_fuzz: {}\nusage: stitch_model_fuzz --stitchc PATH --work DIR [--seeds A:B] "
             "[--mutations N] [--timeout S] [--verbose] [--keep] MODEL_DIR_OR_ROOT...\n",
             why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string stitchc, work;
  int64_t first = 0, last = 100;
  int max_mutations = 2, timeout_s = 120;
  bool verbose = false, keep = false;
  std::vector<fs::path> roots;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--stitchc" && more) {
      stitchc = argv[++i];
    } else if (a == "--work" && more) {
      work = argv[++i];
    } else if (a == "--seeds" && more) {
      long long x = 0, y = 0;
      if (std::sscanf(argv[++i], "%lld:%lld", &x, &y) != 2 || x < 0 || y <= x)
        return usage("--seeds wants A:B with 0 <= A < B");
      first = x;
      last = y;
    } else if (a == "--mutations" && more) {
      max_mutations = std::atoi(argv[++i]);
      if (max_mutations < 1) return usage("--mutations wants a count of at least 1");
    } else if (a == "--timeout" && more) {
      timeout_s = std::atoi(argv[++i]);
      if (timeout_s < 1) return usage("--timeout wants seconds, at least 1");
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--keep") {
      keep = true;
    } else if (!a.empty() && a[0] != '-') {
      roots.emplace_back(a);
    } else {
      return usage(fmt::format("unknown option '{}'", a));
    }
  }
  if (stitchc.empty() || work.empty() || roots.empty())
    return usage("--stitchc, --work and a model are needed");
  if (!fs::exists(stitchc)) return usage(fmt::format("'{}' does not exist", stitchc));

  std::vector<Model> models;
  for (const fs::path& r : roots) {
    std::vector<fs::path> dirs;
    if (fs::exists(r / "model.onnx")) {
      dirs.push_back(r);
    } else if (fs::is_directory(r)) {
      for (const auto& e : fs::directory_iterator(r))
        if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
      std::sort(dirs.begin(), dirs.end());
    }
    if (dirs.empty()) return usage(fmt::format("'{}' holds no model.onnx", r.string()));
    for (const fs::path& d : dirs) {
      auto m = load(d);
      if (!m.is_ok()) return usage(m.status().message());
      models.push_back(std::move(*m));
    }
  }

  Counts c;
  for (int64_t s = first; s < last; ++s) {
    const Model& seed = models[s % models.size()];
    std::mt19937_64 rng(static_cast<uint64_t>(s) * 0x9E3779B97F4A7C15ull + 1);
    onnx::ModelProto mutant = seed.proto;
    std::vector<std::string> changes;
    const int n = 1 + static_cast<int>(rng() % max_mutations);
    for (int i = 0; i < n; ++i)
      if (std::string what = fuzz::mutate(mutant, rng); !what.empty()) changes.push_back(what);
    ++c.mutants;
    if (changes.empty()) {
      ++c.unchanged;
      continue;
    }
    const fs::path dir = fs::path(work) / fmt::format("seed-{}", s);
    fs::remove_all(dir);
    fs::create_directories(dir);
    {
      std::ofstream f(dir / "model.onnx", std::ios::binary);
      mutant.SerializeToOstream(&f);
    }
    const bool inputs = write_inputs(mutant, seed, dir / "inputs", rng, changes);
    const std::string mpath = (dir / "model.onnx").string();
    std::vector<std::vector<std::string>> steps{
        {stitchc, "compile", mpath, "-o", (dir / "artifact").string(), "--no-nvcc"},
        {stitchc, "run", mpath, "--inputs", (dir / "inputs").string(), "--save-outputs",
         (dir / "reference").string()},
        {stitchc, "run", (dir / "artifact").string(), "--backend", "emu", "--inputs",
         (dir / "inputs").string(), "--expect", (dir / "reference").string(), "--save-outputs",
         (dir / "emu").string()},
    };
    std::string failure, outcome = "compiled; not run (no inputs for its shapes)", refusal;
    int step = 0;
    for (; step < 3; ++step) {
      if (step > 0 && !inputs) break;
      const Outcome o = run(steps[step], dir / fmt::format("step{}.log", step + 1), timeout_s);
      if (step == 1 && o.code == 2 && o.fine(false)) {
        // The reference refuses the inputs (an index out of range): the artifact must refuse them
        // at run time too, with exit code 2, and never give outputs for them.
        refusal = o.log.substr(0, o.log.find('\n'));
        steps[2].resize(steps[2].size() - 4);  // no --expect, no --save-outputs
        continue;
      }
      if (step == 2 && !refusal.empty()) {
        if (o.code == 2 && o.fine(false)) {
          ++c.reference_refused;
          outcome = fmt::format("refused by the reference ({}) and at run time: {}", refusal,
                                o.log.substr(0, o.log.find('\n')));
        } else {
          failure = fmt::format("step 3 ({}) {} where the reference refused the inputs ({})",
                                quoted(steps[2]), o.code == 0 ? "gave outputs" : o.how(), refusal);
          if (!o.log.empty()) failure += ":\n" + o.log.substr(o.log.size() > 2000 ? o.log.size() - 2000 : 0);
        }
        break;
      }
      if (step == 2 && o.code == 1 && !o.timed_out && !o.signal) {
        const Excuse why = excuse(o.log, stitchc, mpath, dir, timeout_s);
        if (why != Excuse::kNone) {
          ++c.excused[static_cast<int>(why)];
          outcome = std::string("compiled; ") + kExcuses[static_cast<int>(why)];
          break;
        }
      }
      if (o.code == 2) outcome = fmt::format("refused: {}", o.log.substr(0, o.log.find('\n')));
      if (step == 2 && o.code == 0) outcome = "compiled, and matches the reference on emu";
      if (!o.fine(step == 2)) {
        failure = fmt::format("step {} ({}) {}", step + 1, quoted(steps[step]), o.how());
        if (!o.log.empty()) failure += ":\n" + o.log.substr(o.log.size() > 2000 ? o.log.size() - 2000 : 0);
        break;
      }
      if (o.code == 2) {  // refused at compile time (steps 2 and 3 get here with exit code 0 only)
        ++c.refused;
        break;
      }
      if (step == 0) ++c.compiled;
      if (step == 2) ++c.compared;
    }
    if (failure.empty()) {
      if (verbose)
        fmt::print("seed {} ({}): {}\n  {}\n", s, seed.dir.filename().string(), fmt::join(changes, "; "),
                   outcome);
      if (!keep) fs::remove_all(dir);
      continue;
    }
    ++c.failed;
    std::ofstream repro(dir / "repro.txt");
    repro << fmt::format("seed {} of {}:\n", s, seed.dir.string());
    for (const auto& w : changes) repro << "  " << w << "\n";
    for (int i = 0; i < 3; ++i) repro << quoted(steps[i]) << "\n";
    fmt::print("model-fuzz: FAIL seed {} ({}), mutated: {}\n  {}\n", s, seed.dir.filename().string(),
               fmt::join(changes, "; "), failure);
    std::fflush(stdout);
  }
  fmt::print("model-fuzz: seeds {}:{} over {} models: {} mutants ({} left unchanged), ", first, last,
             models.size(), c.mutants, c.unchanged);
  fmt::print("{} refused with a user error, {} compiled ({} matched the reference on emu; ", c.refused,
             c.compiled, c.compared);
  fmt::print(
      "{} overflowing float32 alike, {} near misses, {} ill-conditioned and {} ill-conditioned in half "
      "precision, none of them failures; ",
      c.excused[1], c.excused[2], c.excused[3], c.excused[4]);
  fmt::print("{} refused by the reference and at run time alike), {} failed\n", c.reference_refused,
             c.failed);
  return c.failed ? 1 : 0;
}
