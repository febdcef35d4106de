// The cuda backend's convolution steps through cuDNN: a conv step's descriptors and algorithm (a
// forward convolution, or cuDNN's fused call with a bias, residual and ReLU), or a conv_transpose
// step's (a backward-data convolution), made once per session, and the calls that run them.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "model.h"

namespace stitch::rt {

// cuDNN descriptors of one convolution step, made once per session.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t act = nullptr;  // the fused call's activation
  void* zero_bias = nullptr;                  // the fused call's bias where the Conv has none
  bool fused = false;                         // the step runs cudnnConvolutionBiasActivationForward
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  // a conv_transpose step: cudnnConvolutionBackwardData with x as its dy and y as its dx
  cudnnConvolutionBwdDataAlgo_t data_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  size_t workspace = 0;
};

// The plan of conv or conv_transpose step `s` (float32 ones on TF32 tensor cores when `tf32`);
// `alloc` gives device memory that lives as long as the session (a fused call's zero bias).
// Its workspace is p.workspace bytes.
ConvPlan make_conv_plan(cudnnHandle_t h, const StepDesc& s, bool tf32,
                        const std::function<void*(int64_t)>& alloc);
void destroy_conv_plan(ConvPlan& p);

// Enqueues step `s` on h's stream: `addr` every buffer's device address, `workspace` at least
// p.workspace bytes.
void run_conv(cudnnHandle_t h, const StepDesc& s, const ConvPlan& p, const std::vector<void*>& addr,
              void* workspace);

}  // namespace stitch::rt
