// The sampled losses' kernels (graph/sampled_losses.cpp defines the ops):
// LogUniformCandidateSampler as TF's LogUniformSampler draws (value = floor(exp(u *
// log(range_max + 1))) - 1, P(k) = log((k + 2) / (k + 1)) / log(range_max + 1)), with TF's
// expected counts; SigmoidCrossEntropyWithLogits; _AccidentalHitMask.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/cpu/kernels/random_generator.hpp"

#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_set>

namespace actorflow {

namespace {

using namespace cpu;

class log_uniform_sampler_kernel : public op_kernel {
public:
  explicit log_uniform_sampler_kernel(const node& n)
    : op_kernel(n), num_sampled_(n.attr_or<std::int64_t>("num_sampled", 1)),
      range_(n.attr_or<std::int64_t>("range_max", 1)), unique_(n.attr_or<bool>("unique", true)),
      log_range_(std::log1p(static_cast<double>(range_))),
      generator_(make_generator(n.attr_or<std::int64_t>("seed", 0), n.attr_or<std::int64_t>("seed2", 0))) {}

  bool keeps_state() const override { return true; }

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype::int64))
      return;
    auto& truth = ctx.input(0);
    auto candidates = ctx.allocate_output(0, dtype::int64, tensor_shape{std::vector<std::int64_t>{num_sampled_}});
    auto* drawn = candidates.data<std::int64_t>();
    std::int64_t tries = 0;
    {
      std::lock_guard<std::mutex> guard{mutex_};
      std::unordered_set<std::int64_t> seen;
      for (std::int64_t k = 0; k < num_sampled_;) {
        auto value = static_cast<std::int64_t>(std::exp(generator_.uniform<double>() * log_range_)) - 1;
        value = std::min(std::max<std::int64_t>(value, 0), range_ - 1);
        ++tries;
        if (unique_ && !seen.insert(value).second)
          continue;
        drawn[k++] = value;
      }
    }
    auto expected = [&](std::int64_t value) {
      auto p = probability(value);
      if (unique_)
        return static_cast<float>(-std::expm1(static_cast<double>(tries) * std::log1p(-p)));
      return static_cast<float>(p * static_cast<double>(num_sampled_));
    };
    auto true_expected = ctx.allocate_output(1, dtype::float32, truth.shape());
    for (std::int64_t i = 0; i < truth.num_elements(); ++i) {
      auto value = truth.data<std::int64_t>()[i];
      if (value < 0 || value >= range_)
        return ctx.fail(make_error(errc::invalid_argument,
                                   "LogUniformCandidateSampler node '" + name() + "': true class " +
                                     std::to_string(value) + " is out of range [0, " +
                                     std::to_string(range_) + ")"));
      true_expected.data<float>()[i] = expected(value);
    }
    auto sampled_expected = ctx.allocate_output(2, dtype::float32, tensor_shape{std::vector<std::int64_t>{num_sampled_}});
    for (std::int64_t k = 0; k < num_sampled_; ++k)
      sampled_expected.data<float>()[k] = expected(drawn[k]);
  }

private:
  double probability(std::int64_t value) const {
    return std::log((static_cast<double>(value) + 2.0) / (static_cast<double>(value) + 1.0)) / log_range_;
  }

  std::int64_t num_sampled_, range_;
  bool unique_;
  double log_range_;
  std::mutex mutex_;
  generator generator_;
};

/// max(x, 0) - x * z + log(1 + exp(-|x|))
template <class T>
class sigmoid_xent_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype_of<T>()))
      return;
    auto& x = ctx.input(0);
    auto& z = ctx.input(1);
    if (x.shape() != z.shape())
      return ctx.fail(make_error(errc::invalid_argument,
                                 "SigmoidCrossEntropyWithLogits node '" + name() + "': logits " +
                                   x.shape().to_string() + " and labels " + z.shape().to_string()));
    auto out = ctx.allocate_output(0, dtype_of<T>(), x.shape());
    auto n = x.num_elements();
    auto xs = const_view<T>(x, 0, n);
    auto zs = const_view<T>(z, 0, n);
    view<T>(out, 0, n) = xs.max(T(0)) - xs * zs + (T(1) + (-xs.abs()).exp()).log();
  }
};

/// A very negative number where candidate j is one of example i's true classes: the logit it
/// is added to drops out of a softmax.
template <class T>
class accidental_hit_mask_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;
  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype::int64))
      return;
    auto& truth = ctx.input(0);
    auto& candidates = ctx.input(1);
    if (truth.shape().rank() != 2)
      return ctx.fail(make_error(errc::invalid_argument, "_AccidentalHitMask node '" + name() +
                                                           "': true classes of shape " +
                                                           truth.shape().to_string()));
    auto batch = truth.shape().dim(0), num_true = truth.shape().dim(1);
    auto sampled = candidates.num_elements();
    auto out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{std::vector<std::int64_t>{batch, sampled}});
    T* mask = out.template data<T>();
    // TF adds -FLT_MAX; a tenth of it keeps logit sums finite.
    const T hit = -std::numeric_limits<float>::max() / 10;
    for (std::int64_t i = 0; i < batch; ++i)
      for (std::int64_t j = 0; j < sampled; ++j) {
        T v = 0;
        for (std::int64_t t = 0; t < num_true; ++t)
          if (truth.data<std::int64_t>()[i * num_true + t] == candidates.data<std::int64_t>()[j])
            v = hit;
        mask[i * sampled + j] = v;
      }
  }
};

} // namespace

void register_candidate_sampler_kernels(kernel_registry& registry) {
  registry.add(kernel_key{"LogUniformCandidateSampler", "CPU", dtype::int64},
               &make_kernel<log_uniform_sampler_kernel>);
  add_typed_kernels<sigmoid_xent_kernel, float, double>(registry, "SigmoidCrossEntropyWithLogits");
  // Keyed by input 0, the int64 true classes; the mask's dtype is its attr.
  registry.add(kernel_key{"_AccidentalHitMask", "CPU", dtype::int64}, [](const node& n)
                 -> result<std::unique_ptr<op_kernel>> {
    if (n.attr_or<dtype>("dtype", dtype::float32) == dtype::float64)
      return std::unique_ptr<op_kernel>{std::make_unique<accidental_hit_mask_kernel<double>>(n)};
    return std::unique_ptr<op_kernel>{std::make_unique<accidental_hit_mask_kernel<float>>(n)};
  });
}

} // namespace actorflow
