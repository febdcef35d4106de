#include "cuda_conv.h"

#include "cuda_util.h"

namespace stitch::rt {
namespace {

// The transposed convolution's algorithm: the heuristic's first deterministic one (cuDNN's
// ALGO_0 adds with atomics, so its sums would vary run to run), and its workspace.
void plan_backward_data(cudnnHandle_t h, ConvPlan& p) {
  cudnnConvolutionBwdDataAlgoPerf_t perf[8];
  int found = 0;
  CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.x, p.conv, p.y, 8, &found, perf));
  bool chosen = false;
  for (int i = 0; i < found && !chosen; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) {
      p.data_algo = perf[i].algo;
      chosen = true;
    }
  CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.x, p.conv, p.y, p.data_algo, &p.workspace));
}

}  // namespace

ConvPlan make_conv_plan(cudnnHandle_t h, const StepDesc& s, bool tf32,
                        const std::function<void*(int64_t)>& alloc) {
  const ConvDesc& c = s.conv;
  ConvPlan p;
  const cudnnDataType_t t = cudnn_type(s.dtype);
  // cuDNN wants at least 2 spatial dims: a 1-D convolution gets a leading size-1 axis.
  // A transposed convolution's filter is the forward one's that maps y back to x: [c, m / group].
  const bool transpose = s.op == StepDesc::kConvTranspose;
  std::vector<int> in = {int(c.n), int(c.c)}, out = {int(c.n), int(c.m)},
                   w = transpose ? std::vector<int>{int(c.c), int(c.m / c.group)}
                                 : std::vector<int>{int(c.m), int(c.c / c.group)};
  std::vector<int> pads, strides, dil;
  if (c.in.size() == 1) {
    in.push_back(1), out.push_back(1), w.push_back(1);
    pads.push_back(0), strides.push_back(1), dil.push_back(1);
  }
  for (size_t i = 0; i < c.in.size(); ++i) {
    in.push_back(int(c.in[i])), out.push_back(int(c.out[i])), w.push_back(int(c.kernel[i]));
    pads.push_back(int(c.pads[i])), strides.push_back(int(c.strides[i])), dil.push_back(int(c.dilations[i]));
  }
  auto packed = [](const std::vector<int>& d) {
    std::vector<int> s(d.size(), 1);
    for (size_t i = d.size() - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
    return s;
  };
  CHECK(cudnnCreateTensorDescriptor(&p.x));
  CHECK(cudnnCreateTensorDescriptor(&p.y));
  CHECK(cudnnCreateFilterDescriptor(&p.w));
  CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  CHECK(cudnnSetTensorNdDescriptor(p.x, t, int(in.size()), in.data(), packed(in).data()));
  CHECK(cudnnSetTensorNdDescriptor(p.y, t, int(out.size()), out.data(), packed(out).data()));
  CHECK(cudnnSetFilterNdDescriptor(p.w, t, CUDNN_TENSOR_NCHW, int(w.size()), w.data()));
  CHECK(cudnnSetConvolutionNdDescriptor(
      p.conv, int(pads.size()), pads.data(), strides.data(), dil.data(), CUDNN_CROSS_CORRELATION,
      t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16 ? CUDNN_DATA_FLOAT : t));
  CHECK(cudnnSetConvolutionGroupCount(p.conv, int(c.group)));
  // cuDNN's default math lets float32 convolutions run on TF32 tensor cores; FMA math keeps them
  // in float32 unless the artifact asks for TF32 (--tf32). Half types keep their tensor cores.
  CHECK(cudnnSetConvolutionMathType(p.conv, s.dtype == "f32" && !tf32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
  if (transpose) {
    plan_backward_data(h, p);
    return p;
  }
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int found = 0;
  CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, 8, &found, perf));
  for (int i = 0; i < found; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      p.algo = perf[i].algo;
      break;
    }
  if (c.has_epilogue()) {
    // cudnnConvolutionBiasActivationForward: y = act(conv(x) + alpha2 z + bias), act ReLU or the
    // identity; the identity runs only with the implicit precomputed GEMM algorithm (cuDNN's API
    // reference), and the call always takes a bias (zeros where the Conv has none). Where that
    // algorithm does not take this convolution, a residual without ReLU is added after it.
    p.fused = true;
    if (!c.relu) {
      size_t ws = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                                  &ws) == CUDNN_STATUS_SUCCESS)
        p.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      else
        p.fused = false;
    }
    if (p.fused) {
      CHECK(cudnnCreateActivationDescriptor(&p.act));
      CHECK(cudnnSetActivationDescriptor(p.act, c.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                         CUDNN_PROPAGATE_NAN, 0.0));
    }
  }
  CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, p.conv, p.y, p.algo, &p.workspace));
  if (c.has_bias || p.fused) {
    std::vector<int> b(out.size(), 1);
    b[1] = int(c.m);
    CHECK(cudnnCreateTensorDescriptor(&p.bias));
    CHECK(cudnnSetTensorNdDescriptor(p.bias, t, int(b.size()), b.data(), packed(b).data()));
  }
  if (p.fused && !c.has_bias) {
    const int64_t bytes = c.m * (s.dtype == "f16" ? 2 : 4);
    p.zero_bias = alloc(bytes);
    CHECK(cudaMemset(p.zero_bias, 0, static_cast<size_t>(bytes)));
  }
  return p;
}

