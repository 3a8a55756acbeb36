// `tunableop llm`: greedy generation on a Llama or Gemma model with every GEMM going through
// tunableop, timed like the seed's Example 2 (Tokens/second), plus TTFT, TPOT and latency.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "cli_support.h"
#include "commands.h"
#include "core/checked_size.h"
#include "llm/engine.h"
#include "llm/generate.h"
#include "llm/random_model.h"
#include "llm/weights.h"

namespace tunableop::cli {

namespace {

struct LlmArgs {
  std::string model = "builtin:tiny";
  uint64_t seed = 0;
  int64_t layers = 0;
  std::string prompt_ids = "1,5,17";
  int64_t prompt_len = 0;
  int64_t max_new_tokens = 32;
  int64_t total_tokens = 0;
  std::string device = "cpu";
  int gpu = 0;
  int64_t batch = 1;
  bool tune = false, no_tune = false, compare = false;
  int iterations = 3;
  int warmup = 1;
  int64_t pad_multiple = 8;
  int64_t max_seq = 0;
  bool print_ids = false, json = false;
  int verbose = -1;
  std::string save_model, save_dtype = "bf16";
  std::string dtype = "bf16";
  bool no_cuda_graph = false;
};

StatusOr<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      return Status::invalid_argument("--prompt-ids: \"" + item + "\" is not a token id");
    }
  }
  if (ids.empty()) return Status::invalid_argument("--prompt-ids: no token ids");
  return ids;
}

int fail(const Status& s) {
  fmt::print(stderr, "tunableop llm: {}\n", printable(s.to_string()));
  return 2;
}

