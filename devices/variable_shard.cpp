#include "devices/variable_shard.hpp"

#include "graph/metrics.hpp"

#include <mutex>

namespace actorflow {

variable_shard::variable_shard(std::string name, std::shared_ptr<device> dev)
  : name_(std::move(name)), dev_(std::move(dev)), state_(dev_->resources().variable(name_)) {}

result<versioned_value> variable_shard::read() const {
  versioned_value now;
  {
    std::lock_guard<std::mutex> guard{state_->mutex};
    if (!state_->value.is_initialized())
      return make_error(errc::failed_precondition,
                        "Attempting to use uninitialized value " + name_ + " (reading the shard)");
    now = versioned_value{state_->value, state_->version};
  }
  // Readers are other tasks and checkpoints: they get host memory.
  auto host = copy_to_host_and_wait(*dev_, now.value);
  if (!host)
    return host.error().with_context("reading variable '" + name_ + "'");
  now.value = std::move(*host);
  return now;
}

std::int64_t variable_shard::version() const {
  std::lock_guard<std::mutex> guard{state_->mutex};
  return state_->version;
}

result<std::int64_t> variable_shard::assign(tensor value) {
  if (!value.is_initialized())
    return make_error(errc::invalid_argument, "assigning an empty tensor to '" + name_ + "'");
  auto on_device = copy_from_host_and_wait(*dev_, value);
  if (!on_device)
    return on_device.error().with_context("assigning to variable '" + name_ + "'");
  value = std::move(*on_device);
  std::lock_guard<std::mutex> guard{state_->mutex};
  auto& stored = state_->value;
  if (stored.is_initialized() && (stored.type() != value.type() || stored.shape() != value.shape()))
    return make_error(errc::invalid_argument,
                      "assign to variable '" + name_ + "': the variable is " +
                        to_string(stored.type()) + stored.shape().to_string() +
                        " but the value is " + to_string(value.type()) +
                        value.shape().to_string());
  stored = std::move(value);
  return state_->count_update();
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
  auto inputs = make_inputs(type);
  for (auto& input : inputs)
    if (input.is_initialized()) {
      auto on_device = copy_from_host_and_wait(*dev_, input);
      if (!on_device)
        return on_device.error().with_context(op + " on variable '" + name_ + "'");
      input = std::move(*on_device);
    }
  kernel_context ctx{*def, *dev_, 0, std::move(inputs)};
  // On this thread, not through the device's compute(): this shard is what orders the
  // variable's updates, and the kernel's ordered wrapper would queue behind it.
  if (auto st = run_guarded([&] { kernel->compute(ctx); }); !st.ok())
    ctx.fail(std::move(st));
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
  auto on_device = copy_from_host_and_wait(*dev_, snapshot.value);
  if (!on_device)
    return on_device.error().with_context("restoring variable '" + name_ + "'");
  snapshot.value = std::move(*on_device);
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->value = std::move(snapshot.value);
  state_->version = snapshot.version;
  return state_->version;
}

variable_shard::~variable_shard() {
  if (state_ && orders_updates_)
    order_updates_through(nullptr);
}

void variable_shard::order_updates_through(std::function<void(pending_update, update_claim)> order) {
  orders_updates_ = static_cast<bool>(order);
  // Served by a shard actor: its updates are the ps's, counted by variable.
  auto* counter = orders_updates_ ? &default_metrics().counter(
                                      "actorflow_shard_updates_total",
                                      "Updates a parameter shard applied, by variable.",
                                      {{"variable", name_}})
                                  : nullptr;
  std::lock_guard<std::mutex> guard{state_->mutex};
  state_->order_update = std::move(order);
  state_->update_counter = counter;
}

} // namespace actorflow
