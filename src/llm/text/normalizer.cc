#include "llm/text/normalizer.h"

#include <vector>

#include "llm/text/utf8.h"

namespace tunableop::llm {

namespace {

class NormalForm final : public Normalizer {
 public:
  explicit NormalForm(std::string form) : form_(std::move(form)) {}
  StatusOr<std::string> normalize(std::string_view text) const override {
    // ASCII is in every normal form: most prompts skip the library.
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(text);
    return unicode_normal_form(text, form_);
  }

 private:
  std::string form_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  StatusOr<std::string> normalize(std::string_view text) const override {
    std::string s(text);
    for (const auto& p : parts_) {
      auto next = p->normalize(s);
      if (!next.is_ok()) return next.status();
      s = std::move(*next);
    }
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

StatusOr<std::unique_ptr<Normalizer>> make_normalizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  if (!j.is_object() || !j.contains("type") || !j.at("type").is_string()) {
    return Status::parse_error(where + ": must be null or an object with a string \"type\"");
  }
  const std::string type = j.at("type").get<std::string>();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    if (!unicode_normalization_available()) {
      return Status::unsupported(where + ": \"" + type +
                                 "\" needs utf8proc, which this build lacks (install libutf8proc-dev and rebuild)");
    }
    return std::unique_ptr<Normalizer>(new NormalForm(type));
  }
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j.at("normalizers").is_array()) {
      return Status::parse_error(where + ": a Sequence needs a \"normalizers\" list");
    }
    std::vector<std::unique_ptr<Normalizer>> parts;
    const auto& list = j.at("normalizers");
    for (size_t i = 0; i < list.size(); ++i) {
      auto part = make_normalizer(list[i], where + ".normalizers[" + std::to_string(i) + "]");
      if (!part.is_ok()) return part.status();
      if (*part) parts.push_back(std::move(*part));
    }
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(parts)));
  }
  return Status::unsupported(where + ": normalizer type \"" + utf8::excerpt(type) +
                             "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Sequence; byte-level BPE "
                             "tokenizers use none or NFC)");
}

}  // namespace tunableop::llm
