// `tunableop llm`: a Llama or Gemma model with every GEMM going through tunableop. Two modes:
//   bench     greedy generation of exactly --max-new-tokens, timed like the seed's Example 2
//             (Tokens/second), plus TTFT, TPOT and latency; the default for prompts given as ids.
//   generate  text in, text out: prompts through the model's tokenizer, sampling or greedy,
//             streamed, stopping at EOS; the default for --prompt, --prompt-file, --interactive.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "cli_support.h"
#include "commands.h"
#include "engine_setup.h"
#include "llm/engine.h"
#include "llm/engine_dtype.h"
#include "llm/engine_limits.h"
#include "llm/generate.h"
#include "llm/random_model.h"
#include "llm/text/chat_template.h"
#include "llm/text/generation_loop.h"
#include "llm/text/special_tokens.h"
#include "llm/text/text_session.h"
#include "llm/text/text_stream.h"
#include "llm/text/tokenizer.h"
#include "llm/weights.h"
#include "llm_args.h"
#include "llm_bench_mode.h"
#include "llm_input_limits.h"
#include "llm_tp.h"
#include "tunableop/checked_size.h"
#include "tunableop/in_context.h"
#include "tunableop/safe_file.h"

namespace tunableop::cli {

namespace {

// A synthetic prompt of n tokens (the same ids --prompt-len uses).
// Built before the engine checks its sizes: the prompt's own memory is checked first. `flag`
// names the option that asked for it.
StatusOr<std::vector<int32_t>> synthetic_prompt(int64_t n, int64_t vocab, const char* flag) {
  TUNABLEOP_RETURN_IF_ERROR(
      check_host_allocation(CheckedInt(n) * int64_t(sizeof(int32_t)), fmt::format("{} {}", flag, n)));
  std::vector<int32_t> prompt(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) prompt[size_t(i)] = int32_t((1 + 7919 * i) % vocab);
  return prompt;
}

// "a,b,c" -> integers in [lo, hi]; `flag` and `what` name them in errors.
StatusOr<std::vector<int64_t>> parse_list(const std::string& s, const char* flag, const char* what, int64_t lo,
                                          int64_t hi) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long v = std::stoll(item, &used);
      if (used != item.size() || v < lo || v > hi) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      return Status::invalid_argument(std::string(flag) + ": \"" + item + "\" is not a " + what);
    }
  }
  if (out.empty()) return Status::invalid_argument(std::string(flag) + ": no " + what + "s");
  return out;
}

StatusOr<std::vector<int32_t>> parse_ids(const std::string& s) {
  auto v = parse_list(s, "--prompt-ids", "token id", 0, INT32_MAX);
  if (!v.is_ok()) return v.status();
  return std::vector<int32_t>(v->begin(), v->end());
}

constexpr int64_t kGenerateMaxNew = 256;      // generate mode's --max-new-tokens default
constexpr int64_t kInteractiveMaxSeq = 4096;  // interactive KV cache (prompts of any length)

// --prompt (in order), then --prompt-file's lines (blank lines skipped).
StatusOr<std::vector<std::string>> text_prompts(const LlmArgs& a) {
  std::vector<std::string> texts = a.prompts;
  if (!a.prompt_file.empty()) {
    auto read = read_regular_file(a.prompt_file);  // never blocks on a FIFO; refuses directories
    if (!read.is_ok()) {
      if (read.status().code() == StatusCode::kNotFound)
        return Status::not_found("--prompt-file " + a.prompt_file + ": cannot open");
      return Status(read.status().code(), "--prompt-file " + read.status().message());
    }
    std::istringstream in(*read);
    std::string line;
    size_t before = texts.size();
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) texts.push_back(line);
    }
    if (texts.size() == before) return Status::invalid_argument("--prompt-file " + a.prompt_file + ": no prompts");
  }
  return texts;
}