int run_llm(const LlmArgs& a) {
  if (a.tune && a.no_tune) return fail(Status::invalid_argument("--tune and --no-tune exclude each other"));
  auto spec = llm::parse_model_spec(a.model);
  if (!spec.is_ok()) return fail(spec.status());
  auto cfg = llm::spec_config(*spec, a.layers);
  if (!cfg.is_ok()) return fail(cfg.status());

  // The prompt: explicit ids, or --prompt-len synthetic ids (for TTFT at a given length).
  std::vector<int32_t> prompt;
  // The prompts are built before the engine checks its sizes: their own memory first.
  const int64_t prompt_tokens = a.prompt_len > 0 ? a.prompt_len : int64_t(a.prompt_ids.size());
  if (Status st = check_host_allocation(CheckedInt(prompt_tokens) * a.batch * int64_t(sizeof(int32_t)),
                                        fmt::format("--batch {} prompts of {} tokens", a.batch, prompt_tokens));
      !st.is_ok())
    return fail(st);
  if (a.prompt_len > 0) {
    for (int64_t i = 0; i < a.prompt_len; ++i) prompt.push_back(int32_t((1 + 7919 * i) % cfg->vocab_size));
  } else {
    auto ids = parse_ids(a.prompt_ids);
    if (!ids.is_ok()) return fail(ids.status());
    prompt = *ids;
  }
  const std::vector<std::vector<int32_t>> prompts(size_t(a.batch), prompt);
  if (!(CheckedInt(int64_t(prompt.size())) + a.pad_multiple).ok() ||
      !(CheckedInt(int64_t(prompt.size())) + a.pad_multiple + a.max_new_tokens).ok())
    return fail(Status::invalid_argument("--pad-multiple and --max-new-tokens are too large to count a sequence"));
  const int64_t padded = llm::round_up(int64_t(prompt.size()), a.pad_multiple);
  int64_t max_new = a.max_new_tokens;
  if (a.total_tokens > 0) {  // the seed's form: a fixed sequence length, prompt included
    max_new = a.total_tokens - padded;
    if (max_new < 1) return fail(Status::invalid_argument("--total-tokens must exceed the padded prompt"));
  }
  llm::EngineOptions eo;
  eo.max_batch = a.batch;
  eo.pad_multiple = a.pad_multiple;
  // The static cache only needs to hold this run: sizing it to max_position_embeddings would
  // cost gigabytes on the real-shaped models for nothing.
  eo.max_seq = a.max_seq > 0 ? a.max_seq : std::max(padded, int64_t(prompt.size()) + max_new);
  eo.cuda_graph = !a.no_cuda_graph;
  if (a.device == "cuda") {
    auto dt = parse_dtype(a.dtype);
    if (!dt.is_ok()) return fail(dt.status());
    eo.dtype = *dt;
  }

  Device dev = a.device == "cuda" ? Device::cuda(a.gpu) : Device::cpu();
  Context ctx(dev);
  if (a.verbose >= 0) (void)ctx.config().set(Setting::kVerbose, a.verbose);
  if (a.tune) {
    (void)ctx.config().set(Setting::kEnabled, true);
    (void)ctx.config().set(Setting::kTuning, true);
  } else if (a.no_tune) {
    (void)ctx.config().set(Setting::kEnabled, false);  // the seed's untuned baseline: Default everywhere
  }

  std::unique_ptr<llm::Engine> engine;
  std::string model_desc;
  if (dev.kind == DeviceKind::kCpu) {
    auto w = llm::load_or_generate(*spec, a.seed, a.layers);
    if (!w.is_ok()) return fail(w.status());
    if (!a.save_model.empty()) {
      auto dt = parse_dtype(a.save_dtype);
      if (!dt.is_ok()) return fail(dt.status());
      if (Status st = llm::save_model(*w, a.save_model, *dt); !st.is_ok()) return fail(st);
      fmt::print(stderr, "saved {} to {}\n", w->name, a.save_model);
    }
    auto shared = std::make_shared<const llm::ModelWeights>(std::move(w.value()));
    auto e = llm::make_cpu_engine(shared, eo, llm::tunableop_linear(ctx), llm::tunableop_gemm(ctx));
    if (!e.is_ok()) return fail(e.status());
    engine = std::move(e.value());
  } else {
    auto e = llm::make_cuda_engine(*spec, a.seed, a.layers, eo, ctx);
    if (!e.is_ok()) return fail(e.status());
    engine = std::move(e.value());
  }
  const llm::ModelConfig& c = engine->config();
  model_desc = fmt::format("{} ({}, {} layers, hidden {}, {} heads / {} kv heads, vocab {}, {:.1f}M parameters)",
                           a.model, llm::architecture_name(c.arch), c.num_layers, c.hidden_size, c.num_heads,
                           c.num_kv_heads, c.vocab_size, double(c.parameter_count()) / 1e6);

  llm::BenchmarkOptions bo{max_new, a.iterations, a.warmup};
  const Options opts = ctx.config().snapshot();
  if (!a.json) {
    fmt::print("Model: {}\n", model_desc);
    fmt::print("Device: {}; batch {}; prompt {} tokens padded to {}; {} new tokens; {} warm-up + {} timed runs\n",
               engine->device_name(), a.batch, prompt.size(), padded, max_new, a.warmup, a.iterations);
  }

  if (a.compare) {
    auto r = llm::run_comparison(*engine, prompts, bo, [&](bool tuned) {
      (void)ctx.config().set(Setting::kEnabled, tuned);
      if (tuned) (void)ctx.config().set(Setting::kTuning, true);
    });
    if (!r.is_ok()) return fail(r.status());
    const double speedup = r->first.tokens_per_s > 0 ? r->second.tokens_per_s / r->first.tokens_per_s : 0;
    if (a.json) {
      fmt::print(
          "{{\"model\": \"{}\", \"device\": \"{}\", \"untuned\": {}, \"tuned\": {}, \"speedup\": {}, "
          "\"results_file\": \"{}\"}}\n",
          a.model, engine->device_name(), llm::report_json(r->first), llm::report_json(r->second), speedup,
          ctx.results_path());
    } else {
      fmt::print("Untuned (TunableOp off: Default GEMMs)\n{}", llm::format_report(r->first));
      fmt::print("Tuned (results file {})\n{}", ctx.results_path(), llm::format_report(r->second));
      fmt::print("Speedup: {:.3f}x tokens/s (tuned / untuned)\n", speedup);
      if (r->first.first_sequence != r->second.first_sequence) {
        fmt::print("Note: tuned and untuned generated different tokens (GEMM rounding differs between solutions)\n");
      }
    }
    if (a.print_ids) {
      std::string ids;
      for (int32_t t : r->second.first_sequence) ids += (ids.empty() ? "" : ",") + std::to_string(t);
      fmt::print("{}\n", ids);
    }
    return report_unsaved(ctx, "llm") ? 1 : 0;
  }

  auto r = llm::run_benchmark(*engine, prompts, bo);
  if (!r.is_ok()) return fail(r.status());
  if (a.json) {
    std::string j = llm::report_json(*r);
    j.pop_back();  // add context to the object
    fmt::print(
        "{}, \"model\": \"{}\", \"device\": \"{}\", \"tunableop_enabled\": {}, \"tuning\": {}, "
        "\"results_file\": \"{}\"}}\n",
        j, a.model, engine->device_name(), opts.enabled, opts.tuning, ctx.results_path());
  } else {
    fmt::print("TunableOp: {}{}\n",
               opts.enabled ? (opts.tuning ? "on, tuning" : "on, no tuning") : "off (Default GEMMs)",
               opts.enabled ? ", results file " + ctx.results_path() : "");
    fmt::print("{}", llm::format_report(*r));
  }
  if (a.print_ids) {
    std::string ids;
    for (int32_t t : r->first_sequence) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    fmt::print("{}\n", ids);
  }
  return report_unsaved(ctx, "llm") ? 1 : 0;
}

}  // namespace

