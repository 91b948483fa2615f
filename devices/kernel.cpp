#include "devices/kernel.hpp"

#include "devices/commit_gate.hpp"

#include "devices/device.hpp"
#include "devices/memory_budget.hpp"
#include "devices/test_device.hpp"
#if defined(ACTORFLOW_HAVE_CUDA)
#include "devices/cuda/kernels/cuda_kernels.hpp"
#endif
#include "devices/thread_pool.hpp"
#include "graph/metrics.hpp"
#include "graph/op_registry.hpp"

#include <algorithm>
#include <atomic>

namespace actorflow {

std::int64_t variable_state::count_update() {
  if (update_counter != nullptr)
    update_counter->add();
  return ++version;
}

// --- resource_manager ----------------------------------------------------------------------

std::shared_ptr<variable_state> resource_manager::variable(const std::string& name) {
  std::shared_ptr<variable_state> state;
  std::function<void(const std::string&)> observer;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto& slot = variables_[name];
    if (slot != nullptr)
      return slot;
    slot = std::make_shared<variable_state>();
    state = slot;
    observer = observer_;
  }
  if (observer)
    observer(name);
  return state;
}

void resource_manager::on_variable_created(std::function<void(const std::string&)> observer) {
  std::lock_guard<std::mutex> guard{mutex_};
  observer_ = std::move(observer);
}

std::shared_ptr<variable_state> resource_manager::find_variable(const std::string& name) const {
  std::lock_guard<std::mutex> guard{mutex_};
  auto i = variables_.find(name);
  return i == variables_.end() ? nullptr : i->second;
}

std::vector<std::string> resource_manager::variable_names() const {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    names.reserve(variables_.size());
    for (auto& entry : variables_)
      names.push_back(entry.first);
  }
  // Sorted so that callers (checkpoints, tests) see a stable order.
  std::sort(names.begin(), names.end());
  return names;
}

std::shared_ptr<op_kernel> resource_manager::session_kernel(std::int64_t session,
                                                            std::shared_ptr<op_kernel> made) {
  std::lock_guard<std::mutex> guard{mutex_};
  // Kernels whose plans are all gone (their sessions closed) leave expired entries: drop them.
  for (auto i = session_kernels_.begin(); i != session_kernels_.end();)
    i = i->second.expired() ? session_kernels_.erase(i) : std::next(i);
  auto& entry = session_kernels_[{session, made->name()}];
  if (auto known = entry.lock(); known && known->op() == made->op())
    return known;
  entry = made;
  return made;
}

// --- step_cancellation ---------------------------------------------------------------------

std::uint64_t step_cancellation::add(std::function<void()> cancel) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (cancelled_)
    return 0;
  auto token = next_token_++;
  waiting_.emplace(token, std::move(cancel));
  return token;
}

bool step_cancellation::remove(std::uint64_t token) {
  std::lock_guard<std::mutex> guard{mutex_};
  return waiting_.erase(token) > 0;
}

void step_cancellation::cancel_all() {
  std::unordered_map<std::uint64_t, std::function<void()>> waiting;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    cancelled_ = true;
    waiting.swap(waiting_);
  }
  // Outside the lock: a cancel completes its kernel, which may start other work.
  for (auto& [token, cancel] : waiting)
    cancel();
}

// --- step_resources ------------------------------------------------------------------------

void step_resources::push(const std::string& stack, const index& at, tensor value) {
  std::function<void(result<tensor>)> waiter;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto key = std::make_pair(stack, at);
    if (auto w = waiting_.find(key); w != waiting_.end()) {
      waiter = std::move(w->second);
      waiting_.erase(w);
    } else {
      values_[key] = std::move(value);
      return;
    }
  }
  waiter(std::move(value));
}

void step_resources::pop(const std::string& stack, const index& at,
                         std::function<void(result<tensor>)> done) {
  tensor value;
  status failed;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    auto key = std::make_pair(stack, at);
    if (auto v = values_.find(key); v != values_.end()) {
      value = std::move(v->second);
      values_.erase(v);
    } else if (!cancelled_.ok()) {
      failed = cancelled_;
    } else {
      waiting_[key] = std::move(done);
      return;
    }
  }
  if (failed.ok())
    done(std::move(value));
  else
    done(std::move(failed));
}

void step_resources::cancel(const status& reason) {
  std::map<std::pair<std::string, index>, std::function<void(result<tensor>)>> waiting;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (cancelled_.ok())
      cancelled_ = reason;
    waiting.swap(waiting_);
  }
  for (auto& [key, done] : waiting)
    done(reason);
}

// --- kernel_context ------------------------------------------------------------------------

