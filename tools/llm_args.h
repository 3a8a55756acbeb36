// `tunableop llm`'s options (llm_command.cc parses them) and what its modes share: the bench mode
// (llm_bench_mode.cc) and the generate mode (llm_command.cc).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tunableop/status.h"

namespace tunableop::cli {

struct LlmArgs {
  std::string model = "builtin:tiny";
  uint64_t model_seed = 0;
  int64_t layers = 0;
  std::string prompt_ids = "1,5,17";
  int64_t prompt_len = 0;
  std::vector<std::string> prompts;  // --prompt, repeatable
  std::string prompt_file;
  bool interactive = false;
  bool chat = false;   // --prompt is the user's message, through the model's chat template
  std::string system;  // --chat: a system message first
  bool print_prompt_ids = false;
  std::string mode = "auto";
  int64_t max_new_tokens = 32;  // bench; generate defaults to kGenerateMaxNew
  int64_t total_tokens = 0;
  std::string device = "cpu";
  int gpu = 0;
  int64_t batch = 1;
  double temperature = 0, top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  bool ignore_eos = false, no_echo = false;
  // Which of the options with defaults were given (CLI11 counts them).
  CLI::Option *o_max_new = nullptr, *o_batch = nullptr, *o_temperature = nullptr, *o_top_k = nullptr,
              *o_top_p = nullptr, *o_seed = nullptr, *o_prompt_ids = nullptr, *o_page_size = nullptr,
              *o_system = nullptr;
  bool tune = false, no_tune = false, compare = false, no_in_context_check = false;
  int iterations = 3;
  int warmup = 1;
  int64_t pad_multiple = 8;
  int64_t max_seq = 0;
  bool print_ids = false, json = false;
  int verbose = -1;
  std::string save_model, save_dtype = "bf16";
  bool overwrite_model = false;
  std::string dtype = "bf16";
  bool no_cuda_graph = false;
  bool prefill_graph = true;
  std::string last_layer = "outputs";
  std::string decode_loop = "auto";
  bool compare_decode_loops = false;
  int tp = 1;  // tensor-parallel ranks (llm_tp.h)
  std::string fusion = "auto";
  bool no_pdl = false;
  int step_variant = -1;
  int profile_decode = 0;
  int profile_prefill = 0;
  bool measure_bandwidth = false;
  std::string prompt_lens;  // synthetic prompts of these lengths, one per sequence
  std::string kv_cache = "static";
  int64_t page_size = 64, kv_pages = 0;
};

// Prints "tunableop llm: <why>" to stderr; the command's exit status for a refused run.
int llm_fail(const Status& s);

// "1,5,17": a sequence of ids as the options and --print-ids write them.
std::string join_ids(const std::vector<int32_t>& ids);

}  // namespace tunableop::cli
