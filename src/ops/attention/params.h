// AttentionParams and AttentionOperands live in the public header (the Attention op's face);
// this name stays for the kernels and tests that include it.
#pragma once

#include "tunableop/attention.h"
