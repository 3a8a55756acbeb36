// Planted: core including an op's public header, in angle brackets.
#include <tunableop/gemm.h>
