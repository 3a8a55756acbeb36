// Planted: a cuBLASLt file including a header of the kernels subfolder.
#include "backends/cuda/common/cuda_util.h"
#include "backends/cuda/kernels/pad_ld.h"
