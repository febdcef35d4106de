// Emulation-layer stand-in for <device_launch_parameters.h> in kernel sources: the builtins come from
// stitch/emu/emu.h. Host-side CUDA runtime calls are not emulated; launch with stitch::emu::launch.
#pragma once
#include "stitch/emu/emu.h"
