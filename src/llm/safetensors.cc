#include "llm/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "llm/json_brief.h"
#include "tunableop/checked_size.h"
#include "tunableop/half.h"
#include "tunableop/safe_file.h"

namespace tunableop::llm {

using json = nlohmann::json;

int64_t TensorView::numel() const {
  CheckedInt n = 1;  // open() refused shapes whose product overflows; saturated otherwise
  for (int64_t d : shape) n *= d;
  return n.value();
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

bool dtype_from_name(const std::string& s, DType* out) {
  if (s == "F32")
    *out = DType::kF32;
  else if (s == "BF16")
    *out = DType::kBF16;
  else if (s == "F16")
    *out = DType::kF16;
  else
    return false;
  return true;
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF64: return "F64";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
  }
  return "?";
}

// Sizes of dtypes we do not compute with but may find next to the model's tensors: the file is
// still checked for truncation through them.
size_t element_size(DType t) { return t == DType::kF32 ? 4 : t == DType::kF64 ? 8 : 2; }

size_t other_dtype_size(const std::string& s) {
  if (s == "F64" || s == "I64" || s == "U64") return 8;
  if (s == "I32" || s == "U32") return 4;
  if (s == "I16" || s == "U16") return 2;
  if (s == "I8" || s == "U8" || s == "BOOL" || s == "F8_E4M3" || s == "F8_E5M2") return 1;
  return 0;
}

Status parse_tensor_entry(const std::string& path, const std::string& name, const json& e, uint64_t data_size,
                          const uint8_t* data, TensorView* t) {
  auto bad = [&](const std::string& m) { return Status::parse_error(path + ": tensor \"" + name + "\": " + m); };
  if (!e.is_object()) return bad("header entry is not an object");
  if (!e.contains("dtype") || !e["dtype"].is_string()) return bad("missing or non-string \"dtype\"");
  if (!e.contains("shape") || !e["shape"].is_array()) return bad("missing or non-array \"shape\"");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2) {
    return bad("\"data_offsets\" must be [begin, end]");
  }
  t->name = name;
  t->file = path;
  t->dtype_name = e["dtype"].get<std::string>();
  CheckedInt numel = 1;
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      return bad("shape element " + json_brief(d) + " is not a non-negative integer below 2^63");
    t->shape.push_back(d.get<int64_t>());
    numel *= t->shape.back();
  }
  const json& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return bad("data_offsets must be integers");
  uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end) return bad("data_offsets begin > end");
  if (end > data_size) {
    return bad("data [" + std::to_string(begin) + ", " + std::to_string(end) + ") extends past the end of the data (" +
               std::to_string(data_size) + " bytes): the file is truncated");
  }
  t->dtype_supported = dtype_from_name(t->dtype_name, &t->dtype);
  size_t elem = t->dtype_supported ? element_size(t->dtype) : other_dtype_size(t->dtype_name);
  auto bytes = numel.ok() ? checked_bytes(numel.value(), std::max<size_t>(elem, 1)) : std::nullopt;
  if (!bytes) return bad("shape " + shape_string(t->shape) + " has more elements than a 64-bit byte count can hold");
  if (elem != 0 && uint64_t(*bytes) != end - begin) {
    return bad("shape " + shape_string(t->shape) + " of " + t->dtype_name + " needs " + std::to_string(*bytes) +
               " bytes but data_offsets span " + std::to_string(end - begin));
  }
  t->data = data + begin;
  t->bytes = size_t(end - begin);
  return Status::ok();
}

