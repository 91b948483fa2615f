#include "devices/executor.hpp"

#include "devices/commit_gate.hpp"

#include "graph/op_registry.hpp"

#include <algorithm>
#include <new>
#include <stdexcept>

namespace actorflow {

// --- plan ------------------------------------------------------------------------------------

result<std::shared_ptr<const executor_plan>>
executor_plan::make(std::shared_ptr<const graph> partition, device& dev,
                    const kernel_registry& registry, std::shared_ptr<memory_budget> budget) {
  auto plan = std::make_shared<executor_plan>();
  plan->partition_ = partition;
  plan->budget_ = std::move(budget);
  plan->device_ = &dev;
  plan->own_memory_ = dev.memory() != nullptr;
  auto& g = *partition;
  plan->items_.resize(g.size());
  int slot = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    auto& it = plan->items_[i];
    it.def = &n;
    it.first_slot = slot;
    it.num_outputs = static_cast<int>(n.output_types.size());
    slot += it.num_outputs;
    plan->by_name_.emplace(n.name, static_cast<int>(i));
    if (n.attr_or<bool>(commit_gate_attr, false))
      ++plan->gated_updates_;
  }
  plan->num_slots_ = slot;
  plan->slot_readers_.assign(static_cast<std::size_t>(slot), 0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    auto& it = plan->items_[i];
    auto* def = op_registry::global().find(n.op);
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      auto is_ref = def != nullptr && def->is_variable_ref_input(static_cast<int>(k));
      it.variable_ref_inputs.push_back(is_ref);
    }
    if (n.op == "_Send" || n.op == "_Recv") {
      it.kind = n.op == "_Send" ? node_kind::send : node_kind::recv;
      auto* key = n.attr<std::string>("key");
      if (key == nullptr)
        return make_error(errc::invalid_argument, "node '" + n.name + "' has no rendezvous key");
      it.key = *key;
    } else {
      auto kernel = registry.create(n, dev.type());
      if (!kernel)
        return kernel.error().with_context("node '" + n.name + "' on " + dev.full_name());
      it.kernel = std::move(*kernel);
      it.may_inline = !it.kernel->is_expensive();
    }
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      auto& in = n.inputs[k];
      auto& producer = plan->items_[static_cast<std::size_t>(in.node_id)];
      it.input_slots.push_back(producer.first_slot + in.index);
      ++plan->slot_readers_[static_cast<std::size_t>(producer.first_slot + in.index)];
      it.input_nodes.push_back(in.node_id);
      auto reads_variable = producer.def->op == "VariableV2" && !it.variable_ref_inputs[k];
      it.input_variables.push_back(reads_variable ? dev.resources().variable(producer.def->name)
                                                  : nullptr);
      producer.consumers.push_back(static_cast<int>(i));
    }
    for (auto c : n.control_inputs)
      plan->items_[static_cast<std::size_t>(c)].consumers.push_back(static_cast<int>(i));
    it.initial_pending = static_cast<int>(n.inputs.size() + n.control_inputs.size());
    if (it.initial_pending == 0)
      plan->roots_.push_back(static_cast<int>(i));
  }
  return std::shared_ptr<const executor_plan>{std::move(plan)};
}

int executor_plan::find(const std::string& name) const {
  auto i = by_name_.find(name);
  return i == by_name_.end() ? -1 : i->second;
}

int executor_plan::slot_of(const std::string& tensor_name) const {
  auto colon = tensor_name.rfind(':');
  auto id = find(tensor_name);
  int index = 0;
  if (id < 0 && colon != std::string::npos) {
    id = find(tensor_name.substr(0, colon));
    index = std::atoi(tensor_name.c_str() + colon + 1);
  }
  if (id < 0)
    return -1;
  auto& it = items_[static_cast<std::size_t>(id)];
  return index < it.num_outputs ? it.first_slot + index : -1;
}

// --- step ------------------------------------------------------------------------------------

