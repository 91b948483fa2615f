#include "devices/variable_shard.hpp"

#include <mutex>

namespace actorflow {

variable_shard::variable_shard(std::string name, std::shared_ptr<device> dev)
  : name_(std::move(name)), dev_(std::move(dev)), state_(dev_->resources().variable(name_)) {}

result<versioned_value> variable_shard::read() const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  if (!state_->value.is_initialized())
    return make_error(errc::failed_precondition,
                      "Attempting to use uninitialized value " + name_ + " (reading the shard)");
  return versioned_value{state_->value, state_->version};
}

std::int64_t variable_shard::version() const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  return state_->version;
}

result<std::int64_t> variable_shard::assign(tensor value) {
  if (!value.is_initialized())
    return make_error(errc::invalid_argument, "assigning an empty tensor to '" + name_ + "'");
  std::lock_guard<std::mutex> guard{state_->mutex};
  auto& stored = state_->value;
  if (stored.is_initialized() && (stored.type() != value.type() || stored.shape() != value.shape()))
    return make_error(errc::invalid_argument,
                      "assign to variable '" + name_ + "': the variable is " +
                        to_string(stored.type()) + stored.shape().to_string() +
                        " but the value is " + to_string(value.type()) +
                        value.shape().to_string());
  stored = std::move(value);
  return ++state_->version;
}

result<std::int64_t>
variable_shard::run_kernel(const std::string& op,
                           const std::function<std::vector<tensor>(dtype)>& make_inputs) {
  dtype type;
  {
    std::lock_guard<std::mutex> guard{state_->mutex};
    if (!state_->value.is_initialized())
      return make_error(errc::failed_precondition,
                        "Attempting to use uninitialized value " + name_ + " (" + op + ")");
    type = state_->value.type();
  }
  auto& [def, kernel] = kernels_[{op, type}];
  if (!kernel) {
    def = std::make_unique<node>();
    def->name = name_ + "/shard_" + op;
    def->op = op;
    def->attrs = {{"variable", name_}};
    def->kernel_type = type;
    def->output_types = {type};
    def->output_shapes = {tensor_shape{}};
    auto made = kernel_registry::global().create(*def, dev_->type());
    if (!made)
      return made.error();
    kernel = std::move(*made);
  }
  kernel_context ctx{*def, *dev_, 0, make_inputs(type)};
  kernel->compute(ctx);
  AF_RETURN_IF_ERROR(ctx.status());
  return version();
}

result<std::int64_t> variable_shard::assign_add(const tensor& delta) {
  return run_kernel("AssignAdd", [&](dtype) { return std::vector<tensor>{tensor{}, delta}; });
}

result<std::int64_t> variable_shard::apply_gradient_descent(double learning_rate,
                                                            const tensor& gradient) {
  if (!is_floating(gradient.type()))
    return make_error(errc::invalid_argument,
                      "a gradient for '" + name_ + "' must be floating point, got " +
                        to_string(gradient.type()));
  return run_kernel("ApplyGradientDescent", [&](dtype type) {
    // The rate in the variable's dtype, as the kernel reads it.
    auto rate = type == dtype::float32 ? tensor::scalar(static_cast<float>(learning_rate))
                                       : tensor::scalar(learning_rate);
    return std::vector<tensor>{tensor{}, std::move(rate), gradient};
  });
}

result<std::int64_t> variable_shard::restore(versioned_value snapshot) {
  if (!snapshot.value.is_initialized())
    return make_error(errc::invalid_argument, "restoring an empty value into '" + name_ + "'");
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->value = std::move(snapshot.value);
  state_->version = snapshot.version;
  return state_->version;
}

variable_shard::~variable_shard() {
  if (state_ && orders_updates_)
    order_updates_through(nullptr);
}

void variable_shard::order_updates_through(std::function<void(pending_update)> order) {
  orders_updates_ = static_cast<bool>(order);
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->order_update = std::move(order);
}

} // namespace actorflow