// --chat: [system,] user -> the template's text with the generation prompt -> ids. The template
// writes its own BOS, so nothing is added here (encode_prompt would add a second).
StatusOr<std::vector<int32_t>> chat_prompt(const llm::ChatTemplate& t, const llm::Tokenizer& tokenizer,
                                           const std::string& system, const std::string& user) {
  std::vector<llm::ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", user});
  auto text = llm::render_chat(t, messages, true);
  if (!text.is_ok()) return text.status();
  auto ids = tokenizer.encode(*text);
  if (!ids.is_ok()) return ids.status();
  if (ids->empty()) return Status::invalid_argument(t.source + ": the chat template rendered an empty prompt");
  return ids;
}

// Options that belong to one mode only are refused in the other, rather than silently ignored.
Status check_mode_options(const LlmArgs& a, bool generate, bool texts) {
  if (a.chat && !texts && !a.interactive) {
    return Status::invalid_argument("--chat takes the user's message from --prompt, --prompt-file or --interactive");
  }
  if (a.o_system->count() && !a.chat)
    return Status::invalid_argument("--system is the chat's system message: add --chat");
  if (texts && (a.o_prompt_ids->count() || a.prompt_len > 0 || !a.prompt_lens.empty())) {
    return Status::invalid_argument(
        "give the prompt as text (--prompt, --prompt-file) or as ids (--prompt-ids, "
        "--prompt-len, --prompt-lens), not both");
  }
  if (!a.prompt_lens.empty() && (a.o_prompt_ids->count() || a.prompt_len > 0)) {
    return Status::invalid_argument("--prompt-lens gives every prompt: no --prompt-ids or --prompt-len with it");
  }
  if (a.kv_cache == "static" && (a.kv_pages > 0)) {
    return Status::invalid_argument("--kv-pages sizes a paged cache: add --kv-cache paged");
  }
  if (generate) {
    if (a.compare || a.total_tokens > 0 || a.json || a.profile_decode > 0 || a.profile_prefill > 0 ||
        a.measure_bandwidth) {
      return Status::invalid_argument(
          "--compare, --total-tokens, --json, --profile-decode, --profile-prefill and --measure-bandwidth measure "
          "fixed-length greedy generation: add --mode bench");
    }
    if (a.interactive && (texts || a.o_prompt_ids->count() || a.prompt_len > 0)) {
      return Status::invalid_argument("--interactive reads its prompts from standard input: give no other prompt");
    }
    if (a.interactive && a.o_batch->count() && a.batch != 1) {
      return Status::invalid_argument("--interactive answers one prompt at a time: --batch must be 1");
    }
    if (a.o_temperature->count() && a.temperature == 0 && (a.o_top_k->count() || a.o_top_p->count())) {
      return Status::invalid_argument("--temperature 0 is greedy: --top-k and --top-p need a temperature > 0");
    }
    return Status::ok();
  }
  if (a.interactive) return Status::invalid_argument("--interactive generates text: it cannot run with --mode bench");
  for (const CLI::Option* o : {a.o_temperature, a.o_top_k, a.o_top_p, a.o_seed}) {
    if (o->count()) {
      return Status::invalid_argument(
          o->get_name() +
          " applies to generation (--prompt, --prompt-file, --interactive or --mode generate); benchmarks are "
          "greedy (the built-in model's weights take --model-seed)");
    }
  }
  if (a.ignore_eos || a.no_echo) {
    return Status::invalid_argument("--ignore-eos and --no-echo apply to generation; benchmarks never stop at EOS");
  }
  return Status::ok();
}

llm::SamplingOptions sampling_options(const LlmArgs& a) {
  llm::SamplingOptions s;
  const bool any = a.o_temperature->count() || a.o_top_k->count() || a.o_top_p->count();
  // --top-k or --top-p alone samples at temperature 1 (as transformers' do_sample does).
  s.temperature = a.o_temperature->count() ? a.temperature : (any ? 1.0 : 0.0);
  s.top_k = a.top_k;
  s.top_p = a.top_p;
  s.seed = a.o_seed->count() ? a.seed : std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  return s;
}

