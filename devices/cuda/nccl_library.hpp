#pragma once
/// NCCL for the GPU collectives (AllReduce among a process's GPUs, CollectiveReduce across
/// tasks), loaded with dlopen at the first use instead of linked into every program, as cuBLAS
/// is (devices/cuda/cublas_library.hpp):
///   auto nccl = nccl_library_loaded();             // result<const nccl_library*>
///   if (!nccl) return nccl.error();                // "cannot load libnccl.so.2: ..."
///   AF_NCCL_RETURN_IF_ERROR(**nccl, (*nccl)->group_start());
/// Internal to devices/cuda/; includes NCCL's header, so include it only where
/// __has_include(<nccl.h>).

#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <nccl.h>

#include <string>

// ncclAvg, which the means use, came with NCCL 2.10.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 10, 0)
#error "actorflow's GPU collectives need NCCL 2.10 or later (ncclAvg)"
#endif

namespace actorflow::cuda {

/// The NCCL functions actorflow calls. Valid for the life of the process once loaded.
struct nccl_library {
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  /// Null in NCCL before 2.13.
  decltype(&ncclGetLastError) last_error = nullptr;

  /// NCCL's words for `result`, and for the last error it saw (on `comm`, when given) if
  /// it has any.
  std::string describe(ncclResult_t result, ncclComm_t comm = nullptr) const;
};

/// The process's NCCL (libnccl.so.<the major version of this build's header>), loaded at the
/// first call; the error, kept for later calls, says why it cannot be. Thread-safe.
result<const nccl_library*> nccl_library_loaded();

/// NCCL's type for `t`; an error naming `what` for booleans, which NCCL does not reduce.
result<ncclDataType_t> nccl_type(dtype t, const std::string& what);

} // namespace actorflow::cuda

/// Returns an error from the enclosing function when an NCCL call fails: the call's text, its
/// file and line, and NCCL's words.
#define AF_NCCL_RETURN_IF_ERROR(lib, expr)                                                       \
  do {                                                                                           \
    ncclResult_t af_nccl_result_ = (expr);                                                       \
    if (af_nccl_result_ != ncclSuccess)                                                          \
      return ::actorflow::make_error(::actorflow::errc::internal,                                \
                                     std::string{#expr} + " failed at " + __FILE__ + ":" +       \
                                       std::to_string(__LINE__) + ": " +                         \
                                       (lib).describe(af_nccl_result_));                         \
  } while (false)
