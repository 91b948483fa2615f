#pragma once
/// The per-process state that sessions, tasks and devices share, gathered in one object
/// (TensorFlow's WorkerEnv): the compute pools sessions share, and the two process-wide
/// settings actorflow may change, the BLAS's thread count and the default host allocator.
///   auto env = std::make_shared<runtime_env>(runtime_env::settings{false, false});
///   options.env = env;      // session_options, task_service_options or server_options
/// Everything without an env of its own uses runtime_env::process_default(), which keeps the
/// behaviour of a plain actorflow program: one set of shared pools, the BLAS's threads set to
/// match them, and the pooling allocator as the default. An embedder whose application owns
/// OpenBLAS's threads or its own allocator turns those off; two actor systems with an env each
/// share no pools. Thread-safe.

#include "devices/device.hpp"

#include <memory>
#include <mutex>

namespace actorflow {

class runtime_env {
public:
  struct settings {
    /// Set the BLAS's process-wide thread count to match the intra-op pools this env makes
    /// (OpenBLAS would otherwise start a second pool that fights them for the cores).
    bool manage_blas_threads = true;
    /// Make the pooling host allocator (devices/pool_allocator.hpp) the process's default host
    /// allocator when a task or session starts.
    bool install_pool_allocator = true;
  };

  /// Manages the BLAS's threads and installs the pooling allocator, like the process default.
  runtime_env();
  explicit runtime_env(settings config);

  /// The env of everything that names none.
  static const std::shared_ptr<runtime_env>& process_default();

  /// New pools of `inter_threads` and `intra_threads` (0: one per core) for one task or
  /// session; sets the BLAS to `intra_threads` when this env manages it.
  compute_pools make_pools(int inter_threads, int intra_threads) const;

  /// This env's shared pools, made by the first call with its sizes; later calls get the same
  /// pools (and set the BLAS back to their size when managed: an in-process cluster may have
  /// set it to 1 since).
  compute_pools shared_pools(int inter_threads, int intra_threads);

  /// Installs the pooling allocator as the default host allocator when this env's settings
  /// say so; called where a task or session starts making tensors.
  void prepare_host_memory() const;

  const settings& config() const { return config_; }

private:
  settings config_;
  std::mutex mutex_;
  compute_pools shared_;
  int shared_intra_threads_ = 0;
};

/// The env in `env`, or the process default when it is null.
runtime_env& env_or_default(const std::shared_ptr<runtime_env>& env);

} // namespace actorflow
