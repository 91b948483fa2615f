#include "devices/variable_update.hpp"

#include "devices/device.hpp"

#include <algorithm>
#include <utility>

namespace actorflow {

namespace {

/// "ApplyAdam node 'adam/update_w'": how the errors name the kernel.
std::string kernel_words(const op_kernel& kernel) {
  return kernel.op() + " node '" + kernel.name() + "'";
}

status missing_variable_attribute(const op_kernel& kernel) {
  return make_error(errc::invalid_argument,
                    kernel_words(kernel) + " has no 'variable' attribute naming its variable");
}

status uninitialized(const op_kernel& kernel, const std::string& variable) {
  return make_error(errc::failed_precondition, "Attempting to use uninitialized value " +
                                                 variable + " (in " + kernel_words(kernel) + ")");
}

/// The error for a variable and a tensor (`what`) that should have the same type and shape.
status mismatch(const op_kernel& kernel, const std::string& variable, const tensor& value,
                const std::string& what, const tensor& t) {
  return make_error(errc::invalid_argument,
                    kernel.op() + " to variable '" + variable + "': the variable is " +
                      to_string(value.type()) + value.shape().to_string() + " but " + what +
                      " is " + to_string(t.type()) + t.shape().to_string());
}

/// The state of the variable named by attr "variable" (created on first use), or the error
/// for a missing attribute.
result<std::shared_ptr<variable_state>> assigned_state(kernel_context& ctx,
                                                       const op_kernel& kernel,
                                                       const std::string& variable) {
  if (variable.empty())
    return missing_variable_attribute(kernel);
  return ctx.resources().variable(variable);
}

} // namespace

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  std::string::size_type begin = 0;
  while (begin <= list.size() && !list.empty()) {
    auto end = list.find(',', begin);
    if (end == std::string::npos)
      end = list.size();
    names.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return names;
}

std::vector<std::string> updated_variable_names(const node& n, std::size_t count) {
  std::vector<std::string> names(count);
  if (count == 0)
    return names;
  names[0] = n.attr_or<std::string>("variable", "");
  auto slots = split_names(n.attr_or<std::string>("slots", ""));
  for (std::size_t i = 1; i < count && i - 1 < slots.size(); ++i)
    names[i] = slots[i - 1];
  return names;
}

long references_from_inputs(const kernel_context& ctx, const tensor& t) {
  long count = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).shares_buffer_with(t))
      ++count;
  return count;
}

bool exclusively_owned(const kernel_context& ctx, const tensor& held) {
  return held.buffer_ref().use_count() == 1 + references_from_inputs(ctx, held);
}

std::vector<std::unique_lock<std::mutex>>
lock_in_address_order(const std::vector<variable_state*>& states) {
  auto order = states;
  std::sort(order.begin(), order.end(), std::less<variable_state*>{});
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(order.size());
  for (auto* state : order)
    locks.emplace_back(state->mutex);
  return locks;
}

template <class Writable>
void variable_update::choose_buffers(kernel_context& ctx, Writable&& writable) {
  fresh_.assign(states_.size(), tensor{});
  for (std::size_t i = 0; i < states_.size(); ++i) {
    const tensor& stored = states_[i]->value;
    // Someone still reads the old value: build the new one beside it; commit() swaps it in.
    if (!writable(stored))
      fresh_[i] = tensor{stored.type(), stored.shape(), ctx.dev().device_allocator()};
  }
}

