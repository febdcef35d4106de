// The cuda backend: device memory for the arena, weights and inputs/outputs; the artifact's
// fatbin loaded with cudaLibraryLoadFromFile; GEMMs through cuBLAS, convolutions through cuDNN.
// The first run captures the whole schedule on the session's stream as a CUDA Graph; later runs
// replay it (inputs and outputs are copied outside the graph, into fixed device buffers).
// Every CUDA, cuBLAS and cuDNN call is checked; the message carries the call, file and line.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "backend.h"
#include "cuda_conv.h"
#include "cuda_util.h"
#include "stitch/artifact_format.h"

namespace stitch::rt {
namespace {

// cuBLASLt descriptors of one gemm step with a bias, GELU or residual epilogue, made once per session.
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so B is cuBLASLt's first operand.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class CudaBackend final : public BackendImpl {
 public:
  CudaBackend(const ModelData& m, bool use_graph) : m_(m), use_graph_(use_graph) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0)
      fail(2, fmt::format("--backend cuda needs an NVIDIA GPU and none is usable here ({}); run on the CPU with "
                          "--backend emu", e != cudaSuccess ? cudaGetErrorString(e) : "no devices"));
    CHECK(cudaGetDeviceProperties(&prop_, 0));
    const int cc = prop_.major * 10 + prop_.minor;
    bool runs = false;
    for (const std::string& a : m.archs) {
      const int want = std::atoi(a.c_str() + 3);
      runs |= want / 10 == prop_.major && want % 10 <= prop_.minor;  // SASS runs within a major version
      runs |= want <= cc;                                            // PTX of the newest arch is JIT-compiled
    }
    if (!runs)
      fail(2, fmt::format("artifact '{}' was compiled for {} but this GPU ({}) is sm_{}; recompile with --arch sm_{}",
                          m.dir, fmt::join(m.archs, ","), prop_.name, cc, cc));
    CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    arena_ = alloc(m.arena_bytes);
    weights_ = alloc(m.weights_bytes);
    CHECK(cudaMemcpy(weights_, m.weights.data(), m.weights.size(), cudaMemcpyHostToDevice));
    for (const TensorInfo& t : m.inputs) inputs_.push_back(static_cast<uint8_t*>(alloc(t.bytes)));
    for (size_t i = 0; i < m.outputs.size(); ++i) {  // an output written in place is its input's buffer
      const int j = m.output_in_input[i];
      outputs_.push_back(j >= 0 ? inputs_[j] : static_cast<uint8_t*>(alloc(m.outputs[i].bytes)));
    }
    // The fault word lives on the device; a run that has checks ends by copying it into pinned
    // host memory (one 16-byte copy, captured in the graph), read after the run's synchronize.
    fault_dev_ = alloc(artifact::kFaultWordBytes);
    CHECK(cudaMemset(fault_dev_, 0, artifact::kFaultWordBytes));
    CHECK(cudaMallocHost(reinterpret_cast<void**>(&fault_host_), artifact::kFaultWordBytes));
    fault_host_[0] = fault_host_[1] = 0;
    addr_ = buffer_addresses(m, arena_, weights_, inputs_, outputs_, fault_dev_);
    args_ = kernel_launch_args(m, addr_);
    const std::string fatbin = (std::filesystem::path(m.dir) / artifact::kFatbinFile).string();
    CHECK(cudaLibraryLoadFromFile(&library_, fatbin.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    for (const KernelDesc& k : m.kernels) {
      cudaKernel_t fn = nullptr;
      CHECK(cudaLibraryGetKernel(&fn, library_, k.name.c_str()));
      kernels_.push_back(fn);
      if (k.cooperative) check_co_resident(k, fn);
    }
    CHECK(cublasCreate(&cublas_));
    CHECK(cublasSetStream(cublas_, stream_));
    // A fixed workspace keeps cuBLAS from allocating during graph capture.
    cublas_ws_bytes_ = 32u << 20;
    cublas_ws_ = alloc(static_cast<int64_t>(cublas_ws_bytes_));
    CHECK(cublasSetWorkspace(cublas_, cublas_ws_, cublas_ws_bytes_));
    for (size_t i = 0; i < m.steps.size(); ++i) {
      if (m.steps[i].op == StepDesc::kConv || m.steps[i].op == StepDesc::kConvTranspose)
        plan_conv(i, m.steps[i]);
      if (m.steps[i].op == StepDesc::kGemm && m.steps[i].gemm.has_epilogue())
        plan_lt(i, m.steps[i]);
      else if (m.steps[i].op == StepDesc::kGemm && m.steps[i].gemm.batch.size() > 1)
        plan_pointer_arrays(i, m.steps[i]);
    }
  }

  ~CudaBackend() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (graph_) cudaGraphDestroy(graph_);
    for (auto& [i, p] : conv_plans_) destroy_conv_plan(p);
    for (auto& [i, p] : lt_plans_) {
      cublasLtMatrixLayoutDestroy(p.first);
      cublasLtMatrixLayoutDestroy(p.second);
      cublasLtMatrixLayoutDestroy(p.out);
      cublasLtMatmulDescDestroy(p.op);
    }
    if (lt_) cublasLtDestroy(lt_);
    if (cudnn_) cudnnDestroy(cudnn_);
    if (cublas_) cublasDestroy(cublas_);
    if (library_) cudaLibraryUnload(library_);
    if (fault_host_) cudaFreeHost(fault_host_);
    for (void* p : allocations_) cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }

