// Loads cuBLAS at run time (devices/cuda/cublas_library.hpp).
#include "devices/cuda/cublas_library.hpp"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>
#include <type_traits>

namespace actorflow::cuda {

namespace {

std::atomic<const cublas_library*> loaded{nullptr};

result<const cublas_library*> load() {
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  // Never closed: handles and kernels may use it until the process exits.
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return make_error(errc::unavailable, "cannot load " + name + " (" +
                                           (why != nullptr ? why : "not found") + ")");
  }
  auto* lib = new cublas_library;
  std::string missing;
  auto bind = [&](auto& function, const char* symbol) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, symbol));
    if (function == nullptr)
      missing += std::string{missing.empty() ? "" : ", "} + symbol;
  };
  bind(lib->create, "cublasCreate_v2");
  bind(lib->destroy, "cublasDestroy_v2");
  bind(lib->set_stream, "cublasSetStream_v2");
  bind(lib->set_math_mode, "cublasSetMathMode");
  bind(lib->sgemm, "cublasSgemm_v2");
  bind(lib->dgemm, "cublasDgemm_v2");
  bind(lib->status_string, "cublasGetStatusString");
  bind(lib->status_name, "cublasGetStatusName");
  if (!missing.empty()) {
    delete lib;
    return make_error(errc::unavailable, name + " lacks " + missing);
  }
  return lib;
}

} // namespace

result<const cublas_library*> cublas() {
  static std::once_flag once;
  static status failure;
  std::call_once(once, [] {
    auto lib = load();
    if (lib)
      loaded.store(*lib);
    else
      failure = lib.error();
  });
  if (auto* lib = loaded.load())
    return lib;
  return failure;
}

const cublas_library* cublas_if_loaded() { return loaded.load(); }

} // namespace actorflow::cuda
