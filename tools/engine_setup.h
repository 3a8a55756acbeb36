// Building an engine from the command line's model options: what `tunableop llm` and
// `tunableop serve` share (the model named by --model, its device and tensor parallelism,
// TunableOp's --tune/--no-tune, the description printed before a run, the tokenizer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "llm/engine.h"
#include "llm/random_model.h"
#include "llm/text/tokenizer.h"
#include "tunableop/context.h"

namespace tunableop::cli {

// --tune: TunableOp on with tuning; --no-tune: off (Default everywhere: the seed's untuned
// baseline); neither: the environment decides. verbose >= 0 overrides TUNABLEOP_VERBOSE.
void apply_tunableop_flags(Context& ctx, bool tune, bool no_tune, int verbose);

// The engine of `spec` on ctx's device: the CPU (weights loaded or generated here; `on_cpu_weights`,
// when given, sees them first: --save-model), CUDA, or `tp` ranks of either.
StatusOr<std::unique_ptr<llm::Engine>> build_engine(
    const llm::ModelSpec& spec, uint64_t model_seed, int64_t layers, int tp, const llm::EngineOptions& options,
    Context& ctx, const std::function<Status(const llm::ModelWeights&)>& on_cpu_weights = {});

// "builtin:tiny (llama, 4 layers, hidden 512, 8 heads / 2 kv heads, vocab 8192, 19.5M parameters)"
std::string describe_model(const std::string& name, const llm::ModelConfig& c);

// DIR's tokenizer, refused when it has more pieces than the model's vocabulary (another
// model's tokenizer). `model` is the --model argument, for messages.
StatusOr<std::unique_ptr<llm::Tokenizer>> load_model_tokenizer(const llm::ModelSpec& spec, const std::string& model,
                                                               int64_t vocab_size);

}  // namespace tunableop::cli