void add_llm_command(CLI::App& app) {
  auto a = std::make_shared<LlmArgs>();
  CLI::App* c = app.add_subcommand(
      "llm", "Greedy generation on a Llama/Gemma model, every GEMM through tunableop (seed Example 2)");
  std::string presets;
  for (const auto& p : llm::preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  c->add_option(
       "--model", a->model,
       "Hugging Face model directory (config.json + safetensors) or builtin:NAME with random weights (" + presets + ")")
      ->capture_default_str();
  c->add_option("--seed", a->seed, "seed of a built-in model's random weights")->capture_default_str();
  c->add_option("--layers", a->layers, "built-in models: override the number of layers")->check(at_least(0));
  c->add_option("--prompt-ids", a->prompt_ids,
                "prompt as comma-separated token ids (text prompts need a tokenizer, "
                "which this engine does not have)")
      ->capture_default_str();
  c->add_option("--prompt-len", a->prompt_len, "use a synthetic prompt of this many tokens instead of --prompt-ids")
      ->check(at_least(0));
  c->add_option("--max-new-tokens", a->max_new_tokens, "tokens generated per sequence (exactly)")
      ->check(at_least(1))
      ->capture_default_str();
  c->add_option("--total-tokens", a->total_tokens,
                "generate up to this sequence length, padded prompt included (the seed's seq_len = 256)")
      ->check(at_least(0));
  c->add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  c->add_option("--gpu", a->gpu, "CUDA device ordinal")->check(at_least(0))->capture_default_str();
  c->add_option("--batch", a->batch, "sequences generated together (the prompt repeated)")
      ->check(at_least(1))
      ->capture_default_str();
  c->add_flag("--tune", a->tune, "TunableOp on with tuning: unseen GEMMs are tuned and appended to the results file");
  c->add_flag("--no-tune", a->no_tune, "TunableOp off: every GEMM runs Default (the untuned baseline)");
  c->add_flag("--compare", a->compare, "run untuned and tuned alternately in this process and print both");
  c->add_option("--iterations", a->iterations, "timed generations")->check(at_least(1))->capture_default_str();
  c->add_option("--warmup", a->warmup, "untimed generations first (tuning happens here)")
      ->check(at_least(0))
      ->capture_default_str();
  c->add_option("--pad-multiple", a->pad_multiple, "pad prompts to a multiple of this (1 = no padding)")
      ->check(at_least(1))
      ->capture_default_str();
  c->add_option("--max-seq", a->max_seq, "KV cache length (default: what this run needs)")->check(at_least(0));
  c->add_flag("--print-ids", a->print_ids, "print the generated ids of the first sequence, comma-separated");
  c->add_flag("--json", a->json, "print the metrics as one JSON object");
  c->add_option("--dtype", a->dtype, "cuda: bf16 or fp32 weights and activations (the CPU computes in fp32)")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  c->add_flag("--no-cuda-graph", a->no_cuda_graph, "cuda: run decode steps eagerly instead of replaying a graph");
  c->add_option("--verbose", a->verbose, "override TUNABLEOP_VERBOSE (0-3)")->check(CLI::Range(0, 3));
  c->add_option("--save-model", a->save_model, "also write the model as a Hugging Face directory here (CPU)");
  c->add_option("--save-dtype", a->save_dtype, "dtype of --save-model: fp32, bf16 or fp16")->capture_default_str();
  c->callback([a]() {
    int rc = run_llm(*a);
    if (rc) std::exit(rc);
  });
}

}  // namespace tunableop::cli
