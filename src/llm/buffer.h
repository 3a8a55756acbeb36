// Memory that a device made for the forward pass (device memory, or host memory for transfers),
// freed by the function the device gave with it. Move-only.
#pragma once

#include <cstddef>
#include <memory>

namespace tunableop::llm {

namespace detail {
struct BufferDeleter {
  void (*free)(void*) = nullptr;
  void operator()(void* p) const {
    if (free) free(p);
  }
};
}  // namespace detail

class Buffer {
 public:
  using Free = void (*)(void*);
  Buffer() = default;
  Buffer(void* p, size_t bytes, Free free) : p_(p, detail::BufferDeleter{free}), bytes_(bytes) {}

  void reset() { p_.reset(); }
  void* get() const { return p_.get(); }
  size_t bytes() const { return p_ ? bytes_ : 0; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_.get());
  }

 private:
  std::unique_ptr<void, detail::BufferDeleter> p_;
  size_t bytes_ = 0;
};

}  // namespace tunableop::llm