// Text in, text out (or ids in, ids out without a tokenizer): stops at EOS, greedy or sampled.
// Only the generated text goes to stdout; everything else to stderr.
int run_generate(const LlmArgs& a, llm::Engine& engine, Context& ctx, const std::string& model_desc,
                 const llm::Tokenizer* tokenizer, const llm::SpecialTokens& special,
                 const llm::ChatTemplate* chat_template, const std::vector<std::vector<int32_t>>& prompts,
                 const std::vector<std::string>& texts, int64_t max_new) {
  const llm::SamplingOptions sampling = sampling_options(a);
  if (Status st = sampling.validate(); !st.is_ok()) return llm_fail(st);
  const Options opts = ctx.config().snapshot();
  fmt::print(stderr, "Model: {}\nDevice: {}; TunableOp {}\n", model_desc, engine.device_name(),
             opts.enabled ? (opts.tuning ? "on, tuning" : "on, no tuning") : "off (Default GEMMs)");
  if (tokenizer) fmt::print(stderr, "Tokenizer: {}\n", tokenizer->description());
  if (chat_template) fmt::print(stderr, "Chat template: {}\n", chat_template->source);
  fmt::print(stderr, "Special tokens: {}{}; sampling: {}{}\n", special.describe(),
             a.ignore_eos ? " (ignored: --ignore-eos)" : "", sampling.describe(),
             !sampling.greedy() && !a.o_seed->count() ? " (random; --seed repeats it)" : "");

  if (tokenizer) {
    llm::TextOptions to;
    to.max_new_tokens = max_new;
    to.ignore_eos = a.ignore_eos;
    to.sampling = sampling;
    to.echo_prompt = !a.no_echo;
    to.print_ids = a.print_ids;
    to.print_prompt_ids = a.print_prompt_ids;
    llm::TextSession session(engine, *tokenizer, special, to, std::cout, std::cerr);
    const std::string marker = isatty(STDIN_FILENO) ? "> " : "";
    if (a.interactive || chat_template) {
      // A line is a prompt: no longer than a prompt may be (`--interactive < /dev/zero` grew
      // without bound).
      const int64_t max_line = max_prompt_bytes(engine.config().max_position_embeddings);
      LineLimitedInput in(std::cin, max_line);
      Status st;
      if (chat_template)
        st = a.interactive ? session.chat(in.stream(), *chat_template, a.system, marker) : session.run_ids(prompts);
      else
        st = session.interactive(in.stream(), marker);
      if (st.is_ok() && in.too_long())
        st = Status::invalid_argument(fmt::format(
            "--interactive: a line of standard input is longer than {} bytes, the longest prompt this model "
            "and machine can take; stopped there",
            max_line));
      return st.is_ok() ? 0 : llm_fail(st);
    }
    // --batch B with one prompt repeats it; texts then has one entry for B prompts.
    std::vector<std::string> batch_texts = texts;
    if (batch_texts.size() == 1) batch_texts.assign(prompts.size(), texts[0]);
    Status st = session.run(batch_texts);
    return st.is_ok() ? 0 : llm_fail(st);
  }

  // Ids in, ids out: one line of new ids per sequence.
  auto selector = llm::make_token_selector(sampling);
  llm::StopOptions stop{max_new, special.eos, a.ignore_eos};
  auto g = llm::generate_until_stop(engine, prompts, stop, *selector);
  if (!g.is_ok()) return llm_fail(g.status());
  for (const auto& s : g->sequences) fmt::print("{}\n", join_ids(s.tokens));
  fmt::print(stderr, "[{} new tokens in {:.2f} s ({:.1f} tokens/s), first token after {:.1f} ms]\n", g->new_tokens(),
             g->total_s, g->total_s > 0 ? double(g->new_tokens()) / g->total_s : 0.0, g->ttft_s * 1e3);
  return 0;
}

