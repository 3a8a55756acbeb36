// The tile configurations compiled per head dim: X(head_dim, rows, keys, warps, stages).
// One list feeds the kernel instantiations (flash_<dtype>_d<D>.cu), the launch switch and the
// candidate names, so they cannot drift apart. Register budget per thread (fp32 accumulators):
// O = rows/warps * head_dim / 32, S = rows/warps * keys / 32, Q fragments when kept in
// registers rows/warps * head_dim / 64.
#pragma once

// clang-format off
#define TUNABLEOP_FLASH_CONFIGS_D64(X) \
  X(64, 128, 64, 4, 2)   /* 32 rows per warp, Q in registers */ \
  X(64, 128, 64, 8, 3)   \
  X(64, 64, 64, 4, 2)    \
  X(64, 64, 128, 4, 2)   \
  X(64, 64, 64, 4, 4)

#define TUNABLEOP_FLASH_CONFIGS_D128(X) \
  X(128, 128, 64, 8, 2)  \
  X(128, 128, 64, 8, 3)  \
  X(128, 64, 64, 4, 2)   \
  X(128, 128, 32, 8, 3)  \
  X(128, 128, 64, 4, 2)  /* 32 rows per warp, Q re-read from shared memory */ \
  X(128, 128, 32, 4, 2)  /* the same with half the score registers */ \
  X(128, 64, 64, 4, 3)

#define TUNABLEOP_FLASH_CONFIGS_D256(X) \
  X(256, 64, 32, 4, 2)   \
  X(256, 128, 32, 8, 2)  \
  X(256, 64, 64, 4, 2)   \
  X(256, 64, 32, 4, 3)
// clang-format on