status variable_update::prepare(kernel_context& ctx, const op_kernel& kernel,
                                const std::vector<std::string>& names, dtype type,
                                const std::vector<int>& like_variable,
                                const std::vector<int>& scalars,
                                const std::vector<int>& index_inputs) {
  auto refs = names.size();
  for (std::size_t i = 0; i < refs; ++i)
    if (names[i].empty())
      return i == 0 ? missing_variable_attribute(kernel)
                    : make_error(errc::invalid_argument,
                                 kernel_words(kernel) +
                                   " has no 'slots' attribute naming its slot variable " +
                                   std::to_string(i));
  for (int i = static_cast<int>(refs); i < ctx.num_inputs(); ++i) {
    bool index = std::find(index_inputs.begin(), index_inputs.end(), i) != index_inputs.end();
    if (!index) {
      AF_RETURN_IF_ERROR(rules_.check_input(ctx, i, type));
      continue;
    }
    auto given = ctx.input(i).is_initialized() ? ctx.input(i).type() : dtype::int64;
    if (given != dtype::int32 && given != dtype::int64)
      return make_error(errc::invalid_argument, kernel_words(kernel) + ": input " +
                                                  std::to_string(i) + " (row indices) is " +
                                                  to_string(given) + ", not int32 or int64");
    AF_RETURN_IF_ERROR(rules_.check_input(ctx, i, given));
  }
  std::vector<std::shared_ptr<variable_state>> states(refs);
  for (std::size_t i = 0; i < refs; ++i) {
    states[i] = ctx.resources().variable(names[i]);
    for (std::size_t j = 0; j < i; ++j)
      if (states[j] == states[i])
        return make_error(errc::invalid_argument,
                          kernel_words(kernel) + " names variable '" + names[i] + "' twice");
  }
  std::vector<variable_state*> raw(refs);
  for (std::size_t i = 0; i < refs; ++i)
    raw[i] = states[i].get();
  locks_ = lock_in_address_order(raw);
  states_ = std::move(states);

  for (std::size_t i = 0; i < refs; ++i)
    if (!states_[i]->value.is_initialized())
      return uninitialized(kernel, names[i]);
  const tensor& var = states_[0]->value;
  if (var.type() != type)
    return make_error(errc::invalid_argument, kernel.op() + " to variable '" + names[0] +
                                                "': the variable is " + to_string(var.type()) +
                                                " but the update is " + to_string(type));
  for (std::size_t i = 1; i < refs; ++i) {
    const tensor& slot = states_[i]->value;
    if (slot.type() != var.type() || slot.shape() != var.shape())
      return mismatch(kernel, names[0], var, "slot variable '" + names[i] + "'", slot);
  }
  for (auto i : like_variable)
    if (ctx.input(i).shape() != var.shape())
      return mismatch(kernel, names[0], var, "input " + std::to_string(i), ctx.input(i));
  for (auto i : scalars)
    if (ctx.input(i).num_elements() != 1)
      return mismatch(kernel, names[0], var, "input " + std::to_string(i) + " (a scalar)",
                      ctx.input(i));
  if (rules_.own_memory_only)
    for (std::size_t i = 0; i < refs; ++i)
      if (states_[i]->value.space() != ctx.dev().memory())
        return make_error(errc::internal, kernel.op() + ": variable '" + names[i] +
                                            "' is not in the memory of " + ctx.dev().full_name());

  // The ref inputs (the variables' own outputs) end with the call and are never read as values
  // here, so they do not keep a buffer from being written; a data input sharing it does.
  choose_buffers(ctx, [&](const tensor& stored) {
    long from_refs = 0;
    for (std::size_t i = 0; i < refs && static_cast<int>(i) < ctx.num_inputs(); ++i)
      if (ctx.input(static_cast<int>(i)).shares_buffer_with(stored))
        ++from_refs;
    return stored.buffer_ref().use_count() == 1 + from_refs;
  });
  return {};
}

status variable_update::prepare_assign_update(kernel_context& ctx, const op_kernel& kernel,
                                              const std::string& variable, dtype type) {
  AF_RETURN_IF_ERROR(rules_.check_input(ctx, 1, type));
  auto state = assigned_state(ctx, kernel, variable);
  if (!state)
    return state.error();
  locks_ = lock_in_address_order({state->get()});
  states_ = {std::move(*state)};
  const tensor& stored = states_[0]->value;
  if (!stored.is_initialized())
    return uninitialized(kernel, variable);
  const tensor& delta = ctx.input(1);
  if (stored.type() != delta.type() || stored.shape() != delta.shape())
    return mismatch(kernel, variable, stored, "the value", delta);
  // A GPU kernel given a host pointer would fault and end its CUDA context.
  if (rules_.own_memory_only && stored.space() != ctx.dev().memory())
    return make_error(errc::internal, kernel.op() + ": variable '" + variable +
                                        "' is not in the memory of " + ctx.dev().full_name());
  choose_buffers(ctx, [&](const tensor& held) { return exclusively_owned(ctx, held); });
  return {};
}

std::int64_t variable_update::num_elements() const {
  return states_.empty() ? 0 : states_[0]->value.num_elements();
}

void variable_update::commit(kernel_context& ctx) {
  for (std::size_t i = 0; i < states_.size(); ++i)
    if (fresh_[i].is_initialized())
      states_[i]->value = std::move(fresh_[i]);
  states_[0]->count_update();
  ctx.set_output(0, states_[0]->value);
}

status assign_variable(kernel_context& ctx, const op_kernel& kernel, const std::string& variable,
                       dtype type, const update_rules& rules,
                       const overwrite_function& overwrite) {
  AF_RETURN_IF_ERROR(rules.check_input(ctx, 1, type));
  auto state = assigned_state(ctx, kernel, variable);
  if (!state)
    return state.error();
  variable_state& var = **state;
  const tensor& value = ctx.input(1);
  std::lock_guard<std::mutex> guard{var.mutex};
  auto& stored = var.value;
  if (value.buffer_ref().use_count() == references_from_inputs(ctx, value)) {
    // Only ctx holds the value: adopt its buffer, no copy.
    stored = value;
  } else if (stored.is_initialized() && stored.type() == value.type() &&
             stored.shape() == value.shape() && !stored.shares_buffer_with(value) &&
             (!rules.own_memory_only || stored.space() == value.space()) &&
             exclusively_owned(ctx, stored)) {
    // Nobody reads the old buffer any more: overwrite it and allocate nothing.
    AF_RETURN_IF_ERROR(overwrite(stored, value));
  } else {
    auto copy = ctx.dev().copy_on_device(value);
    if (!copy)
      return copy.error();
    stored = std::move(*copy);
  }
  var.count_update();
  ctx.set_output(0, stored);
  return {};
}

} // namespace actorflow