int run_llm(const LlmArgs& a) {
  // Under `mpirun -np N ... --tp N` every process holds one rank; the others follow rank 0, which
  // alone reads prompts and prints (the same arguments fail alike everywhere: rank 0 says why).
  auto said_once = [](const Status& st) { return mpi_launch().rank == 0 ? llm_fail(st) : 2; };
  auto launch = TpLaunch::start("llm", a.tp);
  if (!launch.is_ok()) return said_once(launch.status());
  if (a.tune && a.no_tune) return said_once(Status::invalid_argument("--tune and --no-tune exclude each other"));
  auto spec = llm::parse_model_spec(a.model);
  if (!spec.is_ok()) return said_once(spec.status());
  if ((*launch)->follower()) {
    Context ctx((*launch)->device(a.device == "cuda", a.gpu));
    apply_tunableop_flags(ctx, a.tune, a.no_tune, a.verbose);
    return follow_leader("llm", *spec, a.model_seed, a.layers, ctx, **launch);
  }
  auto cfg = llm::spec_config(*spec, a.layers);
  if (!cfg.is_ok()) return llm_fail(cfg.status());
  auto texts = text_prompts(a);
  if (!texts.is_ok()) return llm_fail(texts.status());
  for (size_t i = 0; i < texts->size(); ++i)  // before tokenizing: its memory grows with the text
    if (Status st = check_prompt_text((*texts)[i], cfg->max_position_embeddings, fmt::format("prompt {}", i + 1));
        !st.is_ok())
      return llm_fail(st);
  if (!a.save_model.empty() && (*launch)->multi_process())
    return llm_fail(
        Status::invalid_argument("--save-model needs the whole model in one process: run it without mpirun"));
  if (!a.save_model.empty())  // before loading: never read a model only to refuse its output
    if (Status st = check_save_model_target(a.save_model, *spec, a.overwrite_model); !st.is_ok()) return llm_fail(st);
  const bool has_text = !texts->empty() || a.interactive;
  const bool generate = a.mode == "auto" ? has_text : a.mode == "generate";
  if (Status st = check_mode_options(a, generate, !texts->empty()); !st.is_ok()) return llm_fail(st);

  // The tokenizer only where text comes in; special tokens where prompts get a BOS or generation
  // may stop at EOS.
  std::unique_ptr<llm::Tokenizer> tokenizer;
  llm::SpecialTokens special;
  if (has_text) {
    if (spec->builtin) {
      return llm_fail(
          Status::invalid_argument(a.model +
                                   " has no tokenizer: text prompts need a Hugging Face model directory "
                                   "with a tokenizer.json or tokenizer.model (prompts as ids: --prompt-ids)"));
    }
    auto t = load_model_tokenizer(*spec, a.model, cfg->vocab_size);
    if (!t.is_ok()) return llm_fail(t.status());
    tokenizer = std::move(t.value());
  }
  if ((generate || has_text) && !spec->builtin) {
    auto s = llm::load_special_tokens(spec->dir, tokenizer.get());
    if (!s.is_ok()) return llm_fail(s.status());
    if (Status st = s->check(cfg->vocab_size); !st.is_ok()) return llm_fail(st);
    special = *s;
  }

  // --chat: each text is a user's message, rendered through the model's template.
  std::optional<llm::ChatTemplate> chat_template;
  if (a.chat) {
    auto t = llm::load_chat_template(spec->dir);
    if (!t.is_ok()) return llm_fail(t.status());
    chat_template = std::move(*t);
  }

  // The prompts as ids: text through the tokenizer, else --prompt-ids or a synthetic --prompt-len.
  std::vector<std::vector<int32_t>> prompts;
  if (!texts->empty()) {
    for (const auto& text : *texts) {
      auto ids = chat_template ? chat_prompt(*chat_template, *tokenizer, a.system, text)
                               : llm::encode_prompt(*tokenizer, special, text);
      if (!ids.is_ok()) return llm_fail(ids.status());
      prompts.push_back(std::move(*ids));
    }
  } else if (!a.prompt_lens.empty()) {
    auto lens = parse_list(a.prompt_lens, "--prompt-lens", "positive length", 1, INT32_MAX);
    if (!lens.is_ok()) return llm_fail(lens.status());
    for (int64_t n : *lens) {
      auto prompt = synthetic_prompt(n, cfg->vocab_size, "--prompt-lens");
      if (!prompt.is_ok()) return llm_fail(prompt.status());
      prompts.push_back(std::move(*prompt));
    }
  } else if (a.prompt_len > 0) {
    auto prompt = synthetic_prompt(a.prompt_len, cfg->vocab_size, "--prompt-len");
    if (!prompt.is_ok()) return llm_fail(prompt.status());
    prompts.push_back(std::move(*prompt));
  } else if (!a.interactive) {
    auto ids = parse_ids(a.prompt_ids);
    if (!ids.is_ok()) return llm_fail(ids.status());
    prompts.push_back(*ids);
  }
  int64_t batch = a.batch;
  if (prompts.size() > 1) {
    if (a.o_batch->count() && a.batch != int64_t(prompts.size())) {
      return llm_fail(Status::invalid_argument(
          fmt::format("--batch {} but {} prompts were given (the batch is the prompts)", a.batch, prompts.size())));
    }
    batch = int64_t(prompts.size());
  } else if (prompts.size() == 1) {
    if (Status st = check_host_allocation(CheckedInt(int64_t(prompts[0].size())) * batch * int64_t(sizeof(int32_t)),
                                          fmt::format("--batch {} prompts of {} tokens", batch, prompts[0].size()));
        !st.is_ok())
      return llm_fail(st);
    prompts.assign(size_t(batch), prompts[0]);  // one prompt repeated (sampling: different answers)
  }
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, int64_t(p.size()));
  if (!(CheckedInt(longest) + a.pad_multiple + a.max_new_tokens).ok())
    return llm_fail(Status::invalid_argument("--pad-multiple and --max-new-tokens are too large to count a sequence"));
  const int64_t padded = llm::round_up(longest, a.pad_multiple);
  int64_t max_new = generate && !a.o_max_new->count() ? kGenerateMaxNew : a.max_new_tokens;
  if (a.total_tokens > 0) {  // the seed's form: a fixed sequence length, prompt included
    max_new = a.total_tokens - padded;
    if (max_new < 1) return llm_fail(Status::invalid_argument("--total-tokens must exceed the padded prompt"));
  }
  llm::EngineOptions eo;
  eo.max_batch = batch;
  eo.pad_multiple = a.pad_multiple;
  // The static cache only needs to hold this run: sizing it to max_position_embeddings would
  // cost gigabytes on the real-shaped models for nothing. Interactive prompts are not known yet.
  if (a.max_seq > 0) {
    eo.max_seq = a.max_seq;
  } else if (a.interactive) {
    eo.max_seq = std::min(cfg->max_position_embeddings, kInteractiveMaxSeq);
  } else {
    eo.max_seq = std::max(padded, longest + max_new);
  }
  eo.cuda_graph = !a.no_cuda_graph;
  eo.prefill_graph = a.prefill_graph;
  eo.prefill_outputs_only = a.last_layer == "outputs";
  eo.pdl = !a.no_pdl;
  eo.step_variant = a.step_variant;
  eo.fusion = a.fusion == "off"  ? llm::EngineOptions::Fusion::kOff
              : a.fusion == "on" ? llm::EngineOptions::Fusion::kOn
                                 : llm::EngineOptions::Fusion::kAuto;
  if (a.profile_decode > 0 && !generate) {
    // The profiled steps come after the benchmark's, on a fresh prefill: room for them.
    eo.max_seq = std::max(eo.max_seq, longest + profile_warmup(max_new) + a.profile_decode);
  }
  if (a.kv_cache == "paged") {
    eo.kv_cache.kind = llm::KvCacheKind::kPaged;
    eo.kv_cache.page_size = a.page_size;
    // Default pool: the pages this run's sequences reach (prompt + new tokens, or the profiled
    // steps), so the memory held is what they use; interactive prompts are not known: room for a
    // full cache.
    eo.kv_cache.pages = a.kv_pages;
    if (a.kv_pages == 0 && !a.interactive && a.page_size > 0) {
      const int64_t profiled = a.profile_decode > 0 && !generate ? profile_warmup(max_new) + a.profile_decode : 0;
      for (const auto& p : prompts) {
        const int64_t positions = int64_t(p.size()) + std::max({int64_t(0), max_new - 1, profiled});
        eo.kv_cache.pages += (positions + a.page_size - 1) / a.page_size;
      }
    }
  } else if (a.o_page_size->count()) {
    return llm_fail(Status::invalid_argument("--page-size sets a paged cache's pages: add --kv-cache paged"));
  }
  if (Status st = llm::apply_engine_dtype({a.dtype, a.device == "cuda", a.tp, !a.save_model.empty()}, &eo); !st.is_ok())
    return llm_fail(st);

  Context ctx((*launch)->device(a.device == "cuda", a.gpu));
  apply_tunableop_flags(ctx, a.tune, a.no_tune, a.verbose);

  // On the CPU, once the weights are in memory (what is available counts them): the whole first
  // prefill must fit before the engine allocates; then --save-model.
  auto on_cpu_weights = [&a, &eo, padded](const llm::ModelWeights& w) -> Status {
    TUNABLEOP_RETURN_IF_ERROR(llm::check_run_fits(w.config, eo, padded, sizeof(float), 0));
    if (!a.save_model.empty()) {
      auto dt = parse_dtype(a.save_dtype);
      if (!dt.is_ok()) return dt.status();
      TUNABLEOP_RETURN_IF_ERROR(llm::save_model(w, a.save_model, *dt));
      fmt::print(stderr, "saved {} to {}\n", w.name, a.save_model);
    }
    return Status::ok();
  };
  // Under `mpirun --tp N` on the CPU: this host's ranks together, before any of them loads.
  auto on_cpu_rank = [&eo, padded](const llm::ModelConfig& rank_config, int ranks_here) -> Status {
    const uint64_t weight_bytes = uint64_t(std::max<int64_t>(rank_config.parameter_count(), 0)) * sizeof(float);
    return llm::check_run_fits(rank_config, eo, padded, sizeof(float), weight_bytes, ranks_here);
  };
  auto built = build_engine(*spec, a.model_seed, a.layers, a.tp, eo, ctx, on_cpu_weights, launch->get(), on_cpu_rank);
  if (!built.is_ok()) return llm_fail(built.status());
  std::unique_ptr<llm::Engine> engine = std::move(built.value());
  const std::string model_desc = describe_model(a.model, engine->config());

  if (a.print_prompt_ids && !(generate && tokenizer)) {  // a text session prints its own
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (i == 0 || prompts[i] != prompts[i - 1]) fmt::print("prompt ids: {}\n", join_ids(prompts[i]));
    }
  }
  int rc = generate ? run_generate(a, *engine, ctx, model_desc, tokenizer.get(), special,
                                   chat_template ? &*chat_template : nullptr, prompts, *texts, max_new)
                    : run_bench(a, *engine, ctx, model_desc, tokenizer.get(), prompts, padded, max_new);
  // Tuned results that could not be saved: said (with the lines) and exit 1.
  if (report_unsaved(ctx, "llm") && rc == 0) rc = 1;
  return rc;
}

}  // namespace