step_execution::step_execution(std::shared_ptr<const executor_plan> plan, std::int64_t step_id,
                               step_hooks hooks)
  : plan_(std::move(plan)), step_id_(step_id), hooks_(std::move(hooks)) {}

void step_execution::start(std::vector<std::pair<std::string, tensor>> feeds,
                           std::vector<std::string> fetches, done_callback done) {
  started_ = std::chrono::steady_clock::now();
  auto& items = plan_->items();
  done_ = std::move(done);
  slots_.resize(static_cast<std::size_t>(plan_->num_slots()));
  pending_.reset(new std::atomic<int>[items.size()]);
  for (std::size_t i = 0; i < items.size(); ++i)
    pending_[i].store(items[i].initial_pending, std::memory_order_relaxed);
  fed_.assign(items.size(), false);
  auto& readers = plan_->slot_readers();
  readers_left_.reset(new std::atomic<int>[readers.size()]);
  for (std::size_t i = 0; i < readers.size(); ++i)
    readers_left_[i].store(readers[i], std::memory_order_relaxed);
  for (auto& [name, value] : feeds) {
    auto slot = plan_->slot_of(name);
    auto colon = name.rfind(':');
    auto id = plan_->find(name);
    if (id < 0 && colon != std::string::npos)
      id = plan_->find(name.substr(0, colon));
    if (slot < 0 || id < 0) {
      done_(make_error(errc::not_found, "fed tensor '" + name + "' is not in the partition on " +
                                          plan_->dev().full_name()),
            {});
      return;
    }
    slots_[static_cast<std::size_t>(slot)] = std::move(value);
    fed_[static_cast<std::size_t>(id)] = true;
  }
  for (auto& name : fetches) {
    auto slot = plan_->slot_of(name);
    if (slot < 0) {
      done_(make_error(errc::not_found, "fetched tensor '" + name + "' is not in the partition on " +
                                          plan_->dev().full_name()),
            {});
      return;
    }
    fetch_slots_.push_back(slot);
    // A fetched slot is kept to the end of the step.
    readers_left_[static_cast<std::size_t>(slot)].fetch_add(1, std::memory_order_relaxed);
  }
  auto& roots = plan_->roots();
  if (roots.empty()) {
    outstanding_.store(1, std::memory_order_relaxed);
    finish_one();
    return;
  }
  // Hold one extra count while dispatching the roots so the step cannot finish early.
  outstanding_.store(static_cast<std::int64_t>(roots.size()) + 1, std::memory_order_relaxed);
  std::vector<int> ready(roots.begin(), roots.end());
  dispatch(ready, false);
  finish_one();
}

void step_execution::set_gate(std::shared_ptr<commit_gate> gate) {
  gate_ = std::move(gate);
  // Whatever ends the step first (a node failing here, an abort from elsewhere) releases the
  // held updates to fail, so the step can end.
  if (gate_ && cancellation_.add([gate = gate_] { gate->cancel(); }) == 0)
    gate_->cancel();
}

void step_execution::abort(status reason) {
  {
    std::lock_guard<std::mutex> guard{status_mutex_};
    if (!status_.ok())
      return;
    status_ = reason;
  }
  aborted_.store(true, std::memory_order_release);
  // Waiting receives and collectives would keep the step alive forever: end their waits.
  if (hooks_.aborted)
    hooks_.aborted(reason);
  cancellation_.cancel_all();
}

void step_execution::dispatch(std::vector<int>& ready, bool on_pool) {
  std::vector<int> local;
  if (hooks_.schedule) {
    // On a pool thread keep the first node here; on an actor's thread keep only inexpensive
    // ones (a pool handoff costs more than they do) and hand the rest to the pool.
    for (std::size_t k = 0; k < ready.size(); ++k) {
      auto id = ready[k];
      if (on_pool ? local.empty() : inexpensive(id))
        local.push_back(id);
      else
        hooks_.schedule([self = shared_from_this(), id] { self->run_from(id, true); });
    }
  } else {
    local = std::move(ready); // inline mode: everything runs here, in order
  }
  ready.clear();
  for (auto id : local)
    run_from(id, on_pool);
}

