// CollectiveReduce on the CPU (and the test device): this device's member of a group across
// tasks (devices/task_collective.hpp) runs its part; the result arrives on another thread. An
// aborted step stops waiting at once (the group's own bound and its peers' monitors end the
// collective itself).
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "devices/task_collective.hpp"

#include <atomic>
#include <memory>

namespace actorflow {

namespace {

class collective_reduce_kernel final : public op_kernel {
public:
  explicit collective_reduce_kernel(const node& n)
    : op_kernel(n), attrs_(collective_reduce_attrs::of(n)) {}

  bool is_async() const override { return true; }
  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::internal, "CollectiveReduce runs only asynchronously"));
  }

  void compute_async(kernel_context& ctx, std::function<void()> done) override {
    auto found = attrs_.member_on(ctx.dev().full_name());
    if (!found) {
      ctx.fail(found.error());
      done();
      return;
    }
    auto member = std::move(*found);
    // Called once: by the group's answer or by the step's abort, whichever is first; the
    // other finds it done and touches nothing (ctx lives only until done()).
    struct waiting {
      std::atomic<bool> finished{false};
      std::uint64_t token = 0;
    };
    auto wait = std::make_shared<waiting>();
    auto* cancellation = ctx.cancellation();
    auto finish = [&ctx, done, wait, cancellation](result<tensor> reduced) {
      if (wait->finished.exchange(true))
        return;
      if (cancellation != nullptr && wait->token != 0)
        cancellation->remove(wait->token);
      if (!reduced) {
        ctx.fail(reduced.error());
        done();
        return;
      }
      ctx.dev().copy_from_host(*reduced, [&ctx, done](result<tensor> on_device) {
        if (on_device)
          ctx.set_output(0, std::move(*on_device));
        else
          ctx.fail(on_device.error());
        done();
      });
    };
    auto what = member->describe();
    if (cancellation != nullptr) {
      wait->token = cancellation->add([finish, what] {
        finish(make_error(errc::aborted, "the step was aborted while its part of " + what +
                                           " waited for the other members"));
      });
      if (wait->token == 0) {
        finish(make_error(errc::aborted, "the step was aborted before its part of " + what));
        return;
      }
    }
    auto op = *attrs_.op;
    auto instance = attrs_.instance;
    ctx.dev().copy_to_host(ctx.input(0), [member, instance, op, finish](result<tensor> host) {
      if (!host) {
        finish(host.error());
        return;
      }
      member->all_reduce(instance, std::move(*host), op, finish);
    });
  }

private:
  collective_reduce_attrs attrs_;
};

} // namespace

void register_collective_reduce_kernels(kernel_registry& registry) {
  registry.add("CollectiveReduce", "CPU",
               {dtype::float32, dtype::float64, dtype::int32, dtype::int64},
               make_kernel<collective_reduce_kernel>);
}

} // namespace actorflow
