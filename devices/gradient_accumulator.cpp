#include "devices/gradient_accumulator.hpp"

#include <algorithm>
#include <cstring>

namespace actorflow {

gradient_accumulator::gradient_accumulator(std::string name, dtype type, tensor_shape shape,
                                           int replicas_to_aggregate, std::int64_t global_step)
  : name_(std::move(name)),
    type_(type),
    shape_(std::move(shape)),
    replicas_(std::max(1, replicas_to_aggregate)),
    global_step_(global_step) {}

result<gradient_accumulator::offer_outcome>
gradient_accumulator::offer(std::int64_t local_step, int worker, const tensor& gradient,
                            std::uint64_t incarnation, double loss, double accuracy) {
  if (!is_floating(type_))
    return make_error(errc::invalid_argument, "cannot accumulate gradients of '" + name_ +
                                                "': dtype " + to_string(type_) +
                                                " is not floating point");
  if (!gradient.is_initialized() || gradient.type() != type_ || gradient.shape() != shape_)
    return make_error(errc::invalid_argument,
                      "a gradient for '" + name_ + "' must be " + to_string(type_) +
                        shape_.to_string() + ", got " +
                        (gradient.is_initialized()
                           ? std::string{to_string(gradient.type())} + gradient.shape().to_string()
                           : std::string{"an empty tensor"}));
  if (!lives_.admit(std::to_string(worker), incarnation))
    return offer_outcome::retired;
  if (local_step > global_step_)
    return make_error(errc::failed_precondition,
                      "worker " + std::to_string(worker) + " sent a gradient for '" + name_ +
                        "' computed at step " + std::to_string(local_step) +
                        ", past the global step " + std::to_string(global_step_));
  if (local_step < global_step_) {
    ++stale_;
    return offer_outcome::stale;
  }
  if (contributors_.count(worker) > 0) {
    ++duplicates_;
    return offer_outcome::duplicate;
  }
  auto count = static_cast<std::size_t>(gradient.num_elements());
  if (!sum_.is_initialized()) {
    sum_ = tensor{dtype::float64, shape_};
    std::fill(sum_.data<double>(), sum_.data<double>() + count, 0.0);
  }
  auto* sum = sum_.data<double>();
  if (type_ == dtype::float32) {
    auto* g = gradient.data<float>();
    for (std::size_t i = 0; i < count; ++i)
      sum[i] += g[i];
  } else {
    auto* g = gradient.data<double>();
    for (std::size_t i = 0; i < count; ++i)
      sum[i] += g[i];
  }
  contributors_.insert(worker);
  sums_.loss += loss;
  sums_.accuracy += accuracy;
  return offer_outcome::accepted;
}

std::optional<tensor> gradient_accumulator::take_average() {
  if (!ready())
    return std::nullopt;
  return close_round();
}

std::optional<tensor> gradient_accumulator::take_short_average() {
  if (ready() || contributors_.empty())
    return std::nullopt;
  ++short_rounds_;
  return close_round();
}

tensor gradient_accumulator::close_round() {
  auto count = static_cast<std::size_t>(shape_.num_elements());
  tensor average{type_, shape_};
  auto scale = 1.0 / static_cast<double>(contributors_.size());
  auto* sum = sum_.data<double>();
  if (type_ == dtype::float32) {
    auto* out = average.data<float>();
    for (std::size_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(sum[i] * scale);
  } else {
    auto* out = average.data<double>();
    for (std::size_t i = 0; i < count; ++i)
      out[i] = sum[i] * scale;
  }
  std::fill(sum, sum + count, 0.0);
  last_round_ = {sums_.loss * scale, sums_.accuracy * scale, static_cast<int>(contributors_.size())};
  sums_ = {};
  contributors_.clear();
  ++global_step_;
  return average;
}

} // namespace actorflow