bool step_execution::inexpensive(int id) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  if (!it.may_inline)
    return false;
  std::size_t bytes = 0;
  for (std::size_t k = 0; k < it.input_slots.size() && bytes <= inline_input_bytes; ++k) {
    if (auto& variable = it.input_variables[k]) {
      std::lock_guard<std::mutex> guard{variable->mutex};
      bytes += variable->value.bytes();
    } else {
      bytes += slots_[static_cast<std::size_t>(it.input_slots[k])].bytes();
    }
  }
  return bytes <= inline_input_bytes;
}

void step_execution::release_inputs(int id) {
  for (auto slot : plan_->items()[static_cast<std::size_t>(id)].input_slots)
    if (readers_left_[static_cast<std::size_t>(slot)].fetch_sub(1, std::memory_order_acq_rel) == 1)
      slots_[static_cast<std::size_t>(slot)] = tensor{};
}

void step_execution::run_from(int first, bool on_pool) {
  std::vector<int> ready{first};
  // Reused for every node this thread runs: no allocation per node.
  std::vector<int> made_ready;
  while (!ready.empty()) {
    auto id = ready.back();
    ready.pop_back();
    made_ready.clear();
    if (process(id, made_ready)) {
      auto newly = made_ready.size();
      // Count the new nodes before any can run elsewhere, so the total never dips to zero early.
      outstanding_.fetch_add(static_cast<std::int64_t>(newly), std::memory_order_acq_rel);
      if (hooks_.schedule) {
        // On a pool thread keep one for this thread and hand the others to the pool; on an
        // actor's thread keep the inexpensive ones.
        std::size_t kept = 0;
        for (std::size_t k = 0; k < made_ready.size(); ++k) {
          auto other = made_ready[k];
          if (on_pool ? kept == 0 : inexpensive(other))
            made_ready[kept++] = other;
          else
            hooks_.schedule([self = shared_from_this(), other] { self->run_from(other, true); });
        }
        made_ready.resize(kept);
      }
      ready.insert(ready.end(), made_ready.rbegin(), made_ready.rend());
      finish_one();
    }
  }
}

void step_execution::fail(int id, status s) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  auto located = s.with_context("node '" + it.def->name + "' on " + plan_->dev().full_name());
  abort(std::move(located));
}