// Two tensors whose bytes overlap would alias (writing one changes the other); the format
// forbids it and a well-formed writer never produces it, so such a file is refused.
Status check_no_overlap(const std::string& path, const std::map<std::string, TensorView>& tensors,
                        const uint8_t* data) {
  std::vector<std::pair<size_t, const TensorView*>> by_begin;
  for (const auto& [name, t] : tensors)
    if (t.bytes > 0) by_begin.emplace_back(size_t(t.data - data), &t);
  std::sort(by_begin.begin(), by_begin.end());
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const auto& [b0, t0] = by_begin[i - 1];
    const auto& [b1, t1] = by_begin[i];
    if (b1 < b0 + t0->bytes) {
      return Status::parse_error(path + ": tensors \"" + t0->name + "\" [" + std::to_string(b0) + ", " +
                                 std::to_string(b0 + t0->bytes) + ") and \"" + t1->name + "\" [" + std::to_string(b1) +
                                 ", " + std::to_string(b1 + t1->bytes) +
                                 ") overlap in the data: the file is malformed");
    }
  }
  return Status::ok();
}

}  // namespace

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  auto opened = open_regular(path, O_RDONLY);  // never blocks on a FIFO; refuses devices
  if (!opened.is_ok()) return opened.status();
  int fd = *opened;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::io_error(path + ": cannot stat: " + std::strerror(errno));
  }
  f->size_ = size_t(st.st_size);
  if (f->size_ < 8) {
    ::close(fd);
    return Status::parse_error(path + ": truncated: " + std::to_string(f->size_) +
                               " bytes, shorter than the 8-byte header length");
  }
  // A private read-only mapping: pages come in as tensors are converted, and the OS can drop
  // them again, so a large checkpoint never needs a second full copy in memory.
  void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return Status::io_error(path + ": mmap failed: " + std::strerror(errno));
  f->map_ = m;
  const uint8_t* bytes = static_cast<const uint8_t*>(m);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > f->size_ - 8) {
    return Status::parse_error(path + ": truncated: the header claims " + std::to_string(header_len) +
                               " bytes but the file has " + std::to_string(f->size_ - 8) + " after the length");
  }
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const json::exception& e) {
    return Status::parse_error(path + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::parse_error(path + ": header is not a JSON object");
  const uint8_t* data = bytes + 8 + header_len;
  uint64_t data_size = f->size_ - 8 - header_len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    TensorView t;
    TUNABLEOP_RETURN_IF_ERROR(parse_tensor_entry(path, it.key(), it.value(), data_size, data, &t));
    f->tensors_.emplace(it.key(), std::move(t));
  }
  TUNABLEOP_RETURN_IF_ERROR(check_no_overlap(path, f->tensors_, data));
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

StatusOr<std::unique_ptr<TensorSource>> TensorSource::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  auto src = std::make_unique<TensorSource>();
  src->dir_ = dir;
  std::string single = dir + "/model.safetensors";
  std::string index = dir + "/model.safetensors.index.json";
  std::error_code ec;  // the throwing overloads would escape on a permission error
  if (fs::exists(single, ec)) {
    auto f = SafetensorsFile::open(single);
    if (!f.is_ok()) return f.status();
    src->single_file_ = "model.safetensors";
    src->files_.push_back(std::move(f.value()));
  } else if (fs::exists(index, ec)) {
    auto text = read_regular_file(index);
    if (!text.is_ok()) return text.status();
    json j;
    try {
      j = json::parse(*text);
    } catch (const json::exception& e) {
      return Status::parse_error(index + ": not valid JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return Status::parse_error(index + ": missing object \"weight_map\"");
    }
    // Open each shard once, in first-mention order.
    std::map<std::string, size_t> shard_index;
    std::vector<std::pair<std::string, std::string>> wanted;  // tensor, shard
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) {
        return Status::parse_error(index + ": weight_map[\"" + it.key() + "\"] must be a file name");
      }
      std::string shard = it.value().get<std::string>();
      if (shard.find('/') != std::string::npos) {
        return Status::parse_error(index + ": weight_map[\"" + it.key() + "\"] names a file outside the directory");
      }
      if (!shard_index.count(shard)) {
        auto f = SafetensorsFile::open(dir + "/" + shard);
        if (!f.is_ok()) {
          return Status(f.status().code(), f.status().message() + " (shard listed for tensor \"" + it.key() +
                                               "\" in model.safetensors.index.json)");
        }
        shard_index[shard] = src->files_.size();
        src->files_.push_back(std::move(f.value()));
      }
      wanted.emplace_back(it.key(), shard);
    }
    for (auto& [name, shard] : wanted) {
      const TensorView* t = src->files_[shard_index[shard]]->find(name);
      if (!t) {
        return Status::not_found(dir + "/" + shard + ": tensor \"" + name +
                                 "\" is listed in model.safetensors.index.json but not in this shard");
      }
      src->by_name_[name] = t;
    }
    return src;
  } else {
    return Status::not_found(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  for (auto& [name, t] : src->files_[0]->tensors()) src->by_name_[name] = &t;
  return src;
}

const TensorView* TensorSource::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::string TensorSource::where(const std::string& name) const {
  if (const TensorView* t = find(name)) return t->file;
  if (!single_file_.empty()) return dir_ + "/" + single_file_;
  return dir_ + "/model.safetensors.index.json";
}

size_t TensorSource::tensor_count() const { return by_name_.size(); }

void convert_to_f32(const TensorView& t, float* out) {
  const int64_t n = t.numel();
  switch (t.dtype) {
    case DType::kF32: std::memcpy(out, t.data, size_t(n) * 4); break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        bf16 h;
        std::memcpy(&h.bits, t.data + 2 * i, 2);
        out[i] = to_float(h);
      }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        fp16 h;
        std::memcpy(&h.bits, t.data + 2 * i, 2);
        out[i] = to_float(h);
      }
      break;
    case DType::kF64:
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // never marked supported
  }
}

Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  std::set<std::string> names;
  std::vector<size_t> sizes;
  for (const TensorToWrite& t : tensors) {
    if (!names.insert(t.name).second) return Status::invalid_argument(path + ": duplicate tensor \"" + t.name + "\"");
    if (t.dtype == DType::kF64) return Status::invalid_argument(path + ": F64 is not written");
    CheckedInt n = 1;
    for (int64_t d : t.shape) n *= d;
    auto bytes = n.ok() ? checked_bytes(n.value(), element_size(t.dtype)) : std::nullopt;
    if (!bytes) return Status::invalid_argument(path + ": tensor \"" + t.name + "\" is too large");
    sizes.push_back(*bytes);
    header[t.name] = {
        {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
  }
  header["__metadata__"] = {{"format", "pt"}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';  // keeps the data 8-byte aligned, as the reference writer does
  // Written beside the target and renamed over it: a full disk leaves the old file whole.
  auto out = AtomicFileWriter::create(path);
  if (!out.is_ok()) return out.status();
  uint64_t len = h.size();
  char len_bytes[8];
  for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<char>(len >> (8 * i));
  TUNABLEOP_RETURN_IF_ERROR(out->write(std::string_view(len_bytes, 8)));
  TUNABLEOP_RETURN_IF_ERROR(out->write(h));
  for (size_t i = 0; i < tensors.size(); ++i)
    TUNABLEOP_RETURN_IF_ERROR(out->write(std::string_view(static_cast<const char*>(tensors[i].data), sizes[i])));
  return out->commit();
}

}  // namespace tunableop::llm