  void upload(int i, const void* data, size_t bytes) override {
    CHECK(cudaMemcpyAsync(inputs_[i], data, bytes, cudaMemcpyHostToDevice, stream_));
    CHECK(cudaStreamSynchronize(stream_));
  }
  void download(int i, void* data, size_t bytes) override {
    CHECK(cudaMemcpyAsync(data, outputs_[i], bytes, cudaMemcpyDeviceToHost, stream_));
    CHECK(cudaStreamSynchronize(stream_));
  }
  void carry(int output, int input, size_t bytes) override {
    if (outputs_[output] == inputs_[input]) return;
    CHECK(cudaMemcpyAsync(inputs_[input], outputs_[output], bytes, cudaMemcpyDeviceToDevice, stream_));
    CHECK(cudaStreamSynchronize(stream_));
  }
  std::string describe() const override {
    return fmt::format("cuda: {} (sm_{}{}), {} kernels, {}", prop_.name, prop_.major, prop_.minor, m_.kernels.size(),
                       use_graph_ ? "CUDA Graph replay" : "stream launches");
  }

  std::string clock() const override { return fmt::format("CUDA events on {}", prop_.name); }

  double timed_run() override {
    ensure_events(2);
    if (use_graph_ && !graph_exec_) run();  // captures the graph
    CHECK(cudaEventRecord(events_[0], stream_));
    if (use_graph_)
      CHECK(cudaGraphLaunch(graph_exec_, stream_));
    else
      enqueue();
    CHECK(cudaEventRecord(events_[1], stream_));
    if (!use_graph_) copy_fault_word();  // a graph copies it as its last node
    sync_or_fail();
    check_device_faults();
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, events_[0], events_[1]));
    return ms;
  }

  // Each step between its own events, launched on the stream (no graph: a graph's nodes cannot be
  // timed one by one); a step's time includes its launch gap, as a lone launch would.
  std::vector<double> timed_steps() override {
    ensure_events(m_.steps.size() + 1);
    CHECK(cudaEventRecord(events_[0], stream_));
    for (size_t i = 0; i < m_.steps.size(); ++i) {
      enqueue_step(i);
      CHECK(cudaEventRecord(events_[i + 1], stream_));
    }
    copy_fault_word();
    sync_or_fail();
    check_device_faults();
    std::vector<double> out;
    for (size_t i = 0; i < m_.steps.size(); ++i) {
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
      out.push_back(ms);
    }
    return out;
  }

  // A 256 MiB device-to-device copy, 3 untimed and 20 timed: bytes read + written over the median.
  double copy_bytes_per_s() override {
    const size_t bytes = size_t(256) << 20;
    void *src = nullptr, *dst = nullptr;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaMemset(src, 1, bytes));
    ensure_events(2);
    std::vector<float> ms;
    for (int i = 0; i < 23; ++i) {
      CHECK(cudaEventRecord(events_[0], stream_));
      CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
      CHECK(cudaEventRecord(events_[1], stream_));
      sync_or_fail();
      float t = 0;
      CHECK(cudaEventElapsedTime(&t, events_[0], events_[1]));
      if (i >= 3) ms.push_back(t);
    }
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    std::sort(ms.begin(), ms.end());
    return 2.0 * double(bytes) / (double(ms[ms.size() / 2]) * 1e-3);
  }

  void run() override {
    if (!use_graph_) {
      enqueue();
      copy_fault_word();
      sync_or_fail();
      check_device_faults();
      return;
    }
    if (!graph_exec_) {
      CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        enqueue();
        copy_fault_word();
      } catch (...) {
        cudaGraph_t broken = nullptr;
        cudaStreamEndCapture(stream_, &broken);
        if (broken) cudaGraphDestroy(broken);
        throw;
      }
      CHECK(cudaStreamEndCapture(stream_, &graph_));
      CHECK(cudaGraphInstantiate(&graph_exec_, graph_, 0));
    }
    CHECK(cudaGraphLaunch(graph_exec_, stream_));
    sync_or_fail();
    check_device_faults();
  }

 private:
  void* alloc(int64_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
    if (e != cudaSuccess)
      fail(2, fmt::format("cannot allocate {} bytes of GPU memory: {}", bytes, cudaGetErrorString(e)));
    allocations_.push_back(p);
    return p;
  }

  void* ptr(int id) const { return addr_[id]; }

  void ensure_events(size_t n) {
    while (events_.size() < n) {
      cudaEvent_t e = nullptr;
      CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
  }

  // The fault word to the host, at the end of a run of a schedule that has checks.
  void copy_fault_word() {
    if (m_.has_faults)
      CHECK(cudaMemcpyAsync(fault_host_, fault_dev_, artifact::kFaultWordBytes, cudaMemcpyDeviceToHost,
                            stream_));
  }
  // After the run's synchronize: a recorded fault clears the device word and fails (check_faults).
  void check_device_faults() {
    if (!m_.has_faults || fault_host_[0] == 0) return;
    CHECK(cudaMemsetAsync(fault_dev_, 0, artifact::kFaultWordBytes, stream_));
    CHECK(cudaStreamSynchronize(stream_));
    check_faults(m_, fault_host_);
  }

  void sync_or_fail() {
    cudaError_t e = cudaStreamSynchronize(stream_);
    if (e != cudaSuccess)
      fail(3, fmt::format("running the schedule of '{}' failed: {}", m_.dir, cudaGetErrorString(e)));
  }

  void plan_conv(size_t index, const StepDesc& s) {
    if (!cudnn_) {
      CHECK(cudnnCreate(&cudnn_));
      CHECK(cudnnSetStream(cudnn_, stream_));
    }
    ConvPlan p = make_conv_plan(cudnn_, s, m_.tf32, [this](int64_t bytes) { return alloc(bytes); });
    if (p.workspace > conv_ws_bytes_) {  // one workspace serves every convolution: the largest
      conv_ws_bytes_ = p.workspace;
      conv_ws_ = alloc(static_cast<int64_t>(p.workspace));
    }
    conv_plans_[index] = p;
  }

  // A column-major layout of rows x cols with leading dimension ld, `count` matrices `stride` apart.
  static cublasLtMatrixLayout_t lt_layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t count,
                                          int64_t stride) {
    cublasLtMatrixLayout_t l = nullptr;
    CHECK(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
    const int32_t n = static_cast<int32_t>(count);
    CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n, sizeof n));
    CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                           sizeof stride));
    return l;
  }

  void plan_lt(size_t index, const StepDesc& s) {
    if (!lt_) CHECK(cublasLtCreate(&lt_));
    const GemmDesc& g = s.gemm;
    const cudaDataType_t t = cuda_type(s.dtype);
    const bool dbl = s.dtype == "f64";
    LtPlan p;
    CHECK(cublasLtMatmulDescCreate(&p.op, compute_type(s.dtype), dbl ? CUDA_R_64F : CUDA_R_32F));
    const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    // One bias element per row of column-major D, that is per column j of our row-major C; GELU
    // (cuBLASLt's, the tanh form) or ReLU after the bias. A residual alone needs no epilogue: it is
    // cuBLASLt's C (laid out as D) with beta 1.
    const cublasLtEpilogue_t epi = g.gelu   ? (g.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                   : g.relu ? (g.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
                                   : g.bias ? CUBLASLT_EPILOGUE_BIAS
                                            : CUBLASLT_EPILOGUE_DEFAULT;
    CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (g.bias) {
      const void* bias = ptr(s.args[3]);
      CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
      const cudaDataType_t bt = t;
      CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    const size_t nb = g.batch.size();
    const int64_t inner = nb ? g.batch.back() : 1;
    p.first = g.trans_b ? lt_layout(t, g.k, g.n, g.ldb, inner, nb ? g.stride_b.back() : 0)
                        : lt_layout(t, g.n, g.k, g.ldb, inner, nb ? g.stride_b.back() : 0);
    p.second = g.trans_a ? lt_layout(t, g.m, g.k, g.lda, inner, nb ? g.stride_a.back() : 0)
                         : lt_layout(t, g.k, g.m, g.lda, inner, nb ? g.stride_a.back() : 0);
    p.out = lt_layout(t, g.n, g.m, g.ldc, inner, nb ? g.stride_c.back() : 0);
    cublasLtMatmulPreference_t pref = nullptr;
    CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = cublas_ws_bytes_;
    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    // The heuristic assumes 256-byte aligned matrices unless told otherwise; operands read at an
    // offset (out of a Split), with odd leading dimensions or batched at small strides may be less
    // aligned: tell it the alignment every matrix and column really has.
    const int64_t esz = dtype_bytes(s.dtype);
    auto alignment = [&](const void* base, int64_t offset, int64_t ld, const std::vector<int64_t>& strides) {
      uint64_t a = reinterpret_cast<uintptr_t>(base) + static_cast<uint64_t>(offset * esz);
      a |= static_cast<uint64_t>(ld * esz);
      for (int64_t st : strides) a |= static_cast<uint64_t>(st * esz);
      uint32_t bytes = 256;
      while (bytes > 1 && (a % bytes) != 0) bytes /= 2;
      return bytes;
    };
    const uint32_t al_first = alignment(ptr(s.args[1]), g.offset_b, g.ldb, g.stride_b);
    const uint32_t al_second = alignment(ptr(s.args[0]), g.offset_a, g.lda, g.stride_a);
    const uint32_t al_out = alignment(ptr(s.args[2]), 0, g.ldc, g.stride_c);
    const uint32_t al_c = g.residual ? alignment(ptr(s.args.back()), 0, g.ldc, g.stride_c) : al_out;
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligned[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_first},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_second},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_out}};
    for (const auto& [attr, bytes] : aligned)
      CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof bytes));
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.first, p.second, p.out, p.out, pref, 1, &res, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (found == 0)
      fail(3, fmt::format("cuBLASLt has no algorithm for the epilogue GEMM of node '{}' ({}x{}x{}, {})",
                          s.node, g.m, g.n, g.k, s.dtype));
    p.algo = res.algo;
    lt_plans_[index] = p;
  }

  // A batch that no single stride describes (attention's [batch, heads] with the heads written
  // transposed, or K/V heads shared by several query heads): one pointer per matrix of B, A and C
  // in device memory, so the whole batch is one cublasGemmBatchedEx. The buffers' addresses are
  // fixed for the backend's life, so the arrays are written once, here.
  void plan_pointer_arrays(size_t index, const StepDesc& s) {
    const int64_t esz = dtype_bytes(s.dtype);
    const std::vector<BatchOffset> offsets = batch_offsets(s.gemm, s.gemm.batch.size());
    const size_t count = offsets.size();
    std::vector<const void*> host(3 * count);
    auto* a = static_cast<const uint8_t*>(ptr(s.args[0]));
    auto* b = static_cast<const uint8_t*>(ptr(s.args[1]));
    auto* c = static_cast<const uint8_t*>(ptr(s.args[2]));
    for (size_t i = 0; i < count; ++i) {
      host[i] = b + offsets[i].b * esz;  // column-major: B^T is the first operand
      host[count + i] = a + offsets[i].a * esz;
      host[2 * count + i] = c + offsets[i].c * esz;
    }
    void* dev = alloc(static_cast<int64_t>(host.size() * sizeof(void*)));
    CHECK(cudaMemcpy(dev, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
    pointer_arrays_[index] = {static_cast<const void**>(dev), static_cast<int64_t>(count)};
  }

  void gemm(const StepDesc& s, size_t index) {
    const GemmDesc& g = s.gemm;
    const cudaDataType_t t = cuda_type(s.dtype);
    const int64_t esz = dtype_bytes(s.dtype);
    const bool dbl = s.dtype == "f64";
    const double alpha_d = g.alpha, beta_d = g.beta;
    const float alpha_f = float(g.alpha), beta_f = float(g.beta);
    const void* alpha = dbl ? static_cast<const void*>(&alpha_d) : &alpha_f;
    const void* beta = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
    const cublasComputeType_t compute = compute_type(s.dtype);
    const size_t nb = g.batch.size();
    const int64_t inner = nb ? g.batch.back() : 1;
    const int64_t sa = nb ? g.stride_a.back() : 0, sb = nb ? g.stride_b.back() : 0,
                  sc = nb ? g.stride_c.back() : 0;
    if (auto pa = pointer_arrays_.find(index); pa != pointer_arrays_.end()) {
      const auto& [arrays, count] = pa->second;
      CHECK(cublasGemmBatchedEx(cublas_, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.n), int(g.m), int(g.k), alpha,
                                arrays, t, int(g.ldb), arrays + count, t, int(g.lda), beta,
                                const_cast<void* const*>(arrays + 2 * count), t, int(g.ldc), int(count),
                                compute, CUBLAS_GEMM_DEFAULT));
      return;
    }
    auto* a = static_cast<const uint8_t*>(ptr(s.args[0]));
    auto* b = static_cast<const uint8_t*>(ptr(s.args[1]));
    auto* c = static_cast<uint8_t*>(ptr(s.args[2]));
    // A residual is cuBLASLt's C, read with beta 1; otherwise C is D (beta accumulates onto it).
    const auto* r = g.residual ? static_cast<const uint8_t*>(ptr(s.args.back())) : c;
    const double one_d = 1;
    const float one_f = 1;
    const void* lt_beta = !g.residual ? beta : dbl ? static_cast<const void*>(&one_d) : &one_f;
    // All batch dims but the last are looped here (only cuBLASLt's epilogue calls still have
    // several: the others went to pointer arrays); the last goes to the batched call.
    for (const auto& [oa, ob, oc] : batch_offsets(g, nb > 0 ? nb - 1 : 0)) {
      if (g.has_epilogue()) {
        const LtPlan& p = lt_plans_.at(index);
        CHECK(cublasLtMatmul(lt_, p.op, alpha, b + ob * esz, p.first, a + oa * esz, p.second, lt_beta,
                             r + oc * esz, p.out, c + oc * esz, p.out, &p.algo, cublas_ws_, cublas_ws_bytes_,
                             stream_));
      } else {
        // Row-major C = A'B' is column-major C^T = B'^T A'^T: swap the operands.
        CHECK(cublasGemmStridedBatchedEx(cublas_, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       int(g.n), int(g.m), int(g.k), alpha, b + ob * esz, t, int(g.ldb), sb,
                                       a + oa * esz, t, int(g.lda), sa, beta, c + oc * esz, t, int(g.ldc), sc,
                                       int(inner), compute, CUBLAS_GEMM_DEFAULT));
      }
    }
  }

  // A cooperative kernel (a row split over blocks: global stitching) waits at grid-wide barriers,
  // so every block of its grid must be resident at once on this GPU.
  void check_co_resident(const KernelDesc& k, cudaKernel_t fn) {
    int coop = 0, per_sm = 0;
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0));
    if (!coop)
      fail(2, fmt::format(
                  "kernel {} needs a cooperative launch, which this GPU ({}) does not support; recompile "
                  "for it or run with --backend emu",
                  k.name, prop_.name));
    const unsigned threads = k.block[0] * k.block[1] * k.block[2];
    const unsigned blocks = k.grid[0] * k.grid[1] * k.grid[2];
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(fn),
                                                        int(threads), static_cast<size_t>(k.smem)));
    const int64_t resident = int64_t(per_sm) * prop_.multiProcessorCount;
    if (resident < blocks)
      fail(2, fmt::format(
                  "kernel {} is a cooperative kernel of {} blocks, but this GPU ({}, {} SMs) holds only {} "
                  "of them at once; it is not one of the GPUs stitchc sizes these kernels for (sm_80 and "
                  "sm_90 parts with 64 or more SMs): run with --backend emu or report the GPU",
                  k.name, blocks, prop_.name, prop_.multiProcessorCount, resident));
  }

  void enqueue() {
    for (size_t i = 0; i < m_.steps.size(); ++i) enqueue_step(i);
  }

  void enqueue_step(size_t i) {
    {
      const StepDesc& s = m_.steps[i];
      switch (s.op) {
        case StepDesc::kKernel: {
          const KernelDesc& k = m_.kernels[s.kernel];
          cudaError_t e;
          if (k.cooperative) {  // a launch attribute, so stream capture records it in the graph node
            cudaLaunchConfig_t cfg{};
            cfg.gridDim = dim3(k.grid[0], k.grid[1], k.grid[2]);
            cfg.blockDim = dim3(k.block[0], k.block[1], k.block[2]);
            cfg.dynamicSmemBytes = static_cast<size_t>(k.smem);
            cfg.stream = stream_;
            cudaLaunchAttribute attr{};
            attr.id = cudaLaunchAttributeCooperative;
            attr.val.cooperative = 1;
            cfg.attrs = &attr;
            cfg.numAttrs = 1;
            e = cudaLaunchKernelExC(&cfg, reinterpret_cast<const void*>(kernels_[s.kernel]),
                                    args_[i].pointers.data());
          } else {
            e = cudaLaunchKernel(reinterpret_cast<const void*>(kernels_[s.kernel]),
                                 dim3(k.grid[0], k.grid[1], k.grid[2]),
                                 dim3(k.block[0], k.block[1], k.block[2]), args_[i].pointers.data(),
                                 static_cast<size_t>(k.smem), stream_);
          }
          if (e != cudaSuccess) fail(3, fmt::format("{}: launch failed: {}", m_.step_text(i), cudaGetErrorString(e)));
          break;
        }
        case StepDesc::kGemm:
          gemm(s, i);
          break;
        case StepDesc::kConv:
        case StepDesc::kConvTranspose:
          run_conv(cudnn_, s, conv_plans_.at(i), addr_, conv_ws_);
          break;
        case StepDesc::kCopy:
          CHECK(cudaMemcpyAsync(ptr(s.dst), ptr(s.src), static_cast<size_t>(s.bytes), cudaMemcpyDeviceToDevice, stream_));
          break;
      }
    }
  }

  // cuBLAS's compute type: float64 for f64; float32 for f32 operands, or TF32 tensor cores where
  // the artifact asks (--tf32); half types accumulate in float32 on their own tensor cores.
  cublasComputeType_t compute_type(const std::string& dtype) const {
    if (dtype == "f64") return CUBLAS_COMPUTE_64F;
    return dtype == "f32" && m_.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }

  const ModelData& m_;
  bool use_graph_ = true;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  void *arena_ = nullptr, *weights_ = nullptr, *cublas_ws_ = nullptr, *conv_ws_ = nullptr;
  size_t cublas_ws_bytes_ = 0, conv_ws_bytes_ = 0;
  std::vector<uint8_t*> inputs_, outputs_;
  std::vector<void*> addr_;       // every buffer's device address
  std::vector<LaunchArgs> args_;  // per kernel step
  std::vector<void*> allocations_;
  cudaLibrary_t library_ = nullptr;
  void* fault_dev_ = nullptr;       // the session's fault word (check_faults)
  uint64_t* fault_host_ = nullptr;  // pinned: where each run copies it
  std::vector<cudaKernel_t> kernels_;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  std::map<size_t, ConvPlan> conv_plans_;  // by step index
  std::vector<cudaEvent_t> events_;        // profiling: one before the first step and one after each
  std::map<size_t, LtPlan> lt_plans_;  // by step index
  std::map<size_t, std::pair<const void**, int64_t>>
      pointer_arrays_;  // by step index: B, A, C pointers; the batch
  cublasLtHandle_t lt_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
};

}  // namespace

std::unique_ptr<BackendImpl> make_cuda_backend(const ModelData& m, bool use_graph) {
  return std::make_unique<CudaBackend>(m, use_graph);
}

}  // namespace stitch::rt
