// `tunableop llm --dtype`: the element types an engine computes in, and the combinations refused
// before anything loads (docs/llm.md, "FP8").
//   bf16, fp32   the CUDA engine's element type (the CPU engine computes in fp32 and ignores it);
//   fp8          CUDA, one GPU: e4m3 projections with bf16 around them (EngineOptions::fp8), the
//                lm_head bf16;
//   fp8-all      as fp8, the lm_head e4m3 too.
#pragma once

#include <string>

#include "llm/engine.h"
#include "tunableop/status.h"

namespace tunableop::llm {

inline constexpr const char* kEngineDtypes[] = {"bf16", "fp32", "fp8", "fp8-all"};

struct EngineDtypeRequest {
  std::string dtype;        // one of kEngineDtypes
  bool cuda = false;        // --device cuda
  int tp = 1;               // --tp
  bool save_model = false;  // --save-model given
};

// Sets o->dtype and o->fp8; an unsupported combination fails naming the option.
Status apply_engine_dtype(const EngineDtypeRequest& r, EngineOptions* o);

// Engines other than the one-GPU CUDA one refuse fp8 options (`engine`: "the CPU engine", ...).
Status refuse_fp8(const EngineOptions& o, const char* engine);

}  // namespace tunableop::llm
