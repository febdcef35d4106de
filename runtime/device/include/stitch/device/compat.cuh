// What generated kernels need that differs between nvcc and the CPU emulation layer.
// Included by every generated `.cu` file; compiles with nvcc and with g++ + stitch/emu/emu.h.
#pragma once

// STITCH_DYNAMIC_SMEM(T, name) declares `T* name`, the block's dynamic shared memory (the
// launch's dynamic_smem_bytes), aligned to 16 bytes. Use it instead of `extern __shared__`.
#if defined(__STITCH_EMU__)
#define STITCH_DYNAMIC_SMEM(T, name) \
  T* name = reinterpret_cast<T*>(::stitch::emu::detail::t_block->dynamic_smem)
#else
#define STITCH_DYNAMIC_SMEM(T, name)                                    \
  extern __shared__ __align__(16) unsigned char stitch_dynamic_smem_[]; \
  T* name = reinterpret_cast<T*>(stitch_dynamic_smem_)
#endif
