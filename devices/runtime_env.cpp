#include "devices/runtime_env.hpp"

#include "devices/pool_allocator.hpp"
#include "devices/thread_pool.hpp"

namespace actorflow {

runtime_env::runtime_env() = default;

runtime_env::runtime_env(settings config) : config_(config) {}

const std::shared_ptr<runtime_env>& runtime_env::process_default() {
  // Never destroyed: sessions in static objects may outlive main's locals.
  static const auto* env = new std::shared_ptr<runtime_env>(std::make_shared<runtime_env>());
  return *env;
}

compute_pools runtime_env::make_pools(int inter_threads, int intra_threads) const {
  auto intra = resolve_thread_count(intra_threads);
  auto pools = make_compute_pools(inter_threads, intra);
  if (config_.manage_blas_threads)
    set_blas_threads(intra);
  return pools;
}

compute_pools runtime_env::shared_pools(int inter_threads, int intra_threads) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (!shared_.intra_op) {
    shared_intra_threads_ = resolve_thread_count(intra_threads);
    shared_ = make_compute_pools(inter_threads, shared_intra_threads_);
  }
  if (config_.manage_blas_threads)
    set_blas_threads(shared_intra_threads_);
  return shared_;
}

void runtime_env::prepare_host_memory() const {
  if (config_.install_pool_allocator)
    install_host_pool_allocator();
}

runtime_env& env_or_default(const std::shared_ptr<runtime_env>& env) {
  return env ? *env : *runtime_env::process_default();
}

} // namespace actorflow
