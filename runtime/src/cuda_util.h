// Checked CUDA, cuBLAS and cuDNN calls for the cuda backend: a failure ends the run with exit
// code 3 and a message naming the call, file and line; and the libraries' type names.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <fmt/format.h>

#include <string>

#include "model.h"

namespace stitch::rt {

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    fail(3, fmt::format("{} failed: {} ({}:{})", call, cudaGetErrorString(e), file, line));
}
inline void check(cublasStatus_t e, const char* call, const char* file, int line) {
  if (e != CUBLAS_STATUS_SUCCESS)
    fail(3, fmt::format("{} failed: {} ({}:{})", call, cublasGetStatusString(e), file, line));
}
inline void check(cudnnStatus_t e, const char* call, const char* file, int line) {
  if (e != CUDNN_STATUS_SUCCESS)
    fail(3, fmt::format("{} failed: {} ({}:{})", call, cudnnGetErrorString(e), file, line));
}
#define CHECK(call) check((call), #call, __FILE__, __LINE__)

inline cudaDataType_t cuda_type(const std::string& t) {
  if (t == "f32") return CUDA_R_32F;
  if (t == "f16") return CUDA_R_16F;
  if (t == "bf16") return CUDA_R_16BF;
  if (t == "f64") return CUDA_R_64F;
  fail(3, fmt::format("no cuBLAS type for {}", t));
}
inline cudnnDataType_t cudnn_type(const std::string& t) {
  if (t == "f32") return CUDNN_DATA_FLOAT;
  if (t == "f16") return CUDNN_DATA_HALF;
  if (t == "bf16") return CUDNN_DATA_BFLOAT16;
  if (t == "f64") return CUDNN_DATA_DOUBLE;
  fail(3, fmt::format("no cuDNN type for {}", t));
}

}  // namespace stitch::rt
