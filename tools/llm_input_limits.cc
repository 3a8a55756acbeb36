#include "llm_input_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "tunableop/checked_size.h"

namespace tunableop::cli {

namespace fs = std::filesystem;

int64_t max_prompt_bytes(int64_t max_positions) {
  const int64_t by_positions = (CheckedInt(std::max<int64_t>(max_positions, 1)) * kMaxBytesPerToken).value();
  const int64_t by_memory =
      int64_t(std::min<uint64_t>(available_host_memory_bytes() / kTokenizerBytesPerByte, uint64_t(INT64_MAX)));
  return std::min(by_positions, by_memory);
}

Status check_prompt_text(std::string_view text, int64_t max_positions, const std::string& what) {
  const int64_t limit = max_prompt_bytes(max_positions);
  if (int64_t(text.size()) <= limit) return Status::ok();
  return Status::invalid_argument(
      fmt::format("{} is {} bytes of text; at most {} fit here ({} bytes for each of the model's {} "
                  "positions; tokenizing takes about {} KiB per byte, and {} of memory is available now)",
                  what, text.size(), limit, kMaxBytesPerToken, max_positions, kTokenizerBytesPerByte / 1024,
                  format_bytes(available_host_memory_bytes())));
}

class LineLimitedInput::Buf : public std::streambuf {
 public:
  Buf(std::streambuf* src, int64_t max_line) : src_(src), max_(max_line) {}
  bool too_long = false;

 protected:
  // One byte at a time from the source, each taken exactly once: the line count stays exact.
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (too_long) return traits_type::eof();
    const int_type c = src_->sbumpc();
    if (traits_type::eq_int_type(c, traits_type::eof())) return c;
    ch_ = traits_type::to_char_type(c);
    if (line_ >= max_ && ch_ != '\n') {
      too_long = true;
      return traits_type::eof();
    }
    line_ = ch_ == '\n' ? 0 : line_ + 1;
    setg(&ch_, &ch_, &ch_ + 1);
    return c;
  }

 private:
  std::streambuf* src_;
  int64_t max_;
  int64_t line_ = 0;
  char ch_ = 0;
};

LineLimitedInput::LineLimitedInput(std::istream& in, int64_t max_line)
    : buf_(std::make_unique<Buf>(in.rdbuf(), max_line)), stream_(std::make_unique<std::istream>(buf_.get())) {}
LineLimitedInput::~LineLimitedInput() = default;
std::istream& LineLimitedInput::stream() { return *stream_; }
bool LineLimitedInput::too_long() const { return buf_->too_long; }

namespace {

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

}  // namespace

Status check_save_model_target(const std::string& out, const llm::ModelSpec& model, bool overwrite) {
  if (!model.builtin && same_directory(out, model.dir))
    return Status::invalid_argument(
        fmt::format("--save-model {}: is the model directory being read ({}); its checkpoint and config.json would be "
                    "replaced: give another directory",
                    out, model.dir));
  std::error_code ec;
  if (overwrite || !fs::is_directory(out, ec)) return Status::ok();
  std::string held;
  if (fs::exists(fs::path(out) / "config.json", ec)) held = "config.json";
  for (fs::directory_iterator it(out, ec), end; !ec && it != end && held.empty(); it.increment(ec))
    if (it->path().extension() == ".safetensors") held = it->path().filename().string();
  if (held.empty()) return Status::ok();
  return Status::invalid_argument(
      fmt::format("--save-model {}: already holds a model ({}); add --overwrite-model to replace it", out, held));
}

}  // namespace tunableop::cli
