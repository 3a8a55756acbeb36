// oneDNN provider: Gemm_Onednn_t<N> candidates (fp32, and bf16 where the CPU has native bf16)
// for 1, half and all cores. fp64 is not offered: oneDNN has no fp64 GEMM.
#pragma once

#include <string>
#include <vector>

#include "tunableop/registry.h"

namespace tunableop {

// Loads oneDNN (OnednnLibrary::default_paths) and registers its candidates and the
// ONEDNN_VERSION validator; when it cannot be loaded, registers nothing and adds one note.
void register_onednn(Registry& r);
// The same from explicit paths (first that loads wins); tests use it to simulate absence.
void register_onednn_from(Registry& r, const std::vector<std::string>& paths);

}  // namespace tunableop
