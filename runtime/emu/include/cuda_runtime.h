// Emulation-layer stand-in for <cuda_runtime.h> in kernel sources: the builtins come from
// stitch/emu/emu.h. Host-side CUDA runtime calls are not emulated; launch with stitch::emu::launch.
#pragma once
#include "stitch/emu/emu.h"