void destroy_conv_plan(ConvPlan& p) {
  cudnnDestroyTensorDescriptor(p.x);
  cudnnDestroyTensorDescriptor(p.y);
  if (p.bias) cudnnDestroyTensorDescriptor(p.bias);
  if (p.act) cudnnDestroyActivationDescriptor(p.act);
  cudnnDestroyFilterDescriptor(p.w);
  cudnnDestroyConvolutionDescriptor(p.conv);
}

void run_conv(cudnnHandle_t h, const StepDesc& s, const ConvPlan& p, const std::vector<void*>& addr,
              void* workspace) {
  auto ptr = [&](int id) { return addr[static_cast<size_t>(id)]; };
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool dbl = s.dtype == "f64";
  const void* one = dbl ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : &zero_f;
  if (s.op == StepDesc::kConvTranspose) {
    CHECK(cudnnConvolutionBackwardData(h, one, p.w, ptr(s.args[1]), p.x, ptr(s.args[0]), p.conv, p.data_algo,
                                       workspace, p.workspace, zero, p.y, ptr(s.args[2])));
    return;
  }
  if (p.fused) {
    // z is read only with alpha2 1 (a residual); else y stands in for it, unread.
    void* y = ptr(s.args[2]);
    void* z = s.conv.residual ? ptr(s.args.back()) : y;
    const void* bias = s.conv.has_bias ? ptr(s.args[3]) : p.zero_bias;
    CHECK(cudnnConvolutionBiasActivationForward(h, one, p.x, ptr(s.args[0]), p.w, ptr(s.args[1]), p.conv,
                                                p.algo, workspace, p.workspace, s.conv.residual ? one : zero,
                                                p.y, z, p.bias, bias, p.act, p.y, y));
    return;
  }
  CHECK(cudnnConvolutionForward(h, one, p.x, ptr(s.args[0]), p.w, ptr(s.args[1]), p.conv, p.algo, workspace,
                                p.workspace, zero, p.y, ptr(s.args[2])));
  if (s.conv.has_bias) CHECK(cudnnAddTensor(h, one, p.bias, ptr(s.args[3]), one, p.y, ptr(s.args[2])));
  if (s.conv.residual)  // a residual the fused call does not take (see make_conv_plan)
    CHECK(cudnnAddTensor(h, one, p.y, ptr(s.args.back()), one, p.y, ptr(s.args[2])));
}

}  // namespace stitch::rt
