// Kernels with the bugs the emulation layer must catch. Each is valid CUDA that compiles with
// nvcc; each is wrong at run time.
#include <cuda_runtime.h>

// Reverses each block's slice through shared memory but forgets the barrier between the
// write and the read: the result depends on thread scheduling.
__global__ void reverse_missing_barrier(const float* __restrict__ in, float* __restrict__ out) {
  __shared__ float tile[1024];
  const int base = blockIdx.x * blockDim.x;
  tile[threadIdx.x] = in[base + threadIdx.x];
  // __syncthreads() missing here
  out[base + threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
}

// Half the block waits at one barrier, the other half at another.
__global__ void divergent_barrier(float* out) {
  if (threadIdx.x < blockDim.x / 2) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2.0f;
    __syncthreads();
  }
}

// Threads past n leave before a barrier the others wait at.
__global__ void exit_before_barrier(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[1024];
  if (static_cast<int>(threadIdx.x) >= n) return;
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = tile[n - 1 - threadIdx.x];
}

// A full-warp mask in a block whose last warp is partial (launch with 48 threads).
__global__ void shuffle_absent_lanes(float* out) {
  const float v = static_cast<float>(threadIdx.x);
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 1);
}

// Every lane calls the shuffle, but the mask names only the lower half of the warp.
__global__ void shuffle_mask_excludes_caller(float* out) {
  const float v = static_cast<float>(threadIdx.x);
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, v, 0);
}

// Lanes 0-15 wait in a full-warp shuffle while lanes 16-31 wait at __syncthreads.
__global__ void warp_deadlock(float* out) {
  float v = static_cast<float>(threadIdx.x);
  if (threadIdx.x % 32 < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  else __syncthreads();
  out[threadIdx.x] = v;
}

// Waits for a flag nobody sets: hangs on a GPU too.
__global__ void spin_forever(const volatile int* flag, float* out) {
  while (*flag == 0) {
  }
  out[threadIdx.x] = 1.0f;
}

__device__ float deep(int depth, float x) {
  volatile float scratch[2048];  // 8 KiB per level
  scratch[depth % 2048] = x;
  if (depth == 0) return scratch[0];
  return deep(depth - 1, x + 1.0f) + scratch[depth % 2048];
}

// Recursion deeper than any thread's stack.
__global__ void stack_overflow(float* out, int depth) { out[threadIdx.x] = deep(depth, 1.0f); }

// Writes one element past the end of the output (n elements, n + blockDim.x threads write).
__global__ void out_of_bounds_write(float* out, int n) { out[n - 1 + threadIdx.x] = 1.0f; }

// Dereferences a null pointer.
__global__ void null_write(float* out) { out[threadIdx.x] = 1.0f; }

// Calls __trap() on a negative input, as kernels do for states that must never happen.
__global__ void trap_on_negative(const float* in) {
  if (in[threadIdx.x] < 0.0f) __trap();
}

// Every thread writes the same shared variable before the barrier: which write survives
// depends on the order threads run (undefined in CUDA).
__global__ void racy_last_writer(int* out) {
  __shared__ int winner;
  winner = threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = winner;
}
