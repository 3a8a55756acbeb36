// The Tokenizer over SentencePiece's own processor: encoding, decoding (dummy prefix, byte
// fallback, control tokens) are the library's, not ours.
#include <sentencepiece_processor.h>

#include <fstream>

#include "llm/text/tokenizer.h"
#include "tunableop/safe_file.h"

namespace tunableop::llm {

namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp, std::string path)
      : sp_(std::move(sp)), path_(std::move(path)) {}

  int64_t vocab_size() const override { return sp_->GetPieceSize(); }

  StatusOr<std::vector<int32_t>> encode(std::string_view text) const override {
    std::vector<int> ids;
    auto st = sp_->Encode(text, &ids);
    if (!st.ok()) return Status::invalid_argument(path_ + ": cannot encode the text: " + st.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override {
    const int64_t n = vocab_size();
    for (int32_t id : ids) {
      // SentencePiece would report this too, but without saying which id.
      if (id < 0 || id >= n) {
        return Status::invalid_argument("token id " + std::to_string(id) + " is outside the tokenizer's " +
                                        std::to_string(n) + " pieces (" + path_ + ")");
      }
    }
    std::string text;
    auto st = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!st.ok()) return Status::invalid_argument(path_ + ": cannot decode: " + st.ToString());
    return text;
  }

  std::optional<int32_t> piece_id(std::string_view piece) const override {
    const int id = sp_->PieceToId(piece);
    // PieceToId answers unk_id for an unknown piece: only the unknown piece itself maps there.
    if (id < 0 || (id == sp_->unk_id() && sp_->IdToPiece(id) != piece)) return std::nullopt;
    return int32_t(id);
  }

  std::optional<int32_t> bos_id() const override { return optional_id(sp_->bos_id()); }
  std::optional<int32_t> eos_id() const override { return optional_id(sp_->eos_id()); }

  std::string description() const override {
    bool bytes = false;
    for (int i = 0; i < sp_->GetPieceSize() && !bytes; ++i) bytes = sp_->IsByte(i);
    return "sentencepiece, " + std::to_string(vocab_size()) + " pieces" + (bytes ? ", byte fallback" : "") + " (" +
           path_ + ")";
  }

 private:
  static std::optional<int32_t> optional_id(int id) { return id < 0 ? std::nullopt : std::optional<int32_t>(id); }
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
};

}  // namespace

bool tokenizer_available() { return true; }

StatusOr<std::unique_ptr<Tokenizer>> load_sentencepiece(const std::string& path) {
  // Read the bytes ourselves: a missing or unreadable file then gets our usual message, and
  // SentencePiece only judges the contents.
  auto read = read_regular_file(path);  // never blocks on a FIFO; refuses directories, devices
  if (!read.is_ok()) {
    if (read.status().code() == StatusCode::kNotFound) return Status::not_found(path + ": cannot open");
    return read.status();
  }
  const std::string& bytes = *read;
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = sp->LoadFromSerializedProto(bytes);
  if (!st.ok()) return Status::parse_error(path + ": not a SentencePiece model: " + st.ToString());
  if (sp->GetPieceSize() <= 0) return Status::parse_error(path + ": the SentencePiece model has no pieces");
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(sp), path));
}

}  // namespace tunableop::llm
