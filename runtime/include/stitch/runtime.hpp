// stitch runtime, C++ API. A Model is an immutable, loaded artifact directory that threads can
// share; a Session owns the memory and library handles of one backend and is used by one thread
// at a time. Failures throw stitch::rt::Error, whose code() is 2 for user errors (bad input,
// bad or mismatched artifact, no GPU) and 3 for internal ones.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace stitch::rt {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

struct TensorInfo {
  std::string name;
  std::string dtype;  // "f32", "i64", "bool"...
  std::vector<int64_t> dims;
  int64_t bytes = 0;
};

struct ModelData;  // parsed manifest, schedule and weights (runtime/src/model.h)

class Model {
 public:
  // Loads and validates an artifact directory: format version, file sizes and checksums.
  static std::shared_ptr<const Model> load(const std::string& dir);
  ~Model();
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // Graph inputs of the ONNX model fixed to a value at compile time (stitchc compile
  // --constant-input); Session::set_input accepts them only with that value.
  const std::vector<TensorInfo>& fixed_inputs() const;
  // Whether float32 GEMMs and convolutions run on TF32 tensor cores (stitchc compile --tf32):
  // their results are then about 1e-3 away from float32's.
  bool tf32() const;
  // The narrowest floating-point type the artifact stores a value in or runs a library call in:
  // "bf16", "f16", "f32" or "f64" ("" when none is floating-point). A model converted to float16
  // with float32 inputs and outputs says "f16": its outputs carry float16's rounding.
  std::string narrowest_float() const;
  const std::string& dir() const;
  const ModelData& data() const { return *data_; }

 private:
  explicit Model(std::unique_ptr<ModelData> d);
  std::unique_ptr<ModelData> data_;
};

enum class Backend { kEmu, kCuda };
// "emu" or "cuda"; throws for anything else.
Backend parse_backend(const std::string& name);

class BackendImpl;

struct SessionOptions {
  // cuda backend: capture the schedule once as a CUDA Graph and replay it (false: launch every
  // step on the stream at each run, for comparison).
  bool cuda_graph = true;
};

// Timings of a session's schedule for benchmarks (stitchc bench), every sample in milliseconds.
struct Profile {
  std::string clock;           // what timed it: device events, or the host clock on emu
  std::vector<double> run_ms;  // the whole schedule, per timed run
  std::vector<std::vector<double>>
      step_ms;                  // per schedule step, per timed run (each step between its own events)
  double copy_bytes_per_s = 0;  // a large device-to-device copy, bytes read + written; 0: not measured
};

class Session {
 public:
  Session(std::shared_ptr<const Model> model, Backend backend, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Copies an input in; dtype and dims must match the artifact's (checked, by name).
  void set_input(const std::string& name, const std::string& dtype, const std::vector<int64_t>& dims,
                 const void* data, size_t bytes);
  // Runs the schedule once. Every input must have been set. Input data a kernel cannot honour (a
  // Gather's index outside its axis, which the kernel replaces by 0) fails the run with Error code
  // 2 naming the node and the value, after the run; its outputs are then not valid.
  void run();
  // Copies an output out; `bytes` must equal its size. An output written in place of an input
  // (the manifest's in_place_of_input) is that input's buffer: read it before setting that input
  // again. Refused after a run() that failed.
  void get_output(const std::string& name, void* data, size_t bytes);
  // Sets input `input` to what output `output` holds after the last run(), on the device (a
  // decoding loop's present KV cache as the next step's past). They must have one dtype and shape.
  // Free when the artifact writes that output in place of that input (a TensorScatter into a
  // cache input: the manifest's in_place_of_input), else one device-to-device copy.
  void carry(const std::string& output, const std::string& input);
  std::vector<uint8_t> output(const std::string& name);
  // `warmup` untimed runs, then `iters` timed runs of the whole schedule (replaying the CUDA Graph
  // where the session uses one); with `steps`, `iters` more runs that time each step alone; with
  // `copy`, the bandwidth of a device-to-device copy on the same device. Every input must be set.
  Profile profile(int warmup, int iters, bool steps, bool copy);

  const Model& model() const { return *model_; }
  // The backend's description of itself ("emu: 2 workers", "cuda: NVIDIA H100, graph replay").
  std::string describe() const;

 private:
  std::shared_ptr<const Model> model_;
  std::unique_ptr<BackendImpl> impl_;
  std::vector<bool> input_set_;
  bool ran_ = false;
  bool failed_ = false;  // the last run() failed: its outputs are not valid
};

}  // namespace stitch::rt
