// OpenBLAS provider: Gemm_Openblas_t<N> candidates (fp32, fp64) for 1, half and all cores.
#pragma once

#include <string>
#include <vector>

#include "tunableop/registry.h"

namespace tunableop {

// Loads OpenBLAS (OpenblasLibrary::default_paths) and registers its candidates and the
// OPENBLAS_VERSION validator; when it cannot be loaded, registers nothing and adds one note.
void register_openblas(Registry& r);
// The same from explicit paths (first that loads wins); tests use it to simulate absence.
void register_openblas_from(Registry& r, const std::vector<std::string>& paths);

}  // namespace tunableop