status input_status(const kernel_context& ctx, int i, dtype expected) {
  if (i >= ctx.num_inputs())
    return make_error(errc::invalid_argument, ctx.def().op + " expects at least " +
                                                std::to_string(i + 1) + " inputs, got " +
                                                std::to_string(ctx.num_inputs()));
  const tensor& t = ctx.input(i);
  if (!t.is_initialized())
    return make_error(errc::failed_precondition,
                      ctx.def().op + " input " + std::to_string(i) + " is an empty tensor");
  if (t.type() != expected)
    return make_error(errc::invalid_argument, ctx.def().op + " input " + std::to_string(i) +
                                                " has dtype " + to_string(t.type()) +
                                                ", expected " + to_string(expected));
  return {};
}

kernel_context::kernel_context(const node& n, device& dev, std::int64_t step_id,
                               std::vector<tensor> inputs)
  : node_(n), device_(dev), step_id_(step_id), inputs_(std::move(inputs)),
    outputs_(n.output_types.size()) {}

tensor kernel_context::allocate_output(int i, dtype type, tensor_shape shape) {
  tensor t = budget_ != nullptr ? budget_->allocate(type, std::move(shape), device_.device_allocator())
                                : tensor{type, std::move(shape), device_.device_allocator()};
  set_output(i, t);
  return t;
}

void kernel_context::set_output(int i, tensor t) {
  auto index = static_cast<std::size_t>(i);
  // Nodes built by hand in tests may not list their output types; grow instead of failing.
  if (index >= outputs_.size())
    outputs_.resize(index + 1);
  outputs_[index] = std::move(t);
}

thread_pool& kernel_context::intra_op_pool() { return device_.intra_op_pool(); }

resource_manager& kernel_context::resources() { return device_.resources(); }

// --- ordered updates -----------------------------------------------------------------------

namespace {

/// Wraps the kernel of an op that updates a variable (Assign*, Apply*): where a shard actor
/// orders the variable's updates, the update waits for its turn in that actor's mailbox;
/// elsewhere it runs at once. compute() always runs at once: it is what the shard itself calls.
class ordered_update_kernel final : public op_kernel {
public:
  ordered_update_kernel(const node& n, std::unique_ptr<op_kernel> inner)
    : op_kernel(n), variable_(n.attr_or<std::string>("variable", "")),
      first_update_(n.attr_or<bool>(commit_gate_attr, false)), inner_(std::move(inner)) {}

  void compute(kernel_context& ctx) override { inner_->compute(ctx); }
  bool is_async() const override { return true; }
  bool is_expensive() const override { return inner_->is_expensive(); }
  bool host_memory_input(int i) const override { return inner_->host_memory_input(i); }

  void compute_async(kernel_context& ctx, std::function<void()> done) override {
    std::function<void(pending_update, update_claim)> order;
    auto state = variable_state_of(ctx);
    if (state) {
      std::lock_guard<std::mutex> guard{state->mutex};
      order = state->order_update;
    }
    // The executor keeps ctx alive until done() runs.
    auto apply = [this, &ctx, state, order = std::move(order)](std::function<void()> done) {
      if (!order) {
        run_inner(ctx, std::move(done));
        return;
      }
      apply_in_turn(ctx, state, order, std::move(done));
    };
    if (first_update_ && ctx.gate() != nullptr) {
      // All of the step's first updates apply, or none: wait for the step to commit.
      ctx.gate()->hold([this, &ctx, apply, done = std::move(done)](bool commit) mutable {
        if (commit) {
          apply(std::move(done));
          return;
        }
        ctx.fail(make_error(errc::aborted, op() + " node '" + name() + "' of variable '" +
                                             variable_ + "' not applied: its step ended "
                                                         "before every update of it was ready"));
        done();
      });
      return;
    }
    apply(std::move(done));
  }

private:
  /// Hands the update to the shard actor that orders the variable's updates (`order`).
  void apply_in_turn(kernel_context& ctx, const std::shared_ptr<variable_state>& state,
                     const std::function<void(pending_update, update_claim)>& order,
                     std::function<void()> done) {
    auto turn = [this, &ctx, state, done = std::move(done)](update_turn t) mutable {
      switch (t) {
        case update_turn::apply:
          run_inner(ctx, std::move(done));
          return;
        case update_turn::repeat:
          // Applied by an earlier attempt of the closure: the node yields the variable as it
          // is, as the update kernels yield it after updating.
          if (!ctx.def().output_types.empty()) {
            std::lock_guard<std::mutex> guard{state->mutex};
            ctx.set_output(0, state->value);
          }
          break;
        case update_turn::cancelled:
          ctx.fail(make_error(errc::aborted, "the shard of variable '" + variable_ +
                                               "' stopped before applying " + op() + " node '" +
                                               name() + "'"));
          break;
      }
      done();
    };
    // Only a fenced claim is checked by name: others carry none (no copy per step).
    order(std::move(turn), update_claim{ctx.fence(), ctx.fence().fenced() ? name() : std::string{}});
  }

