// Reading (mmap) and writing safetensors files: an 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw tensor bytes. A model directory
// holds one `model.safetensors` or shards listed in `model.safetensors.index.json`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tunableop/gemm.h"
#include "tunableop/status.h"

namespace tunableop::llm {

// One tensor inside a mapped file. `dtype` is valid only when `dtype_supported`; the raw
// safetensors name ("F32", "BF16", "I64", ...) is kept for messages.
struct TensorView {
  std::string name;
  std::string file;  // path of the file holding it, for messages
  std::string dtype_name;
  bool dtype_supported = false;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // not aligned in general: read with memcpy
  size_t bytes = 0;
  int64_t numel() const;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[64, 103]"

class SafetensorsFile {
 public:
  // Maps the file and checks the whole header: every tensor's bytes lie inside the file and
  // match its shape and dtype. A truncated or malformed file fails here, naming the tensor.
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const TensorView* find(const std::string& name) const;
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// All tensors of a model directory, single-file or sharded.
class TensorSource {
 public:
  static StatusOr<std::unique_ptr<TensorSource>> open_dir(const std::string& dir);
  // Null when the checkpoint has no such tensor.
  const TensorView* find(const std::string& name) const;
  // What to name in a "missing tensor" message: the file it should be in.
  std::string where(const std::string& name) const;
  size_t tensor_count() const;

 private:
  std::string dir_;
  std::string single_file_;  // "model.safetensors" when not sharded
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> by_name_;
};

// Copies `numel` elements of a tensor into fp32 (bf16/f16 widened exactly).
void convert_to_f32(const TensorView& t, float* out);

struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;  // F32, BF16 or F16
  std::vector<int64_t> shape;
  const void* data = nullptr;  // numel * dtype_size bytes
};
// Writes a safetensors file (header padded to 8 bytes, tensors in the given order).
Status write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace tunableop::llm