void add_llm_command(CLI::App& app) {
  auto a = std::make_shared<LlmArgs>();
  CLI::App* c = app.add_subcommand(
      "llm",
      "Llama/Gemma inference, every GEMM through tunableop: the seed's Example 2 benchmark (prompts as ids) or text "
      "generation (--prompt, --prompt-file, --interactive)");
  std::string presets;
  for (const auto& p : llm::preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  c->add_option(
       "--model", a->model,
       "Hugging Face model directory (config.json + safetensors [+ tokenizer.json or tokenizer.model for text]) or "
       "builtin:NAME with "
       "random weights (" +
           presets + ")")
      ->capture_default_str();
  c->add_option("--model-seed", a->model_seed, "seed of a built-in model's random weights")->capture_default_str();
  c->add_option("--layers", a->layers, "built-in models: override the number of layers")->check(at_least(0));
  a->o_prompt_ids =
      c->add_option("--prompt-ids", a->prompt_ids, "prompt as comma-separated token ids")->capture_default_str();
  c->add_option("--prompt-len", a->prompt_len, "use a synthetic prompt of this many tokens instead of --prompt-ids")
      ->check(at_least(0));
  c->add_option("--prompt-lens", a->prompt_lens,
                "synthetic prompts of these comma-separated lengths, one sequence each (a batch of different lengths)");
  c->add_option("--prompt", a->prompts,
                "text prompt, through the model's tokenizer (repeat for a batch of different prompts)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  c->add_option("--prompt-file", a->prompt_file, "text prompts, one per line, generated as one batch");
  c->add_flag("--interactive", a->interactive,
              "read a prompt per line from standard input and stream each answer, until end of input");
  c->add_flag("--chat", a->chat,
              "treat each prompt as the user's message and render it through the model's chat template "
              "(chat_template.jinja or tokenizer_config.json) with the generation prompt; with --interactive, keep "
              "the conversation");
  a->o_system = c->add_option("--system", a->system, "--chat: a system message before the user's");
  c->add_flag("--print-prompt-ids", a->print_prompt_ids,
              "print each prompt's ids (as the model sees them: BOS, chat template) as a line \"prompt ids: a,b,c\"");
  c->add_option("--mode", a->mode,
                "bench: greedy, exactly --max-new-tokens, timed (default for prompts as ids); generate: stop at EOS, "
                "sampling, streaming (default for text prompts)")
      ->check(CLI::IsMember({"auto", "bench", "generate"}))
      ->capture_default_str();
  a->o_max_new = c->add_option("--max-new-tokens", a->max_new_tokens,
                               "bench: tokens generated per sequence (exactly); generate: at most (default " +
                                   std::to_string(kGenerateMaxNew) + ")")
                     ->check(at_least(1))
                     ->capture_default_str();
  a->o_temperature = c->add_option("--temperature", a->temperature,
                                   "generate: sample at this temperature (0 = greedy, the default; 1 when only "
                                   "--top-k/--top-p are given)");
  a->o_top_k = c->add_option("--top-k", a->top_k, "generate: sample among the k most likely tokens (0 = all)");
  a->o_top_p = c->add_option("--top-p", a->top_p, "generate: sample among the most likely tokens holding this mass");
  a->o_seed = c->add_option("--seed", a->seed, "generate: sampling seed (same seed, same tokens; default random)");
  c->add_flag("--ignore-eos", a->ignore_eos, "generate: keep going past EOS to --max-new-tokens");
  c->add_flag("--no-echo", a->no_echo, "generate: print only the continuation, not the prompt before it");
  c->add_option("--total-tokens", a->total_tokens,
                "generate up to this sequence length, padded prompt included (the seed's seq_len = 256)")
      ->check(at_least(0));
  c->add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  c->add_option("--gpu", a->gpu, "CUDA device ordinal")->check(at_least(0))->capture_default_str();
  a->o_batch = c->add_option("--batch", a->batch,
                             "sequences generated together: the prompt repeated (several --prompt: their number)")
                   ->check(at_least(1))
                   ->capture_default_str();
  c->add_flag("--tune", a->tune, "TunableOp on with tuning: unseen GEMMs are tuned and appended to the results file");
  c->add_flag("--no-tune", a->no_tune, "TunableOp off: every GEMM runs Default (the untuned baseline)");
  c->add_flag("--compare", a->compare, "run untuned and tuned alternately in this process and print both");
  c->add_flag("--no-in-context-check", a->no_in_context_check,
              "keep every tuned choice: skip timing the whole generation tuned vs Default after the tuning warm-up");
  c->add_option("--iterations", a->iterations, "timed generations")->check(at_least(1))->capture_default_str();
  c->add_option("--warmup", a->warmup, "untimed generations first (tuning happens here)")
      ->check(at_least(0))
      ->capture_default_str();
  c->add_option("--pad-multiple", a->pad_multiple, "pad prompts to a multiple of this (1 = no padding)")
      ->check(at_least(1))
      ->capture_default_str();
  c->add_option(
       "--max-seq", a->max_seq,
       "KV cache length (default: what this run needs; interactive: up to " + std::to_string(kInteractiveMaxSeq) + ")")
      ->check(at_least(0));
  c->add_flag("--print-ids", a->print_ids, "print the generated ids (bench: of the first sequence), comma-separated");
  c->add_flag("--json", a->json, "print the metrics as one JSON object");
  c->add_option("--dtype", a->dtype,
                "cuda: bf16 or fp32 weights and activations (the CPU computes in fp32); fp8: e4m3 projections, "
                "lm_head bf16; fp8-all: the lm_head e4m3 too (one GPU; docs/llm.md, FP8)")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(llm::kEngineDtypes), std::end(llm::kEngineDtypes))))
      ->capture_default_str();
  c->add_flag("--no-cuda-graph", a->no_cuda_graph, "cuda: run decode steps eagerly instead of replaying a graph");
  c->add_flag("--prefill-graph,!--no-prefill-graph", a->prefill_graph,
              "cuda: replay a prefill captured as a CUDA graph for later prompts of the same shape (static cache, one "
              "GPU; the default; --no-prefill-graph: every prefill eager)");
  c->add_option("--last-layer", a->last_layer,
                "prefill: outputs = the last layer's MLP runs on the rows that get logits only (each prompt's last "
                "token); all = on every prompt row, as the layers before it")
      ->check(CLI::IsMember({"outputs", "all"}))
      ->capture_default_str();
  c->add_option("--decode-loop", a->decode_loop,
                "bench: host = each step's inputs uploaded and its tokens read before the next step is queued; "
                "device = the next step queued first, its inputs advanced on the device (greedy; issue 13); "
                "auto = host")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
  c->add_flag("--compare-decode-loops", a->compare_decode_loops,
              "bench: also time the other decode loop, run by run alternating in this process, and print both");
  c->add_option("--tp", a->tp,
                "tensor parallelism over this many GPUs (--gpu and the next ones; one thread per GPU, all-reduce "
                "tuned like a GEMM) or CPU ranks; under `mpirun -np N`, N: one rank per process (across hosts too)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  c->add_option("--fusion", a->fusion,
                "cuda: fused decode projections (rmsnorm / residual add / gated activation / argmax in the GEMV): "
                "auto = timed against the unfused path when TunableOp is on, on = always, off = never")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  c->add_flag("--no-pdl", a->no_pdl, "cuda: launch the engine's kernels without programmatic dependent launch");
  c->add_option("--step-variant", a->step_variant,
                "cuda: build decode steps as this variant (index; -1 = timed and chosen when tuning; the "
                "choices are printed after a tuned benchmark)")
      ->capture_default_str();
  c->add_option("--profile-decode", a->profile_decode,
                "bench: afterwards, time each kernel of this many decode steps (run eagerly) and print the breakdown")
      ->check(at_least(0));
  c->add_option("--profile-prefill", a->profile_prefill,
                "bench: afterwards, time each kernel of this many prefills (in the benchmark's last mode) and print "
                "the breakdown against the TTFT")
      ->check(at_least(0));
  c->add_flag("--measure-bandwidth", a->measure_bandwidth,
              "bench: measure the device's copy bandwidth in this run and print decode traffic against it");
  c->add_option("--kv-cache", a->kv_cache,
                "static: max_seq positions per sequence allocated up front; paged: pages handed to sequences as they "
                "grow and taken back when they end")
      ->check(CLI::IsMember({"static", "paged"}))
      ->capture_default_str();
  a->o_page_size = c->add_option("--page-size", a->page_size, "paged cache: positions per page (16, 64, 256, ...)")
                       ->check(CLI::Range(int64_t(1), int64_t(4096)))
                       ->capture_default_str();
  c->add_option("--kv-pages", a->kv_pages,
                "paged cache: pages in the pool (default: what this run's sequences reach; interactive: a full cache)")
      ->check(at_least(0));
  c->add_option("--verbose", a->verbose, "override TUNABLEOP_VERBOSE (0-3)")->check(CLI::Range(0, 3));
  c->add_option("--save-model", a->save_model, "also write the model as a Hugging Face directory here (CPU)");
  c->add_option("--save-dtype", a->save_dtype, "dtype of --save-model: fp32, bf16 or fp16")->capture_default_str();
  c->add_flag("--overwrite-model", a->overwrite_model,
              "--save-model may replace a model already in its directory (never the one being read)");
  c->callback([a]() {
    int rc = run_llm(*a);
    if (rc) std::exit(rc);
  });
}

}  // namespace tunableop::cli