bool step_execution::process(int id, std::vector<int>& ready) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  if (aborted_.load(std::memory_order_acquire))
    return true; // skip; consumers are never made ready
  if (fed_[static_cast<std::size_t>(id)]) {
    complete(id, ready);
    return true;
  }
  std::vector<tensor> inputs;
  inputs.reserve(it.input_slots.size());
  for (std::size_t k = 0; k < it.input_slots.size(); ++k) {
    tensor value;
    if (auto& variable = it.input_variables[k]) {
      std::lock_guard<std::mutex> guard{variable->mutex};
      value = variable->value;
    } else {
      value = slots_[static_cast<std::size_t>(it.input_slots[k])];
    }
    if (!value.is_initialized() && !it.variable_ref_inputs[k]) {
      auto& producer = plan_->items()[static_cast<std::size_t>(it.input_nodes[k])];
      // Only a variable produces an empty tensor, so the producer names the variable.
      fail(id, make_error(errc::failed_precondition,
                          "attempting to use uninitialized value '" + producer.def->name + "'"));
      return true;
    }
    inputs.push_back(std::move(value));
  }
  release_inputs(id);
  switch (it.kind) {
    case executor_plan::node_kind::send:
      if (!inputs[0].on_host()) {
        // Whatever leaves a device with memory of its own travels in host memory.
        plan_->dev().copy_to_host(inputs[0], [self = shared_from_this(), id](result<tensor> host) {
          if (!host) {
            self->fail_later(id, host.error());
            return;
          }
          self->hooks_.send(self->plan_->items()[static_cast<std::size_t>(id)].key, *host);
          self->complete_later(id);
        });
        return false;
      }
      hooks_.send(it.key, inputs[0]);
      complete(id, ready);
      return true;
    case executor_plan::node_kind::recv:
      hooks_.recv(it.key, [self = shared_from_this(), id](result<tensor> value) {
        if (!value) {
          self->fail_later(id, value.error());
          return;
        }
        auto& item = self->plan_->items()[static_cast<std::size_t>(id)];
        self->slots_[static_cast<std::size_t>(item.first_slot)] = std::move(*value);
        self->complete_later(id);
      });
      return false;
    case executor_plan::node_kind::kernel:
      break;
  }
  auto& dev = plan_->dev();
  // A device with memory of its own gets its inputs there first (feeds, received tensors and
  // the CPU's constants arrive in host memory).
  if (plan_->device_has_own_memory() && inputs_need_copies(id, inputs)) {
    copy_inputs_then_compute(id, std::move(inputs));
    return false;
  }
  // Asynchronous kernels (variable updates a shard actor orders) finish through dev.compute.
  if (dev.is_synchronous() && !it.kernel->is_async()) {
    kernel_context ctx{*it.def, dev, step_id_, std::move(inputs)};
    ctx.set_cancellation(&cancellation_);
    ctx.set_memory_budget(plan_->budget());
    ctx.set_fence(fence_);
    ctx.set_gate(gate_.get());
    if (auto st = run_guarded([&] { it.kernel->compute(ctx); }); !st.ok())
      ctx.fail(std::move(st));
    if (!ctx.status().ok()) {
      fail(id, ctx.status());
      return true;
    }
    auto& outs = ctx.outputs();
    for (int k = 0; k < it.num_outputs && k < static_cast<int>(outs.size()); ++k)
      slots_[static_cast<std::size_t>(it.first_slot + k)] = std::move(outs[static_cast<std::size_t>(k)]);
    complete(id, ready);
    return true;
  }
  compute_later(id, std::move(inputs));
  return false;
}

void step_execution::compute_later(int id, std::vector<tensor> inputs) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  auto& dev = plan_->dev();
  auto ctx = std::make_shared<kernel_context>(*it.def, dev, step_id_, std::move(inputs));
  ctx->set_cancellation(&cancellation_);
  ctx->set_memory_budget(plan_->budget());
  ctx->set_fence(fence_);
  ctx->set_gate(gate_.get());
  dev.compute(*it.kernel, *ctx, [self = shared_from_this(), id, ctx] {
    auto& item = self->plan_->items()[static_cast<std::size_t>(id)];
    if (!ctx->status().ok()) {
      self->fail_later(id, ctx->status());
      return;
    }
    auto& outs = ctx->outputs();
    for (int k = 0; k < item.num_outputs && k < static_cast<int>(outs.size()); ++k)
      self->slots_[static_cast<std::size_t>(item.first_slot + k)] = std::move(outs[static_cast<std::size_t>(k)]);
    self->complete_later(id);
  });
}

bool step_execution::inputs_need_copies(int id, const std::vector<tensor>& inputs) const {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (needs_copy(it, static_cast<int>(k), inputs[k]))
      return true;
  return false;
}

bool step_execution::needs_copy(const executor_plan::item& it, int k, const tensor& input) const {
  if (!input.is_initialized() || it.variable_ref_inputs[static_cast<std::size_t>(k)])
    return false;
  return it.kernel->host_memory_input(k) != input.on_host();
}

