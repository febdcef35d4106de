// Emulation-layer stand-in for <cooperative_groups/reduce.h>; reduce lives in cooperative_groups.h.
#pragma once
#include "cooperative_groups.h"
