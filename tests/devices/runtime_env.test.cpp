#include "devices/pool_allocator.hpp"
#include "devices/runtime_env.hpp"
#include "devices/thread_pool.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace actorflow;

namespace {

/// An allocator a host application might install as the process default.
class host_allocator final : public allocator {
public:
  void* allocate(std::size_t bytes) override { return std::aligned_alloc(tensor_alignment, bytes); }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
  const char* name() const override { return "host application"; }
};

/// Restores the default host allocator and the BLAS's threads at the end of a test.
struct process_state_guard {
  allocator* saved_allocator = default_host_allocator();
  int saved_blas = blas_threads();
  ~process_state_guard() {
    set_default_host_allocator(saved_allocator);
    set_blas_threads(saved_blas);
  }
};

} // namespace

TEST_CASE("an env that does not manage the BLAS leaves its thread count alone") {
  process_state_guard guard;
  set_blas_threads(1);
  runtime_env hands_off{runtime_env::settings{false, true}};
  auto pools = hands_off.make_pools(1, 2);
  CHECK(pools.intra_op != nullptr);
  CHECK(blas_threads() == 1);
  runtime_env managing;
  managing.make_pools(1, 2);
  CHECK(blas_threads() == 2);
}

TEST_CASE("an env that does not install the pooling allocator keeps the host's default") {
  process_state_guard guard;
  host_allocator mine;
  set_default_host_allocator(&mine);
  runtime_env hands_off{runtime_env::settings{true, false}};
  hands_off.prepare_host_memory();
  CHECK(default_host_allocator() == &mine);
  runtime_env installing;
  installing.prepare_host_memory();
  CHECK(default_host_allocator() == &host_pool_allocator());
}

TEST_CASE("two envs share no pools, one env hands out the same shared pools") {
  runtime_env first{runtime_env::settings{false, false}};
  runtime_env second{runtime_env::settings{false, false}};
  auto a = first.shared_pools(1, 1);
  auto again = first.shared_pools(4, 4); // sizes of the first call stay
  auto b = second.shared_pools(1, 1);
  CHECK(a.inter_op == again.inter_op);
  CHECK(a.intra_op == again.intra_op);
  CHECK(a.inter_op != b.inter_op);
  CHECK(a.intra_op != b.intra_op);
  CHECK(&env_or_default(nullptr) == runtime_env::process_default().get());
}
