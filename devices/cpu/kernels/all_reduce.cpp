// AllReduce on the CPU (and the test device, which runs the CPU's kernels): the members of a
// group, one per device of this process, meet in host_collectives(); the last sums their
// tensors in rank order (so every run adds alike) and each member outputs the result in its
// device's memory. On GPUs NCCL does this job (devices/cuda).
#include "devices/collective.hpp"
#include "devices/collective_execution.hpp"
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/device.hpp"
#include "devices/kernel.hpp"

#include <memory>
#include <type_traits>

namespace actorflow {

namespace {

template <class T>
result<tensor> reduce_in_rank_order(const std::vector<tensor>& by_rank, bool mean) {
  if constexpr (std::is_same_v<T, bool>) {
    return make_error(errc::invalid_argument, "AllReduce does not add booleans");
  } else {
  auto& first = by_rank.front();
  for (std::size_t r = 1; r < by_rank.size(); ++r)
    if (by_rank[r].shape() != first.shape() || by_rank[r].type() != first.type())
      return make_error(errc::invalid_argument,
                        "member 0 has " + std::string{to_string(first.type())} +
                          first.shape().to_string() + " but member " + std::to_string(r) +
                          " has " + to_string(by_rank[r].type()) + by_rank[r].shape().to_string());
  tensor out{first.type(), first.shape()};
  auto n = out.num_elements();
  T* sum = out.data<T>();
  // Members' memory is readable here: the CPU's, or the test device's (host memory underneath).
  const T* p0 = first.data<T>();
  for (std::int64_t i = 0; i < n; ++i)
    sum[i] = p0[i];
  // The same arithmetic as collectives across tasks (devices/collective_execution.hpp).
  for (std::size_t r = 1; r < by_rank.size(); ++r)
    reduce_elements(first.type(), reduction::sum, sum, by_rank[r].data<T>(), n);
  if (mean)
    for (std::int64_t i = 0; i < n; ++i)
      sum[i] = static_cast<T>(sum[i] / static_cast<T>(by_rank.size()));
  return out;
  }
}

class all_reduce_kernel final : public op_kernel {
public:
  explicit all_reduce_kernel(const node& n)
    : op_kernel(n), attrs_(all_reduce_attrs::of(n)) {}

  bool is_async() const override { return true; }
  void compute(kernel_context& ctx) override {
    ctx.fail(make_error(errc::internal, "AllReduce runs only asynchronously"));
  }

  void compute_async(kernel_context& ctx, std::function<void()> done) override {
    if (attrs_.group.empty()) {
      ctx.fail(make_error(errc::invalid_argument, "AllReduce has no group_key"));
      done();
      return;
    }
    auto member = attrs_.in_step(ctx.step_id());
    auto mean = attrs_.mean;
    auto reduce = [mean, member](const std::vector<tensor>& by_rank) -> result<tensor> {
      auto reduced = visit_dtype(by_rank.front().type(), [&](auto zero) {
        return reduce_in_rank_order<decltype(zero)>(by_rank, mean);
      });
      if (!reduced)
        return reduced.error().with_context(member.describe());
      return reduced;
    };
    // The executor keeps ctx alive until done() runs.
    auto finish = [&ctx, done](result<tensor> reduced) {
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
    host_collectives().join_in_step(
      member, host_collective_member{ctx.input(0), finish},
      [reduce](std::vector<host_collective_member>& by_rank) {
        std::vector<tensor> values;
        for (auto& m : by_rank)
          values.push_back(std::move(m.value));
        auto reduced = reduce(values);
        for (auto& m : by_rank)
          m.done(reduced);
      },
      ctx.cancellation());
  }

private:
  all_reduce_attrs attrs_;
};

} // namespace

void register_all_reduce_kernels(kernel_registry& registry) {
  registry.add("AllReduce", "CPU", {dtype::float32, dtype::float64, dtype::int32, dtype::int64},
               make_kernel<all_reduce_kernel>);
}

} // namespace actorflow