  /// The update itself, wherever it is let go (at once, at its turn in the shard's mailbox, at
  /// the step's commit): through the device, which guards against throws (a failure, never a
  /// step that hangs) and runs it as its other kernels (the right GPU, done once finished).
  void run_inner(kernel_context& ctx, std::function<void()> done) {
    ctx.dev().compute(*inner_, ctx, std::move(done));
  }

  /// The variable's storage, looked up by name until it exists and kept from then on: a
  /// device's resource manager never drops a variable, and a kernel serves one device.
  std::shared_ptr<variable_state> variable_state_of(kernel_context& ctx) {
    auto known = std::atomic_load(&state_);
    if (!known) {
      known = ctx.resources().find_variable(variable_);
      if (known)
        std::atomic_store(&state_, known);
    }
    return known;
  }

  std::string variable_;
  /// One of its step's first updates (the master marks them at registration): an
  /// all-or-nothing step holds it until the step commits.
  bool first_update_;
  std::unique_ptr<op_kernel> inner_;
  std::shared_ptr<variable_state> state_;
};

} // namespace

// --- kernel_registry -----------------------------------------------------------------------

kernel_registry& kernel_registry::global() {
  // A function-local static makes the one-time registration thread-safe; registration is
  // explicit because self-registering statics get dropped when linking static libraries.
  static kernel_registry* registry = [] {
    auto* r = new kernel_registry;
    register_cpu_kernels(*r);
    // The test device runs the CPU's kernels on its stream (devices/test_device.hpp).
    r->add_device_type_like(test_device_type, "CPU");
#if defined(ACTORFLOW_HAVE_CUDA)
    register_cuda_kernels(*r);
#endif
    return r;
  }();
  return *registry;
}

std::string kernel_registry::key_string(const std::string& op, const std::string& device_type,
                                        dtype t) {
  std::string key;
  key.reserve(op.size() + device_type.size() + 10);
  key += op;
  key += '\0';
  key += device_type;
  key += '\0';
  key += to_string(t);
  return key;
}

void kernel_registry::add(const kernel_key& key, kernel_factory factory) {
  factories_[key_string(key.op, key.device_type, key.type)] = std::move(factory);
}

void kernel_registry::add(const std::string& op, const std::string& device_type,
                          std::vector<dtype> types, kernel_factory factory) {
  for (auto t : types)
    factories_[key_string(op, device_type, t)] = factory;
}

bool kernel_registry::has(const std::string& op, const std::string& device_type,
                          dtype type) const {
  return factories_.count(key_string(op, device_type, type)) > 0;
}

std::string kernel_key_name(const std::string& op, dtype type) {
  return op + ":" + to_string(type);
}

kernel_registry::key_fields kernel_registry::split_key(const std::string& key) {
  std::string_view view{key};
  auto first = view.find('\0');
  auto second = view.find('\0', first + 1);
  return {view.substr(0, first), view.substr(first + 1, second - first - 1),
          view.substr(second + 1)};
}

std::vector<std::string> kernel_registry::kernels_for(const std::string& device_type) const {
  std::vector<std::string> names;
  for (auto& entry : factories_) {
    auto fields = split_key(entry.first);
    if (fields.device_type == device_type)
      names.push_back(std::string{fields.op} + ":" + std::string{fields.type});
  }
  std::sort(names.begin(), names.end());
  return names;
}

void kernel_registry::add_device_type_like(const std::string& new_type,
                                           const std::string& existing_type) {
  std::vector<std::pair<std::string, kernel_factory>> copies;
  for (auto& [key, factory] : factories_) {
    auto fields = split_key(key);
    if (fields.device_type == existing_type)
      copies.emplace_back(std::string{fields.op} + '\0' + new_type + '\0' + std::string{fields.type},
                          factory);
  }
  for (auto& [key, factory] : copies)
    factories_[key] = std::move(factory);
}

result<std::unique_ptr<op_kernel>> kernel_registry::create(const node& n,
                                                           const std::string& device_type) const {
  auto i = factories_.find(key_string(n.op, device_type, n.kernel_type));
  if (i == factories_.end())
    return make_error(errc::unimplemented, "no kernel registered for op '" + n.op +
                                             "' on device type '" + device_type +
                                             "' with dtype " + to_string(n.kernel_type) +
                                             " (node '" + n.name + "')");
  auto made = i->second(n);
  if (!made)
    return made.error().with_context("cannot make the " + device_type + " kernel for node '" +
                                     n.name + "' (" + n.op + ")");
  if (auto* def = op_registry::global().find(n.op); def != nullptr && def->takes_variable_ref)
    return std::unique_ptr<op_kernel>{std::make_unique<ordered_update_kernel>(n, std::move(*made))};
  return made;
}

} // namespace actorflow
