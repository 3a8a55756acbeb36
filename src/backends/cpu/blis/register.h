// BLIS provider: Gemm_Blis_t<N> candidates (fp32, fp64) for 1, half and all cores.
#pragma once

#include <string>
#include <vector>

#include "tunableop/registry.h"

namespace tunableop {

// Loads BLIS (BlisLibrary::default_paths) and registers its candidates and the BLIS_VERSION
// validator; when it cannot be loaded, registers nothing and adds one note.
void register_blis(Registry& r);
// The same from explicit paths (first that loads wins); tests use it to simulate absence.
void register_blis_from(Registry& r, const std::vector<std::string>& paths);

}  // namespace tunableop