namespace {

/// Copies the tensors of `values` that `to_host(k)` / `from_host(k)` pick (in place, in the
/// vector), then calls `done` once with the vector or the first error, naming `what` k.
void copy_entries(device& dev, std::vector<tensor> values, const std::vector<std::size_t>& picked,
                  const std::function<bool(std::size_t)>& to_host, const char* what,
                  std::function<void(result<std::vector<tensor>>)> done) {
  struct copies {
    std::vector<tensor> values;
    std::atomic<std::size_t> left{0};
    std::mutex mutex;
    status failed;
    std::function<void(result<std::vector<tensor>>)> done;
  };
  auto state = std::make_shared<copies>();
  state->values = std::move(values);
  state->left.store(picked.size(), std::memory_order_relaxed);
  state->done = std::move(done);
  for (auto k : picked) {
    auto source = state->values[k];
    auto copied = [state, k, what](result<tensor> copy) {
      if (copy) {
        state->values[k] = std::move(*copy);
      } else {
        std::lock_guard<std::mutex> guard{state->mutex};
        if (state->failed.ok())
          state->failed = copy.error().with_context(std::string{"copying "} + what + " " +
                                                    std::to_string(k));
      }
      if (state->left.fetch_sub(1, std::memory_order_acq_rel) != 1)
        return;
      if (!state->failed.ok())
        state->done(std::move(state->failed));
      else
        state->done(std::move(state->values));
    };
    if (to_host(k))
      dev.copy_to_host(source, std::move(copied));
    else
      dev.copy_from_host(source, std::move(copied));
  }
}

} // namespace

void step_execution::copy_inputs_then_compute(int id, std::vector<tensor> inputs) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  std::vector<std::size_t> picked;
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (needs_copy(it, static_cast<int>(k), inputs[k]))
      picked.push_back(k);
  copy_entries(
    plan_->dev(), std::move(inputs), picked,
    [&it](std::size_t k) { return it.kernel->host_memory_input(static_cast<int>(k)); }, "input",
    [self = shared_from_this(), id](result<std::vector<tensor>> copied) {
      if (!copied)
        self->fail_later(id, copied.error());
      else
        self->compute_later(id, std::move(*copied));
    });
}

void step_execution::complete_later(int id) {
  std::vector<int> next;
  complete(id, next);
  // Keep the outstanding count above zero while the consumers are dispatched.
  outstanding_.fetch_add(static_cast<std::int64_t>(next.size()), std::memory_order_acq_rel);
  dispatch(next, false);
  finish_one();
}

void step_execution::fail_later(int id, status s) {
  fail(id, std::move(s));
  finish_one();
}

void step_execution::complete(int id, std::vector<int>& ready) {
  completed_.fetch_add(1, std::memory_order_relaxed);
  for (auto consumer : plan_->items()[static_cast<std::size_t>(id)].consumers)
    if (pending_[static_cast<std::size_t>(consumer)].fetch_sub(1, std::memory_order_acq_rel) == 1)
      ready.push_back(consumer);
}

void step_execution::finish_one() {
  if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1)
    return;
  status final_status;
  {
    std::lock_guard<std::mutex> guard{status_mutex_};
    final_status = status_;
  }
  if (final_status.ok() &&
      completed_.load(std::memory_order_acquire) != static_cast<std::int64_t>(plan_->items().size()))
    final_status = make_error(errc::internal, "step " + std::to_string(step_id_) + " on " +
                                                plan_->dev().full_name() +
                                                " stopped with nodes left unrun (a cycle?)");
  std::vector<tensor> fetched;
  if (final_status.ok())
    for (auto slot : fetch_slots_)
      fetched.push_back(slots_[static_cast<std::size_t>(slot)]);
  execution_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - started_)
                    .count();
  auto in_device_memory = std::any_of(fetched.begin(), fetched.end(),
                                      [](const tensor& t) { return !t.on_host(); });
  if (in_device_memory) {
    copy_fetches_to_host(std::move(fetched));
    return;
  }
  auto done = std::move(done_);
  done(std::move(final_status), std::move(fetched));
}

void step_execution::copy_fetches_to_host(std::vector<tensor> fetched) {
  std::vector<std::size_t> picked;
  for (std::size_t k = 0; k < fetched.size(); ++k)
    if (!fetched[k].on_host())
      picked.push_back(k);
  copy_entries(plan_->dev(), std::move(fetched), picked, [](std::size_t) { return true; },
               "fetched tensor", [self = shared_from_this()](result<std::vector<tensor>> copied) {
                 auto done = std::move(self->done_);
                 if (!copied)
                   done(copied.error(), {});
                 else
                   done({}, std::move(*copied));
               });
}

} // namespace actorflow
