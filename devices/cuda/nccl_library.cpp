// Loads NCCL at run time (devices/cuda/nccl_library.hpp). Built where the toolkit has nccl.h.
#if __has_include(<nccl.h>)
#include "devices/cuda/nccl_library.hpp"

#include <dlfcn.h>

#include <mutex>
#include <type_traits>

namespace actorflow::cuda {

namespace {

result<const nccl_library*> load() {
  const std::string name = "libnccl.so." + std::to_string(NCCL_MAJOR);
  // Never closed: communicators live until the process exits.
  void* library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = ::dlerror();
    return make_error(errc::unavailable, "cannot load " + name + " (" +
                                           (why != nullptr ? why : "not found") + ")");
  }
  auto* lib = new nccl_library;
  std::string missing;
  auto bind = [&](auto& function, const char* symbol) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, symbol));
    if (function == nullptr)
      missing += std::string{missing.empty() ? "" : ", "} + symbol;
  };
  bind(lib->comm_init_all, "ncclCommInitAll");
  bind(lib->get_unique_id, "ncclGetUniqueId");
  bind(lib->comm_init_rank, "ncclCommInitRank");
  bind(lib->comm_destroy, "ncclCommDestroy");
  bind(lib->comm_abort, "ncclCommAbort");
  bind(lib->comm_get_async_error, "ncclCommGetAsyncError");
  bind(lib->all_reduce, "ncclAllReduce");
  bind(lib->group_start, "ncclGroupStart");
  bind(lib->group_end, "ncclGroupEnd");
  bind(lib->error_string, "ncclGetErrorString");
  if (!missing.empty()) {
    delete lib;
    return make_error(errc::unavailable, name + " lacks " + missing);
  }
  // Since NCCL 2.13; without it errors have NCCL's words for the code only.
  lib->last_error =
    reinterpret_cast<decltype(lib->last_error)>(::dlsym(library, "ncclGetLastError"));
  return lib;
}

} // namespace

std::string nccl_library::describe(ncclResult_t result, ncclComm_t comm) const {
  std::string words = error_string(result);
  const char* last = last_error != nullptr ? last_error(comm) : nullptr;
  if (last != nullptr && *last != '\0')
    words += " (" + std::string{last} + ")";
  return words;
}

result<const nccl_library*> nccl_library_loaded() {
  static std::once_flag once;
  static result<const nccl_library*> loaded = make_error(errc::internal, "NCCL not loaded yet");
  std::call_once(once, [] { loaded = load(); });
  return loaded;
}

result<ncclDataType_t> nccl_type(dtype t, const std::string& what) {
  switch (t) {
    case dtype::float32: return ncclFloat32;
    case dtype::float64: return ncclFloat64;
    case dtype::int32: return ncclInt32;
    case dtype::int64: return ncclInt64;
    case dtype::boolean: break;
  }
  return make_error(errc::invalid_argument, what + " cannot reduce " + to_string(t));
}

} // namespace actorflow::cuda
#endif
