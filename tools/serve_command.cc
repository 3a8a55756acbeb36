// `tunableop serve`: the OpenAI-compatible server (docs/serve.md). Loads the model with a paged
// KV cache, starts the engine runtime (continuous batching, warm-up and tuning before ready),
// answers HTTP, and prints exactly one line on stdout when ready:
//   tunableop serve: ready on http://127.0.0.1:8000 (model builtin:tiny, cpu (fp32), ...)
// Everything else goes to stderr. SIGTERM or SIGINT: stop admitting, let running requests
// finish (cancelling those still running after --drain-grace), stop HTTP, exit 0.
#include <fmt/format.h>
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include "cli_support.h"
#include "commands.h"
#include "engine_setup.h"
#include "llm/engine.h"
#include "llm/random_model.h"
#include "llm/text/chat_template.h"
#include "llm/text/special_tokens.h"
#include "serve/openai/served_model.h"
#ifdef TUNABLEOP_HAVE_HTTPLIB
#include "serve/http/server.h"
#include "serve/runtime.h"
#endif

namespace tunableop::cli {

namespace {

struct ServeArgs {
  std::string model = "builtin:tiny";
  uint64_t model_seed = 0;
  int64_t layers = 0;
  std::string device = "cpu";
  int gpu = 0;
  int tp = 1;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  bool tune = false, no_tune = false;
  int verbose = -1;
  int64_t max_running = 0, max_waiting = 1024, prefill_tokens = 0, decode_bucket_step = 0;
  int64_t page_size = 64, kv_pages = 0, max_seq = 0;
  std::string dtype = "bf16";
  std::string served_model_name;
  int http_threads = 0;
  double kv_reserve_gib = 12;
  double drain_grace_s = 30;
  double http_timeout_s = 10;
};

constexpr int64_t kDefaultMaxSeq = 4096;         // positions per sequence unless --max-seq
constexpr int64_t kDefaultMaxRunningCuda = 256;  // sequences decoded together
constexpr int64_t kDefaultMaxRunningCpu = 16;
// Prompt tokens per prefill pass: a GPU's GEMMs reach their rate around 2k rows; on a CPU a pass
// that long holds every running sequence for seconds, and start-up tunes each pass size.
constexpr int64_t kDefaultPrefillTokensCuda = 2048, kDefaultPrefillTokensCpu = 256;
constexpr int64_t kProbeThreads = 16;  // /health, /metrics beside a full queue
constexpr int64_t kMaxHttpThreads = 8192;

int fail(const Status& s) {
  fmt::print(stderr, "tunableop serve: {}\n", printable(s.to_string()));
  return 2;
}

#ifdef TUNABLEOP_HAVE_HTTPLIB

// The served model's tokenizer and special tokens: a directory's tokenizer.model when there is
// one (text prompts and stop strings), none otherwise (prompts as token ids only).
struct ModelText {
  std::shared_ptr<const llm::Tokenizer> tokenizer;
  llm::SpecialTokens special;
};

StatusOr<ModelText> load_text(const ServeArgs& a, const llm::ModelSpec& spec, int64_t vocab) {
  ModelText t;
  if (spec.builtin) return t;
  auto tok = load_model_tokenizer(spec, a.model, vocab);
  if (tok.is_ok()) {
    t.tokenizer = std::move(tok.value());
  } else if (tok.status().code() == StatusCode::kNotFound || tok.status().code() == StatusCode::kUnsupported) {
    fmt::print(stderr, "tunableop serve: no tokenizer ({}): prompts as token ids only\n", tok.status().message());
  } else {
    return tok.status();
  }
  auto special = llm::load_special_tokens(spec.dir, t.tokenizer.get());
  if (!special.is_ok()) return special.status();
  TUNABLEOP_RETURN_IF_ERROR(special->check(vocab));
  t.special = *special;
  return t;
}

// The chat template of the model (llm/text/chat_template.h), rendered for /v1/chat/completions
// as transformers' apply_chat_template renders it. None (a built-in model, a base model, no
// tokenizer): chat requests answer 400 naming the missing template. A template that is there
// but broken is an error at startup, naming the file and the line.
StatusOr<serve::openai::ChatTemplate> chat_template_of(const llm::ModelSpec& spec, const ModelText& text) {
  if (spec.builtin || !text.tokenizer) return serve::openai::ChatTemplate{};
  auto t = llm::load_chat_template(spec.dir);
  if (!t.is_ok()) {
    if (t.status().code() == StatusCode::kNotFound) return serve::openai::ChatTemplate{};
    return t.status();
  }
  return serve::openai::rendering(std::make_shared<const llm::ChatTemplate>(std::move(*t)));
}

int run_serve(const ServeArgs& a) {
  // Under `mpirun -np N ... --tp N` every process holds one rank; rank 0 serves HTTP, the others
  // follow its engine's calls (the same arguments fail alike everywhere: rank 0 says why).
  auto said_once = [](const Status& st) { return mpi_launch().rank == 0 ? fail(st) : 2; };
  auto launch = TpLaunch::start("serve", a.tp);
  if (!launch.is_ok()) return said_once(launch.status());
  if (a.tune && a.no_tune) return said_once(Status::invalid_argument("--tune and --no-tune exclude each other"));
  auto spec = llm::parse_model_spec(a.model);
  if (!spec.is_ok()) return said_once(spec.status());
  if ((*launch)->follower()) {
    Context ctx((*launch)->device(a.device == "cuda", a.gpu));
    apply_tunableop_flags(ctx, /*tune=*/!a.no_tune, a.no_tune, a.verbose);
    return follow_leader("serve", *spec, a.model_seed, a.layers, ctx, **launch);
  }
  auto cfg = llm::spec_config(*spec, a.layers);
  if (!cfg.is_ok()) return fail(cfg.status());
  const bool cuda = a.device == "cuda";
  llm::EngineOptions eo;
  eo.max_batch = a.max_running > 0 ? a.max_running : cuda ? kDefaultMaxRunningCuda : kDefaultMaxRunningCpu;
  eo.decode_bucket_step = a.decode_bucket_step;
  eo.max_seq = a.max_seq > 0 ? a.max_seq : std::min(cfg->max_position_embeddings, kDefaultMaxSeq);
  eo.kv_cache.kind = llm::KvCacheKind::kPaged;
  eo.kv_cache.page_size = a.page_size;
  eo.kv_cache.pages = a.kv_pages;
  // On a GPU the pool fills what the weights leave, less what the passes and start-up tuning
  // need (their buffers, cuBLAS workspaces, tuning copies), capped at --max-running full-length
  // sequences.
  if (cuda && a.kv_pages == 0) eo.kv_cache.fill_free_memory_less = int64_t(a.kv_reserve_gib * double(int64_t(1) << 30));
  if (Status st = eo.kv_cache.validate(); !st.is_ok()) return fail(st);
  if (cuda) {
    auto dt = parse_dtype(a.dtype);
    if (!dt.is_ok()) return fail(dt.status());
    eo.dtype = *dt;
  }

  // SIGTERM and SIGINT are taken by sigwait() below: blocked here, before any thread starts, so
  // that every thread inherits the mask and none is interrupted by them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Listening first: a port in use fails at once, and /health answers 503 while the model loads.
  serve::http::HttpOptions ho;
  ho.host = a.host;
  ho.port = a.port;
  ho.api_key = a.api_key;
  // One thread per connection: enough for every request the runtime may hold (running and
  // waiting) plus a few probes, so that its queue limit (429) is what bounds the load, not a
  // backlog of accepted connections inside cpp-httplib.
  ho.threads = a.http_threads > 0
                   ? a.http_threads
                   : int(std::min<int64_t>(eo.max_batch + a.max_waiting + kProbeThreads, kMaxHttpThreads));
  ho.read_timeout = ho.write_timeout = std::chrono::milliseconds(int64_t(a.http_timeout_s * 1000));
  serve::http::HttpServer http(ho);
  if (Status st = http.start(); !st.is_ok()) return fail(st);

  Context ctx((*launch)->device(cuda, a.gpu));
  // Tuning is the server's default (off the request path: docs/serve.md, "Tuning policy");
  // --no-tune: TunableOp off, every problem runs its Default.
  apply_tunableop_flags(ctx, /*tune=*/!a.no_tune, a.no_tune, a.verbose);
  auto engine = build_engine(*spec, a.model_seed, a.layers, a.tp, eo, ctx, {}, launch->get());
  if (!engine.is_ok()) return fail(engine.status());
  const std::string desc = describe_model(a.model, (*engine)->config());
  const std::string device_name = (*engine)->device_name();
  fmt::print(stderr, "Model: {}\nDevice: {}\n", desc, device_name);
  auto text = load_text(a, *spec, (*engine)->config().vocab_size);
  if (!text.is_ok()) return fail(text.status());

  serve::RuntimeOptions ro;
  ro.max_running = eo.max_batch;
  ro.max_waiting = a.max_waiting;
  ro.prefill_tokens = a.prefill_tokens > 0 ? a.prefill_tokens
                      : cuda               ? kDefaultPrefillTokensCuda
                                           : kDefaultPrefillTokensCpu;
  ro.tune = !a.no_tune;
  ro.eos_ids = text->special.eos;
  ro.seed = uint64_t(std::time(nullptr));
  ro.progress = [](const std::string& line) { fmt::print(stderr, "tunableop serve: {}\n", line); };
  auto backend = serve::make_runtime(std::move(engine.value()), ctx, ro);
  if (!backend.is_ok()) return fail(backend.status());

  serve::openai::ServedModel model;
  model.name = a.served_model_name.empty() ? a.model : a.served_model_name;
  model.created = int64_t(std::time(nullptr));
  model.vocab_size = (*backend)->vocab_size();
  model.max_context = (*backend)->max_context();
  model.tokenizer = text->tokenizer;
  model.special = text->special;
  auto chat_template = chat_template_of(*spec, *text);
  if (!chat_template.is_ok()) return fail(chat_template.status());
  model.chat_template = std::move(*chat_template);
  http.attach(**backend, model);

  const serve::RuntimeStats st = (*backend)->stats();
  fmt::print(
      "tunableop serve: ready on http://{}:{} (model {}, {}, context {} tokens, {} KV pages of {}, {} "
      "running at most)\n",
      a.host, http.port(), model.name, device_name, model.max_context, st.kv_pages_total, st.kv_page_size,
      ro.max_running);
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  fmt::print(stderr, "tunableop serve: {}: draining (grace {} s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             a.drain_grace_s);
  (*backend)->drain(std::chrono::milliseconds(int64_t(a.drain_grace_s * 1000)));
  http.stop();
  backend->reset();
  int rc = 0;
  if (report_unsaved(ctx, "serve")) rc = 1;
  fmt::print(stderr, "tunableop serve: stopped\n");
  return rc;
}

#else

int run_serve(const ServeArgs&) {
  return fail(Status::unsupported(
      "this build has no HTTP server: install libcpp-httplib-dev (scripts/install-deps.sh) and rebuild"));
}

#endif

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* c = app.add_subcommand(
      "serve", "An OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions) with continuous batching");
  std::string presets;
  for (const auto& p : llm::preset_names()) presets += (presets.empty() ? "" : ", ") + p;
  c->add_option("--model", a->model,
                "Hugging Face model directory or builtin:NAME with random weights (" + presets + ")")
      ->capture_default_str();
  c->add_option("--model-seed", a->model_seed, "seed of a built-in model's random weights")->capture_default_str();
  c->add_option("--layers", a->layers, "built-in models: override the number of layers")->check(at_least(0));
  c->add_option("--served-model-name", a->served_model_name, "the model's name in the API (default: --model)");
  c->add_option("--device", a->device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  c->add_option("--gpu", a->gpu, "CUDA device ordinal")->check(at_least(0))->capture_default_str();
  c->add_option("--tp", a->tp,
                "tensor parallelism over this many GPUs (or CPU ranks); under `mpirun -np N`, N: one rank per "
                "process, rank 0 serving HTTP")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  c->add_option("--dtype", a->dtype, "cuda: bf16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp32"}))
      ->capture_default_str();
  c->add_option("--host", a->host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  c->add_option("--port", a->port, "port to listen on (0: any free port; the ready line says which)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  c->add_option("--api-key", a->api_key, "require `Authorization: Bearer KEY` on every request");
  c->add_flag("--tune", a->tune, "TunableOp on, tuning off the request path (before ready and when idle): the default");
  c->add_flag("--no-tune", a->no_tune, "TunableOp off: every GEMM runs Default");
  c->add_option("--verbose", a->verbose, "override TUNABLEOP_VERBOSE (0-3)")->check(CLI::Range(0, 3));
  c->add_option("--max-running", a->max_running,
                fmt::format("sequences decoded together at most (default {} on cuda, {} on cpu)",
                            kDefaultMaxRunningCuda, kDefaultMaxRunningCpu))
      ->check(at_least(0));
  c->add_option("--decode-bucket-step", a->decode_bucket_step,
                "decode steps are padded to powers of two up to N, then to multiples of N (default: powers of two "
                "up to --max-running; each size is one CUDA graph and its tuned GEMMs)")
      ->check(at_least(1));
  c->add_option("--max-waiting", a->max_waiting, "queued requests beyond which new ones get 429")
      ->check(at_least(1))
      ->capture_default_str();
  c->add_option("--prefill-tokens", a->prefill_tokens,
                fmt::format("prompt tokens per prefill pass (chunked prefill; default {} on cuda, {} on cpu)",
                            kDefaultPrefillTokensCuda, kDefaultPrefillTokensCpu))
      ->check(at_least(1));
  c->add_option("--page-size", a->page_size, "KV cache positions per page")
      ->check(CLI::Range(int64_t(1), int64_t(4096)))
      ->capture_default_str();
  c->add_option("--kv-pages", a->kv_pages,
                "KV cache pages in the pool (default: CUDA: what the GPU's free memory holds less --kv-reserve-gib, "
                "at most --max-running full-length sequences; CPU: --max-running full-length sequences)")
      ->check(at_least(0));
  c->add_option("--kv-reserve-gib", a->kv_reserve_gib,
                "CUDA, without --kv-pages: GiB of free GPU memory kept out of the KV pool for the passes' buffers and "
                "tuning")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  c->add_option(
       "--max-seq", a->max_seq,
       fmt::format("positions per sequence, prompt and new tokens (default: the model's, at most {})", kDefaultMaxSeq))
      ->check(at_least(0));
  c->add_option("--http-threads", a->http_threads,
                "connections served at once, one thread each (default: --max-running + --max-waiting + 16)")
      ->check(CLI::Range(0, 100000));
  c->add_option("--http-timeout", a->http_timeout_s,
                "seconds a client may stay silent while sending a request, or not read while being answered")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  c->add_option("--drain-grace", a->drain_grace_s,
                "on SIGTERM/SIGINT: seconds running requests get to finish before they are cancelled")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  c->callback([a]() {
    int rc = run_serve(*a);
    if (rc) std::exit(rc);
  });
}

}  // namespace tunableop::cli
