#include "devices/variable_shard.hpp"

#include <mutex>

namespace actorflow {

variable_shard::variable_shard(std::string name, std::shared_ptr<variable_state> state)
  : name_(std::move(name)), state_(std::move(state)) {}

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

status variable_shard::check_like(const tensor& other, const char* what) const {
  auto& stored = state_->value;
  if (!stored.is_initialized())
    return make_error(errc::failed_precondition,
                      "Attempting to use uninitialized value " + name_ + " (" + what + ")");
  if (!other.is_initialized() || other.type() != stored.type() || other.shape() != stored.shape())
    return make_error(errc::invalid_argument,
                      std::string{what} + " to variable '" + name_ + "': the variable is " +
                        to_string(stored.type()) + stored.shape().to_string() + " but the value is " +
                        (other.is_initialized()
                           ? std::string{to_string(other.type())} + other.shape().to_string()
                           : std::string{"empty"}));
  return {};
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

template <class Update>
result<std::int64_t> variable_shard::update(const tensor& other, const char* what, Update&& fn) {
  std::lock_guard<std::mutex> guard{state_->mutex};
  AF_RETURN_IF_ERROR(check_like(other, what));
  auto& stored = state_->value;
  if (!is_floating(stored.type()) && !is_integer(stored.type()))
    return make_error(errc::invalid_argument, std::string{what} + " to variable '" + name_ +
                                                "': dtype " + to_string(stored.type()) +
                                                " has no arithmetic");
  // Only the variable holds the buffer: write it in place. Otherwise a reader still holds it.
  bool in_place = stored.buffer_ref().use_count() == 1;
  tensor out = in_place ? stored : tensor{stored.type(), stored.shape()};
  auto count = static_cast<std::size_t>(stored.num_elements());
  visit_dtype(stored.type(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* a = stored.data<T>();
      const T* b = other.data<T>();
      T* o = out.data<T>();
      for (std::size_t i = 0; i < count; ++i)
        o[i] = fn(a[i], b[i]);
    }
    return 0;
  });
  if (!in_place)
    stored = std::move(out);
  return ++state_->version;
}

result<std::int64_t> variable_shard::assign_add(const tensor& delta) {
  return update(delta, "assign_add", [](auto a, auto b) { return a + b; });
}

result<std::int64_t> variable_shard::apply_gradient_descent(double learning_rate,
                                                            const tensor& gradient) {
  if (!is_floating(gradient.type()))
    return make_error(errc::invalid_argument,
                      "a gradient for '" + name_ + "' must be floating point, got " +
                        to_string(gradient.type()));
  return update(gradient, "apply_gradient_descent", [learning_rate](auto a, auto b) {
    using T = decltype(a);
    return static_cast<T>(a - static_cast<T>(learning_rate) * b);
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

} // namespace actorflow
