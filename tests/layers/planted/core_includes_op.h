// Planted: core including an op's public header.
#include "tunableop/gemm.h"
