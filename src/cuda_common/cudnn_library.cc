#include "cuda_common/cudnn_library.h"

#ifdef TUNABLEOP_HAVE_CUDNN_LIBRARY

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace tunableop::cuda {

Status CudnnApi::error(cudnnStatus_t st, const std::string& what) const {
  std::string msg = "cuDNN " + what + ": " + (error_string ? error_string(st) : "error");
  if (last_error) {
    char buf[1024] = {0};
    last_error(buf, sizeof(buf));
    if (buf[0]) msg += std::string(" (") + buf + ")";
  }
  return Status::unsupported(msg);
}

StatusOr<const CudnnApi*> cudnn_api() {
  static std::once_flag once;
  static CudnnApi api;
  static Status failure = Status::ok();
  std::call_once(once, [] {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("TUNABLEOP_CUDNN_LIBRARY"); env && *env) paths.emplace_back(env);
    paths.emplace_back("libcudnn.so.9");
    std::string tried;
    void* handle = nullptr;
    for (const auto& p : paths) {
      handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) {
        api.path = p;
        break;
      }
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + p + ": " + (why ? why : "not found");
    }
    if (!handle) {
      failure = Status::unsupported("cuDNN not loaded (" + tried + ")");
      return;
    }
    auto bind = [&](const char* name, auto& fn) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      return fn != nullptr;
    };
    const bool ok = bind("cudnnGetVersion", api.get_version) && bind("cudnnGetErrorString", api.error_string) &&
                    bind("cudnnCreate", api.create) && bind("cudnnDestroy", api.destroy) &&
                    bind("cudnnSetStream", api.set_stream) && bind("cudnnBackendCreateDescriptor", api.create_desc) &&
                    bind("cudnnBackendDestroyDescriptor", api.destroy_desc) &&
                    bind("cudnnBackendSetAttribute", api.set_attr) && bind("cudnnBackendGetAttribute", api.get_attr) &&
                    bind("cudnnBackendFinalize", api.finalize) && bind("cudnnBackendExecute", api.execute);
    bind("cudnnGetLastErrorString", api.last_error);
    if (!ok) {
      failure = Status::unsupported(api.path + " lacks the cuDNN 9 backend API");
      return;
    }
    api.version = api.get_version();
    if (api.version < 90000)
      failure = Status::unsupported("cuDNN " + std::to_string(api.version) + " is older than 9.0");
  });
  if (!failure.is_ok()) return failure;
  return &api;
}

CudnnDesc::CudnnDesc(const CudnnApi* api, cudnnBackendDescriptorType_t type) : api_(api) {
  status_ = api->create_desc(type, &d_);
  if (status_ != CUDNN_STATUS_SUCCESS) d_ = nullptr;
}

CudnnDesc::~CudnnDesc() {
  if (d_) api_->destroy_desc(d_);
}

std::string cudnn_config_tag(const CudnnApi* api, cudnnBackendDescriptor_t cfg, const std::string& fallback) {
  CudnnDesc eng_desc(api, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t eng = eng_desc.get();
  if (!eng) return fallback;
  int64_t count = 0, index = -1;
  if (api->get_attr(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &eng) !=
          CUDNN_STATUS_SUCCESS ||
      api->get_attr(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index) != CUDNN_STATUS_SUCCESS)
    return fallback;
  std::string tag = "eng" + std::to_string(index);
  std::vector<std::unique_ptr<CudnnDesc>> owned;
  std::vector<cudnnBackendDescriptor_t> knobs;
  for (int i = 0; i < int(CUDNN_KNOB_TYPE_COUNTS); ++i) {
    owned.push_back(std::make_unique<CudnnDesc>(api, CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    if (!owned.back()->get()) return fallback;
    knobs.push_back(owned.back()->get());
  }
  int64_t got = 0;
  if (api->get_attr(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(knobs.size()), &got,
                    knobs.data()) != CUDNN_STATUS_SUCCESS)
    return fallback;
  for (int64_t i = 0; i < got && i < int64_t(knobs.size()); ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0;
    cudnnStatus_t st =
        api->get_attr(knobs[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &count, &type);
    if (st == CUDNN_STATUS_SUCCESS)
      st = api->get_attr(knobs[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &count, &value);
    if (st != CUDNN_STATUS_SUCCESS) return fallback;
    tag += "_k" + std::to_string(int(type)) + "v" + std::to_string(value);
  }
  return tag;
}

bool cudnn_config_nondeterministic(const CudnnApi* api, cudnnBackendDescriptor_t cfg) {
  CudnnDesc eng_desc(api, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t eng = eng_desc.get();
  if (!eng) return false;
  int64_t count = 0;
  if (api->get_attr(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &eng) !=
      CUDNN_STATUS_SUCCESS)
    return false;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT] = {};
  if (api->get_attr(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                    &count, notes) != CUDNN_STATUS_SUCCESS)
    return false;
  for (int64_t i = 0; i < count && i < int64_t(CUDNN_NUMERICAL_NOTE_TYPE_COUNT); ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  }
  return false;
}

}  // namespace tunableop::cuda

#endif
