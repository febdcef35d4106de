// A small C++ inference program: load an artifact directory made by `stitchc compile`, feed
// its inputs, run it, print a summary of every output.
//
//   stitch_example ARTIFACT_DIR [emu|cuda] [INPUT_DIR...]
//
// INPUT_DIR may hold NAME.bin files with each input's raw little-endian bytes; inputs without
// a file get deterministic data (token ids 1..50 for integer inputs, a smooth ramp for floats).
// Several INPUT_DIRs run one after another on the same session; the exit status is 0 when every
// run succeeded, else the last refused run's (2 for bad input).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "stitch/runtime.hpp"

namespace {

std::vector<uint8_t> make_input(const stitch::rt::TensorInfo& t, const std::string& dir) {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.bytes));
  if (!dir.empty()) {
    std::ifstream f(dir + "/" + t.name + ".bin", std::ios::binary);
    if (f) {
      std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (data.size() != bytes.size())
        throw stitch::rt::Error(2, t.name + ".bin has " + std::to_string(data.size()) + " bytes, the input needs " +
                                       std::to_string(bytes.size()));
      return data;
    }
  }
  const size_t n = t.dims.empty() ? 1 : bytes.size() / (t.dtype == "f32" || t.dtype == "i32" ? 4 : t.dtype == "bool" ? 1 : 8);
  for (size_t i = 0; i < n; ++i) {
    if (t.dtype == "f32") { float v = std::sin(0.1f * i); std::memcpy(&bytes[i * 4], &v, 4); }
    else if (t.dtype == "i64") { int64_t v = 1 + i % 50; std::memcpy(&bytes[i * 8], &v, 8); }
    else if (t.dtype == "i32") { int32_t v = 1 + i % 50; std::memcpy(&bytes[i * 4], &v, 4); }
    else if (t.dtype == "bool") bytes[i] = 1;
    else throw stitch::rt::Error(2, "this example does not generate " + t.dtype + " inputs; give " + t.name + ".bin");
  }
  return bytes;
}

// Prints a summary of every output of the session's last run.
void print_outputs(const stitch::rt::Model& model, stitch::rt::Session& session) {
  for (const auto& out : model.outputs()) {
    std::vector<uint8_t> bytes = session.output(out.name);
    std::printf("%s %s [", out.name.c_str(), out.dtype.c_str());
    for (size_t i = 0; i < out.dims.size(); ++i)
      std::printf("%s%lld", i ? "x" : "", static_cast<long long>(out.dims[i]));
    std::printf("]");
    if (out.dtype == "f32") {
      const float* v = reinterpret_cast<const float*>(bytes.data());
      const size_t n = bytes.size() / 4;
      double sum = 0;
      bool finite = true;
      for (size_t i = 0; i < n; ++i) sum += v[i], finite = finite && std::isfinite(v[i]);
      std::printf(" sum %.6g first %.6g %s", sum, n ? v[0] : 0.0f, finite ? "finite" : "NOT FINITE");
    }
    std::printf("\n");
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ARTIFACT_DIR [emu|cuda] [INPUT_DIR...]\n", argv[0]);
    return 2;
  }
  // Each INPUT_DIR is one run of the same session, in order, as a service answers requests: a run
  // the runtime refuses (an input out of range, say) prints its error, and the next run goes on.
  std::vector<std::string> dirs(argv + std::min(argc, 3), argv + argc);
  if (dirs.empty()) dirs.push_back("");
  int status = 0;
  try {
    auto model = stitch::rt::Model::load(argv[1]);
    stitch::rt::Session session(model, stitch::rt::parse_backend(argc > 2 ? argv[2] : "emu"));
    for (const std::string& dir : dirs) {
      if (dirs.size() > 1) std::printf("inputs %s\n", dir.c_str());
      try {
        if (!dir.empty() && !std::filesystem::is_directory(dir))
          throw stitch::rt::Error(
              2, "input directory '" + dir + "' does not exist: give a directory of NAME.bin files");
        for (const auto& in : model->inputs()) {
          std::vector<uint8_t> data = make_input(in, dir);
          session.set_input(in.name, in.dtype, in.dims, data.data(), data.size());
        }
        session.run();
        std::printf("ran on %s\n", session.describe().c_str());
        print_outputs(*model, session);
      } catch (const stitch::rt::Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        std::printf("refused (exit %d)\n", e.code());
        status = e.code();
      }
    }
  } catch (const stitch::rt::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.code();
  }
  return status;
}
