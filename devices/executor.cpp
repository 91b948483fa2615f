#include "devices/executor.hpp"

#include "devices/commit_gate.hpp"

#include "graph/op_registry.hpp"
#include "graph/rendezvous_key.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <new>
#include <set>
#include <stdexcept>

namespace actorflow {

// --- plan ------------------------------------------------------------------------------------

namespace {

executor_plan::node_kind kind_of(const std::string& op) {
  using kind = executor_plan::node_kind;
  if (op == "_Send")
    return kind::send;
  if (op == "_Recv")
    return kind::recv;
  if (op == "Switch")
    return kind::switch_node;
  if (op == "Merge")
    return kind::merge;
  if (op == "Enter")
    return kind::enter;
  if (op == "Exit")
    return kind::exit;
  if (op == "NextIteration")
    return kind::next_iteration;
  return kind::kernel;
}

bool is_control_flow(executor_plan::node_kind k) {
  using kind = executor_plan::node_kind;
  return k == kind::switch_node || k == kind::merge || k == kind::enter || k == kind::exit ||
         k == kind::next_iteration;
}

} // namespace

result<std::shared_ptr<const executor_plan>>
executor_plan::make(std::shared_ptr<const graph> partition, device& dev,
                    const kernel_registry& registry, std::shared_ptr<memory_budget> budget,
                    std::int64_t session) {
  auto plan = std::make_shared<executor_plan>();
  plan->partition_ = partition;
  plan->budget_ = std::move(budget);
  plan->device_ = &dev;
  plan->own_memory_ = dev.memory() != nullptr;
  auto& g = *partition;
  plan->items_.resize(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    auto& it = plan->items_[i];
    it.def = &n;
    it.num_outputs = static_cast<int>(n.output_types.size());
    it.kind = kind_of(n.op);
    plan->has_control_flow_ = plan->has_control_flow_ || is_control_flow(it.kind) ||
                              (it.kind == node_kind::recv && n.attr_or<bool>("may_be_dead", false));
    plan->by_name_.emplace(n.name, static_cast<int>(i));
    if (n.attr_or<bool>(commit_gate_attr, false))
      ++plan->gated_updates_;
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    auto& it = plan->items_[i];
    auto* def = op_registry::global().find(n.op);
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      auto is_ref = def != nullptr && def->is_variable_ref_input(static_cast<int>(k));
      it.variable_ref_inputs.push_back(is_ref);
    }
    if (it.kind == node_kind::send || it.kind == node_kind::recv) {
      auto* key = n.attr<std::string>("key");
      if (key == nullptr)
        return make_error(errc::invalid_argument, "node '" + n.name + "' has no rendezvous key");
      it.key = *key;
    } else if (it.kind == node_kind::kernel) {
      auto kernel = registry.create(n, dev.type());
      if (!kernel)
        return kernel.error().with_context("node '" + n.name + "' on " + dev.full_name());
      it.kernel = std::move(*kernel);
      if (session != 0 && it.kernel->keeps_state())
        it.kernel = dev.resources().session_kernel(session, std::move(it.kernel));
      it.may_inline = !it.kernel->is_expensive();
    }
    for (std::size_t k = 0; k < n.inputs.size(); ++k) {
      auto& in = n.inputs[k];
      auto& producer = plan->items_[static_cast<std::size_t>(in.node_id)];
      it.input_nodes.push_back(in.node_id);
      auto reads_variable = producer.def->op == "VariableV2" && !it.variable_ref_inputs[k];
      it.input_variables.push_back(reads_variable ? dev.resources().variable(producer.def->name)
                                                  : nullptr);
      producer.consumers.push_back({static_cast<int>(i), static_cast<int>(k), in.index});
      if (it.kind == node_kind::merge && producer.kind != node_kind::next_iteration)
        ++it.merge_forward_inputs;
    }
    for (auto c : n.control_inputs)
      plan->items_[static_cast<std::size_t>(c)].consumers.push_back({static_cast<int>(i), -1, 0});
    if (it.kind == node_kind::enter)
      it.constant_enter = n.attr_or<bool>("is_constant", false);
  }
  auto layout = find_frames(g);
  if (!layout)
    return layout.error();
  for (auto& f : layout->frames) {
    frame_info info;
    static_cast<frame_layout::frame&>(info) = f;
    plan->frames_.push_back(std::move(info));
  }
  // Local ids and slots per frame; a node's outputs live where its consumers run.
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& it = plan->items_[i];
    it.frame = layout->frame_of[i];
    it.child_frame = layout->child_frame[i];
    it.out_frame = layout->output_frame(g, static_cast<int>(i));
    auto& frame = plan->frames_[static_cast<std::size_t>(it.frame)];
    it.local_id = static_cast<int>(frame.nodes.size());
    frame.nodes.push_back(static_cast<int>(i));
    auto& outputs_in = plan->frames_[static_cast<std::size_t>(it.out_frame)];
    it.first_slot = outputs_in.num_slots;
    outputs_in.num_slots += it.num_outputs;
    if (it.kind == node_kind::enter)
      ++plan->frames_[static_cast<std::size_t>(it.child_frame)].num_enters;
    if (it.kind == node_kind::exit)
      frame.exits.push_back(static_cast<int>(i));
  }
  for (auto& frame : plan->frames_)
    frame.slot_readers.assign(static_cast<std::size_t>(frame.num_slots), 0);
  for (std::size_t i = 0; i < g.size(); ++i) {
    auto& n = g.at(static_cast<int>(i));
    auto& it = plan->items_[i];
    auto& frame = plan->frames_[static_cast<std::size_t>(it.frame)];
    for (auto& in : n.inputs) {
      auto slot = plan->items_[static_cast<std::size_t>(in.node_id)].first_slot + in.index;
      it.input_slots.push_back(slot);
      ++frame.slot_readers[static_cast<std::size_t>(slot)];
    }
    auto controls = static_cast<int>(n.control_inputs.size());
    // A Merge waits for its control inputs (two each) and its first live input (the low bit).
    frame.initial_pending.push_back(it.kind == node_kind::merge
                                      ? 2 * controls + 1
                                      : static_cast<int>(n.inputs.size()) + controls);
    if (n.inputs.empty() && n.control_inputs.empty()) {
      if (it.frame != 0)
        return make_error(errc::invalid_argument,
                          "node '" + n.name + "' in while loop '" + frame.name +
                            "' has no inputs: it would never run (give it a control input)");
      plan->roots_.push_back(static_cast<int>(i));
    }
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
  return index < it.num_outputs && it.out_frame == 0 ? it.first_slot + index : -1;
}

// --- step state ------------------------------------------------------------------------------
// Steps of plans without control flow have one iteration of frame 0 and propagate with atomic
// pending counts alone. With control flow (TensorFlow's executor design): every frame instance
// (a loop entered in one iteration of its parent) has iterations, each with its own slots and
// pending counts, guarded by the frame's mutex; at most parallel_iterations iterations exist at
// once, iterations end in order, and a frame ends when its last iteration has and every Enter
// into it has run. No thread holds two frames' mutexes at once.

struct step_execution::iteration_state {
  frame_state* frame = nullptr;
  std::int64_t index = 0;
  std::vector<tensor> slots;
  std::unique_ptr<std::atomic<int>[]> pending;
  std::unique_ptr<std::atomic<int>[]> readers_left;
  // With control flow only, guarded by the frame's mutex (written before a node is made
  // ready, read when it runs):
  /// Per local node: an input (or control input) was dead.
  std::vector<char> dead_input;
  /// Per local Merge: dead inputs so far, and the input it took.
  std::vector<int> merge_dead;
  std::vector<int> merge_taken;
  /// Nodes of this iteration ready or running, and loops entered from it still running.
  int outstanding = 0;
  int outstanding_frames = 0;
  std::map<int, std::unique_ptr<frame_state>> children;

  iteration_state(frame_state* owner, std::int64_t at, const executor_plan::frame_info& info,
                  bool frames) : frame(owner), index(at) {
    slots.resize(static_cast<std::size_t>(info.num_slots));
    pending.reset(new std::atomic<int>[info.initial_pending.size()]);
    for (std::size_t i = 0; i < info.initial_pending.size(); ++i)
      pending[i].store(info.initial_pending[i], std::memory_order_relaxed);
    readers_left.reset(new std::atomic<int>[info.slot_readers.size()]);
    for (std::size_t i = 0; i < info.slot_readers.size(); ++i)
      readers_left[i].store(info.slot_readers[i], std::memory_order_relaxed);
    if (frames) {
      dead_input.assign(info.nodes.size(), 0);
      merge_dead.assign(info.nodes.size(), 0);
      merge_taken.assign(info.nodes.size(), -1);
    }
  }
};

struct step_execution::frame_state {
  const executor_plan::frame_info* info = nullptr;
  int index = 0;
  frame_state* parent = nullptr;
  iteration_state* parent_iteration = nullptr;
  std::mutex mutex;
  /// Iterations first_index, first_index + 1, ...
  std::deque<std::unique_ptr<iteration_state>> iterations;
  std::int64_t first_index = 0;
  int pending_enters = 0;
  /// Loop invariants: every iteration, present and future, gets them.
  struct invariant {
    int enter = -1;
    bool dead = false;
    tensor value;
  };
  std::vector<invariant> invariants;
  /// NextIteration values for the iteration after the last, waiting for room.
  std::vector<std::pair<int, tensor>> deferred_next;
  std::set<int> live_exits;
  /// Names this frame instance the same way in every partition: "loop.0/inner.3" (a frame
  /// entered from iteration 0 of the step, then from iteration 3 of "loop").
  std::string path;

  iteration_state& at(std::int64_t i) { return *iterations[static_cast<std::size_t>(i - first_index)]; }
  std::int64_t end_index() const { return first_index + static_cast<std::int64_t>(iterations.size()); }
};

step_execution::step_execution(std::shared_ptr<const executor_plan> plan, std::int64_t step_id,
                               step_hooks hooks)
  : plan_(std::move(plan)), step_id_(step_id), hooks_(std::move(hooks)) {}

step_execution::~step_execution() = default;

void step_execution::start(std::vector<std::pair<std::string, tensor>> feeds,
                           std::vector<std::string> fetches, done_callback done) {
  started_ = std::chrono::steady_clock::now();
  auto& items = plan_->items();
  done_ = std::move(done);
  root_frame_ = std::make_unique<frame_state>();
  root_frame_->info = &plan_->frames()[0];
  root_frame_->iterations.push_back(
    std::make_unique<iteration_state>(root_frame_.get(), 0, *root_frame_->info, plan_->has_control_flow()));
  root_ = root_frame_->iterations.front().get();
  fed_.assign(items.size(), false);
  for (auto& [name, value] : feeds) {
    auto slot = plan_->slot_of(name);
    auto colon = name.rfind(':');
    auto id = plan_->find(name);
    if (id < 0 && colon != std::string::npos)
      id = plan_->find(name.substr(0, colon));
    if (slot < 0 || id < 0) {
      done_(make_error(errc::not_found, "fed tensor '" + name + "' is not in the partition on " +
                                          plan_->dev().full_name() + " (or is inside a while loop)"),
            {});
      return;
    }
    root_->slots[static_cast<std::size_t>(slot)] = std::move(value);
    fed_[static_cast<std::size_t>(id)] = true;
  }
  for (auto& name : fetches) {
    auto slot = plan_->slot_of(name);
    if (slot < 0) {
      done_(make_error(errc::not_found, "fetched tensor '" + name + "' is not in the partition on " +
                                          plan_->dev().full_name() + " (or is inside a while loop)"),
            {});
      return;
    }
    fetch_slots_.push_back(slot);
    // A fetched slot is kept to the end of the step.
    root_->readers_left[static_cast<std::size_t>(slot)].fetch_add(1, std::memory_order_relaxed);
  }
  auto& roots = plan_->roots();
  if (roots.empty()) {
    outstanding_.store(1, std::memory_order_relaxed);
    finish_one();
    return;
  }
  // Hold one extra count while dispatching the roots so the step cannot finish early.
  outstanding_.store(static_cast<std::int64_t>(roots.size()) + 1, std::memory_order_relaxed);
  std::vector<tagged_node> ready;
  for (auto id : roots)
    ready.push_back({id, root_});
  dispatch(ready, false);
  finish_one();
}

void step_execution::set_gate(std::shared_ptr<commit_gate> gate) {
  gate_ = std::move(gate);
  // Whatever ends the step first (a node failing here, an abort from elsewhere) releases the
  // held updates to fail, so the step can end; once prepared, only the coordinator's decision
  // releases them (commit_gate.hpp).
  if (gate_ && cancellation_.add([gate = gate_] { gate->cancel_unless_prepared(); }) == 0)
    gate_->cancel_unless_prepared();
}

void step_execution::abort(status reason) {
  {
    std::lock_guard<std::mutex> guard{status_mutex_};
    if (!status_.ok())
      return;
    status_ = reason;
  }
  aborted_.store(true, std::memory_order_release);
  // Waiting receives, collectives and stack pops would keep the step alive forever: end
  // their waits. Cancelled first: whoever hooks_.aborted tells finds a gate already settled
  // (cancelled, or prepared and waiting for its coordinator).
  cancellation_.cancel_all();
  if (hooks_.aborted)
    hooks_.aborted(reason);
  resources_.cancel(reason);
}

void step_execution::dispatch(std::vector<tagged_node>& ready, bool on_pool) {
  std::vector<tagged_node> local = std::move(ready);
  ready.clear();
  keep_or_hand_off(local, on_pool);
  if (local.size() == 1) {
    run_from(local.front(), on_pool);
    return;
  }
  // Several at once (a step's roots): each runs before any node it makes ready. A node that
  // waits on one of them and on a long chain (an update on its learning rate and on its
  // gradient) is then ready when the chain ends, not after the chains of the roots before.
  std::vector<tagged_node> next;
  std::vector<tagged_node> made_ready;
  for (auto& t : local) {
    made_ready.clear();
    if (!process(t, made_ready))
      continue;
    // Counted before any can run elsewhere, so the total never dips to zero early.
    outstanding_.fetch_add(static_cast<std::int64_t>(made_ready.size()), std::memory_order_acq_rel);
    next.insert(next.end(), made_ready.begin(), made_ready.end());
    finish_one();
  }
  keep_or_hand_off(next, on_pool);
  for (auto& t : next)
    run_from(t, on_pool);
}

void step_execution::keep_or_hand_off(std::vector<tagged_node>& ready, bool on_pool) {
  if (!hooks_.schedule)
    return; // inline mode: everything runs here, in order
  // On a pool thread keep the first node here; on an actor's thread keep only inexpensive
  // ones (a pool handoff costs more than they do) and hand the rest to the pool.
  std::size_t kept = 0;
  for (std::size_t k = 0; k < ready.size(); ++k) {
    auto t = ready[k];
    if (on_pool ? kept == 0 : inexpensive(t))
      ready[kept++] = t;
    else
      hooks_.schedule([self = shared_from_this(), t] { self->run_from(t, true); });
  }
  ready.resize(kept);
}

bool step_execution::inexpensive(const tagged_node& t) {
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  if (!it.may_inline)
    return false;
  std::size_t bytes = 0;
  for (std::size_t k = 0; k < it.input_slots.size() && bytes <= inline_input_bytes; ++k) {
    if (auto& variable = it.input_variables[k]) {
      std::lock_guard<std::mutex> guard{variable->mutex};
      bytes += variable->value.bytes();
    } else {
      bytes += t.iteration->slots[static_cast<std::size_t>(it.input_slots[k])].bytes();
    }
  }
  return bytes <= inline_input_bytes;
}

void step_execution::keep_read_outputs(iteration_state& iteration, const executor_plan::item& it,
                                       std::vector<tensor>& outs) {
  for (int k = 0; k < it.num_outputs && k < static_cast<int>(outs.size()); ++k) {
    auto slot = static_cast<std::size_t>(it.first_slot + k);
    // An output nobody reads or fetches goes now, not with the step: an update's new value
    // kept would make the variable's next update (another step's) copy it whole.
    if (iteration.readers_left[slot].load(std::memory_order_acquire) > 0)
      iteration.slots[slot] = std::move(outs[static_cast<std::size_t>(k)]);
  }
}

void step_execution::release_inputs(const tagged_node& t) {
  auto& iteration = *t.iteration;
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  for (std::size_t k = 0; k < it.input_slots.size(); ++k) {
    // A Merge lets go of the input it took only: another may still be written (a second live
    // input arriving late), and goes with its iteration.
    if (it.kind == executor_plan::node_kind::merge &&
        static_cast<int>(k) != iteration.merge_taken[static_cast<std::size_t>(it.local_id)])
      continue;
    auto slot = static_cast<std::size_t>(it.input_slots[k]);
    if (iteration.readers_left[slot].fetch_sub(1, std::memory_order_acq_rel) == 1)
      iteration.slots[slot] = tensor{};
  }
}

void step_execution::run_from(tagged_node first, bool on_pool) {
  std::vector<tagged_node> ready{first};
  // Reused for every node this thread runs: no allocation per node.
  std::vector<tagged_node> made_ready;
  std::size_t ran_here = 0;
  while (!ready.empty()) {
    if (!on_pool && ++ran_here > max_inline_chain && (hooks_.schedule || hooks_.resume)) {
      // A loop of small nodes would hold the actor's thread, and its mailbox, until it ended
      // (an abort of this step waits there): the rest runs on a pool thread. The nodes are
      // counted already.
      auto self = shared_from_this();
      if (hooks_.schedule) {
        for (auto& t : ready)
          hooks_.schedule([self, t] { self->run_from(t, true); });
      } else {
        hooks_.resume([self, rest = std::move(ready)] {
          for (auto it = rest.rbegin(); it != rest.rend(); ++it)
            self->run_from(*it, false);
        });
      }
      return;
    }
    auto t = ready.back();
    ready.pop_back();
    made_ready.clear();
    if (process(t, made_ready)) {
      auto newly = made_ready.size();
      // Count the new nodes before any can run elsewhere, so the total never dips to zero early.
      outstanding_.fetch_add(static_cast<std::int64_t>(newly), std::memory_order_acq_rel);
      keep_or_hand_off(made_ready, on_pool);
      ready.insert(ready.end(), made_ready.rbegin(), made_ready.rend());
      finish_one();
    }
  }
}

const std::string& step_execution::key_of(const tagged_node& t, std::string& storage) const {
  auto& key = plan_->items()[static_cast<std::size_t>(t.id)].key;
  auto& frame = *t.iteration->frame;
  if (frame.index == 0)
    return key;
  storage = with_frame_iteration(key, frame.path + ":" + std::to_string(t.iteration->index));
  return storage;
}

void step_execution::fail(int id, status s) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  auto located = s.with_context("node '" + it.def->name + "' on " + plan_->dev().full_name());
  abort(std::move(located));
}

bool step_execution::process(const tagged_node& t, std::vector<tagged_node>& ready) {
  auto id = t.id;
  auto& iteration = *t.iteration;
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  if (aborted_.load(std::memory_order_acquire))
    return true; // skip; consumers are never made ready
  if (fed_[static_cast<std::size_t>(id)]) {
    complete(t, ready);
    return true;
  }
  // A send's or receive's key, where it is made inside a loop.
  std::string key_storage;
  if (plan_->has_control_flow() && iteration.dead_input[static_cast<std::size_t>(it.local_id)]) {
    // Dead: never computed on; its outputs are dead too (a Merge only when all inputs were).
    release_inputs(t);
    // A dead tensor crosses devices as an empty one: the receiver's _Recv is dead in turn.
    if (it.kind == executor_plan::node_kind::send)
      hooks_.send(key_of(t, key_storage), tensor{});
    // A dead _Recv still takes what was sent to it (TensorFlow runs dead transfer nodes), so
    // nothing is left waiting in the step's rendezvous.
    if (it.kind == executor_plan::node_kind::recv) {
      hooks_.recv(key_of(t, key_storage), [self = shared_from_this(), t](result<tensor> value) {
        if (!value)
          self->fail_later(t.id, value.error());
        else
          self->complete_later(t, deadness{true, -1});
      });
      return false;
    }
    complete(t, ready, deadness{true, -1});
    return true;
  }
  std::vector<tensor> inputs;
  inputs.reserve(it.input_slots.size());
  for (std::size_t k = 0; k < it.input_slots.size(); ++k) {
    if (it.kind == executor_plan::node_kind::merge &&
        static_cast<int>(k) != iteration.merge_taken[static_cast<std::size_t>(it.local_id)])
      continue; // a Merge reads only the live input it took
    tensor value;
    if (auto& variable = it.input_variables[k]) {
      std::lock_guard<std::mutex> guard{variable->mutex};
      value = variable->value;
    } else {
      value = iteration.slots[static_cast<std::size_t>(it.input_slots[k])];
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
  release_inputs(t);
  switch (it.kind) {
    case executor_plan::node_kind::send:
      if (!inputs[0].on_host()) {
        // Whatever leaves a device with memory of its own travels in host memory.
        plan_->dev().copy_to_host(inputs[0], [self = shared_from_this(), t](result<tensor> host) {
          if (!host) {
            self->fail_later(t.id, host.error());
            return;
          }
          std::string storage;
          self->hooks_.send(self->key_of(t, storage), *host);
          self->complete_later(t);
        });
        return false;
      }
      hooks_.send(key_of(t, key_storage), inputs[0]);
      complete(t, ready);
      return true;
    case executor_plan::node_kind::recv:
      hooks_.recv(key_of(t, key_storage), [self = shared_from_this(), t](result<tensor> value) {
        if (!value) {
          self->fail_later(t.id, value.error());
          return;
        }
        if (!value->is_initialized()) {
          self->complete_later(t, deadness{true, -1}); // sent dead
          return;
        }
        auto& item = self->plan_->items()[static_cast<std::size_t>(t.id)];
        t.iteration->slots[static_cast<std::size_t>(item.first_slot)] = std::move(*value);
        self->complete_later(t);
      });
      return false;
    case executor_plan::node_kind::kernel:
      break;
    default:
      return process_control_flow(t, inputs, ready);
  }
  auto& dev = plan_->dev();
  // A device with memory of its own gets its inputs there first (feeds, received tensors and
  // the CPU's constants arrive in host memory).
  if (plan_->device_has_own_memory() && inputs_need_copies(id, inputs)) {
    copy_inputs_then_compute(t, std::move(inputs));
    return false;
  }
  // Asynchronous kernels (variable updates a shard actor orders) finish through dev.compute.
  if (dev.is_synchronous() && !it.kernel->is_async()) {
    kernel_context ctx{*it.def, dev, step_id_, std::move(inputs)};
    ctx.set_cancellation(&cancellation_);
    ctx.set_memory_budget(plan_->budget());
    ctx.set_fence(fence_);
    ctx.set_gate(gate_.get());
    ctx.set_step_resources(&resources_);
    if (auto st = run_guarded([&] { it.kernel->compute(ctx); }); !st.ok())
      ctx.fail(std::move(st));
    if (!ctx.status().ok()) {
      fail(id, ctx.status());
      return true;
    }
    keep_read_outputs(iteration, it, ctx.outputs());
    complete(t, ready);
    return true;
  }
  compute_later(t, std::move(inputs));
  return false;
}

bool step_execution::process_control_flow(const tagged_node& t, std::vector<tensor>& inputs,
                                          std::vector<tagged_node>& ready) {
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  auto& slots = t.iteration->slots;
  switch (it.kind) {
    case executor_plan::node_kind::switch_node: {
      auto route = [this, t](tensor data, const tensor& pred) {
        auto& item = plan_->items()[static_cast<std::size_t>(t.id)];
        auto taken = pred.scalar_value<bool>() ? 1 : 0;
        t.iteration->slots[static_cast<std::size_t>(item.first_slot + taken)] = std::move(data);
        return deadness{false, taken};
      };
      if (!inputs[1].on_host()) {
        // The predicate decides on the host: a GPU's comes over first.
        plan_->dev().copy_to_host(inputs[1], [self = shared_from_this(), t, route,
                                              data = inputs[0]](result<tensor> pred) mutable {
          if (!pred) {
            self->fail_later(t.id, pred.error());
            return;
          }
          self->complete_later(t, route(std::move(data), *pred));
        });
        return false;
      }
      complete(t, ready, route(std::move(inputs[0]), inputs[1]));
      return true;
    }
    case executor_plan::node_kind::merge:
      slots[static_cast<std::size_t>(it.first_slot)] = std::move(inputs[0]);
      slots[static_cast<std::size_t>(it.first_slot + 1)] = tensor::scalar(static_cast<std::int32_t>(
        t.iteration->merge_taken[static_cast<std::size_t>(it.local_id)]));
      complete(t, ready);
      return true;
    default: // Enter, Exit, NextIteration pass their input on to another frame or iteration
      complete(t, ready, {}, std::move(inputs[0]));
      return true;
  }
}

void step_execution::compute_later(const tagged_node& t, std::vector<tensor> inputs) {
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  auto& dev = plan_->dev();
  auto ctx = std::make_shared<kernel_context>(*it.def, dev, step_id_, std::move(inputs));
  ctx->set_cancellation(&cancellation_);
  ctx->set_memory_budget(plan_->budget());
  ctx->set_fence(fence_);
  ctx->set_gate(gate_.get());
  ctx->set_step_resources(&resources_);
  dev.compute(*it.kernel, *ctx, [self = shared_from_this(), t, ctx] {
    auto& item = self->plan_->items()[static_cast<std::size_t>(t.id)];
    if (!ctx->status().ok()) {
      self->fail_later(t.id, ctx->status());
      return;
    }
    self->keep_read_outputs(*t.iteration, item, ctx->outputs());
    self->complete_later(t);
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

void step_execution::copy_inputs_then_compute(const tagged_node& t, std::vector<tensor> inputs) {
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  std::vector<std::size_t> picked;
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (needs_copy(it, static_cast<int>(k), inputs[k]))
      picked.push_back(k);
  copy_entries(
    plan_->dev(), std::move(inputs), picked,
    [&it](std::size_t k) { return it.kernel->host_memory_input(static_cast<int>(k)); }, "input",
    [self = shared_from_this(), t](result<std::vector<tensor>> copied) {
      if (!copied)
        self->fail_later(t.id, copied.error());
      else
        self->compute_later(t, std::move(*copied));
    });
}

void step_execution::complete_later(const tagged_node& t, deadness dead) {
  std::vector<tagged_node> next;
  complete(t, next, dead);
  // Keep the outstanding count above zero while the consumers are dispatched.
  outstanding_.fetch_add(static_cast<std::int64_t>(next.size()), std::memory_order_acq_rel);
  dispatch(next, false);
  finish_one();
}

void step_execution::fail_later(int id, status s) {
  fail(id, std::move(s));
  finish_one();
}

void step_execution::complete(const tagged_node& t, std::vector<tagged_node>& ready,
                              deadness dead, tensor value) {
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  if (it.frame == 0)
    completed_.fetch_add(1, std::memory_order_relaxed);
  if (!plan_->has_control_flow()) {
    for (auto& e : it.consumers)
      if (root_->pending[static_cast<std::size_t>(e.dst)].fetch_sub(1, std::memory_order_acq_rel) == 1)
        ready.push_back({e.dst, root_});
    return;
  }
  switch (it.kind) {
    case executor_plan::node_kind::enter:
      enter_frame(t, dead.all, std::move(value), ready);
      break;
    case executor_plan::node_kind::exit:
      // A dead Exit (an iteration that went on, or a loop never entered) waits for its frame to
      // end: only then is it known that no live value will come.
      if (!dead.all)
        leave_frame(t, std::move(value), ready);
      break;
    case executor_plan::node_kind::next_iteration:
      // A dead NextIteration is the loop ending: there is no next iteration to make.
      if (!dead.all)
        next_iteration(t, std::move(value), ready);
      break;
    default: {
      std::lock_guard<std::mutex> guard{t.iteration->frame->mutex};
      activate(*t.iteration, t.id, dead, ready);
    }
  }
  finish_in_frame(*t.iteration, ready);
}

void step_execution::activate(iteration_state& iteration, int id, deadness dead,
                              std::vector<tagged_node>& ready) {
  auto& items = plan_->items();
  for (auto& e : items[static_cast<std::size_t>(id)].consumers) {
    auto& dst = items[static_cast<std::size_t>(e.dst)];
    auto local = static_cast<std::size_t>(dst.local_id);
    auto edge_dead = dead.all || (dead.live_output >= 0 && e.input >= 0 && e.src_output != dead.live_output);
    auto& pending = iteration.pending[local];
    bool now_ready = false;
    if (dst.kind == executor_plan::node_kind::merge) {
      // A loop's Merge takes its Enter in the first iteration and NextIteration after it.
      // (A cond's Merge has no NextIteration input and waits for all of them.)
      auto back_edges = static_cast<int>(dst.input_slots.size()) - dst.merge_forward_inputs;
      auto dead_limit = back_edges == 0 || iteration.index == 0 ? dst.merge_forward_inputs : back_edges;
      auto count = pending.load(std::memory_order_relaxed);
      if (e.input < 0) {
        count -= 2;
        now_ready = count == 0 || (count == 1 && iteration.merge_dead[local] >= dead_limit);
      } else if (!edge_dead) {
        if ((count & 1) == 0)
          continue; // a second live input: the Merge already took one
        count &= ~1;
        iteration.merge_taken[local] = e.input;
        now_ready = count == 0;
      } else {
        ++iteration.merge_dead[local];
        now_ready = count == 1 && iteration.merge_dead[local] >= dead_limit;
      }
      pending.store(count, std::memory_order_relaxed);
      if (now_ready && count == 1)
        iteration.dead_input[local] = 1;
    } else {
      if (edge_dead)
        iteration.dead_input[local] = 1;
      now_ready = pending.fetch_sub(1, std::memory_order_relaxed) == 1;
    }
    if (now_ready) {
      ++iteration.outstanding;
      ready.push_back({e.dst, &iteration});
    }
  }
}

void step_execution::deliver(iteration_state& iteration, int id, deadness dead, tensor value,
                             std::vector<tagged_node>& ready) {
  auto& it = plan_->items()[static_cast<std::size_t>(id)];
  if (!dead.all)
    iteration.slots[static_cast<std::size_t>(it.first_slot)] = std::move(value);
  activate(iteration, id, dead, ready);
}

step_execution::iteration_state&
step_execution::new_iteration(frame_state& frame, std::int64_t index, std::vector<tagged_node>& ready) {
  frame.iterations.push_back(std::make_unique<iteration_state>(&frame, index, *frame.info, true));
  auto& iteration = *frame.iterations.back();
  auto alive = static_cast<std::int64_t>(frame.iterations.size());
  auto peak = peak_iterations_.load(std::memory_order_relaxed);
  while (alive > peak && !peak_iterations_.compare_exchange_weak(peak, alive)) {
  }
  for (auto& inv : frame.invariants)
    deliver(iteration, inv.enter, deadness{inv.dead, -1}, inv.value, ready);
  return iteration;
}

void step_execution::enter_frame(const tagged_node& t, bool dead, tensor value,
                                 std::vector<tagged_node>& ready) {
  auto& it = plan_->items()[static_cast<std::size_t>(t.id)];
  auto& parent = *t.iteration->frame;
  frame_state* child = nullptr;
  {
    std::lock_guard<std::mutex> guard{parent.mutex};
    auto& slot = t.iteration->children[it.child_frame];
    if (!slot) {
      slot = std::make_unique<frame_state>();
      slot->info = &plan_->frames()[static_cast<std::size_t>(it.child_frame)];
      slot->index = it.child_frame;
      slot->parent = &parent;
      slot->parent_iteration = t.iteration;
      slot->pending_enters = slot->info->num_enters;
      slot->path = (parent.path.empty() ? std::string{} : parent.path + "/") + slot->info->name +
                   "." + std::to_string(t.iteration->index);
      ++t.iteration->outstanding_frames;
    }
    child = slot.get();
  }
  bool ended = false;
  {
    std::lock_guard<std::mutex> guard{child->mutex};
    if (child->first_index == 0 && child->iterations.empty()) // the first Enter to arrive
      new_iteration(*child, 0, ready);
    if (it.constant_enter) {
      child->invariants.push_back({t.id, dead, value});
      for (auto& iteration : child->iterations)
        deliver(*iteration, t.id, deadness{dead, -1}, value, ready);
    } else {
      // Iteration 0 cannot have ended while Enters are still to come.
      deliver(child->at(0), t.id, deadness{dead, -1}, std::move(value), ready);
    }
    --child->pending_enters;
    ended = advance(*child, ready);
  }
  if (ended)
    end_frame(*child, ready);
}

void step_execution::next_iteration(const tagged_node& t, tensor value,
                                    std::vector<tagged_node>& ready) {
  auto& frame = *t.iteration->frame;
  std::lock_guard<std::mutex> guard{frame.mutex};
  auto next = t.iteration->index + 1;
  if (next < frame.end_index()) {
    deliver(frame.at(next), t.id, {}, std::move(value), ready);
  } else if (next - frame.first_index < frame.info->parallel_iterations) {
    deliver(new_iteration(frame, next, ready), t.id, {}, std::move(value), ready);
  } else {
    // parallel_iterations are running: the next one starts when the oldest ends.
    frame.deferred_next.emplace_back(t.id, std::move(value));
  }
}

void step_execution::leave_frame(const tagged_node& t, tensor value, std::vector<tagged_node>& ready) {
  auto& frame = *t.iteration->frame;
  {
    std::lock_guard<std::mutex> guard{frame.mutex};
    frame.live_exits.insert(t.id);
  }
  std::lock_guard<std::mutex> guard{frame.parent->mutex};
  deliver(*frame.parent_iteration, t.id, {}, std::move(value), ready);
}

bool step_execution::advance(frame_state& frame, std::vector<tagged_node>& ready) {
  while (!frame.iterations.empty()) {
    auto& oldest = *frame.iterations.front();
    if (oldest.outstanding > 0 || oldest.outstanding_frames > 0 ||
        (oldest.index == 0 && frame.pending_enters > 0))
      break;
    frame.iterations.pop_front();
    ++frame.first_index;
    if (!frame.deferred_next.empty()) {
      auto& next = new_iteration(frame, frame.end_index(), ready);
      for (auto& [id, value] : frame.deferred_next)
        deliver(next, id, {}, std::move(value), ready);
      frame.deferred_next.clear();
    }
  }
  return frame.iterations.empty() && frame.pending_enters == 0;
}

void step_execution::finish_in_frame(iteration_state& iteration, std::vector<tagged_node>& ready) {
  auto& frame = *iteration.frame;
  if (frame.index == 0)
    return; // the step's frame ends with the step
  bool ended = false;
  {
    std::lock_guard<std::mutex> guard{frame.mutex};
    --iteration.outstanding;
    ended = advance(frame, ready);
  }
  if (ended)
    end_frame(frame, ready);
}

void step_execution::end_frame(frame_state& frame, std::vector<tagged_node>& ready) {
  // No live value came out of these Exits: what waits for them outside gets a dead one.
  auto& parent = *frame.parent;
  auto& parent_iteration = *frame.parent_iteration;
  auto index = frame.index;
  std::vector<int> dead_exits;
  for (auto exit : frame.info->exits)
    if (frame.live_exits.count(exit) == 0)
      dead_exits.push_back(exit);
  bool ended = false;
  {
    std::lock_guard<std::mutex> guard{parent.mutex};
    for (auto exit : dead_exits)
      activate(parent_iteration, exit, deadness{true, -1}, ready);
    --parent_iteration.outstanding_frames;
    parent_iteration.children.erase(index); // destroys `frame`
    ended = parent.index != 0 && advance(parent, ready);
  }
  if (ended)
    end_frame(parent, ready);
}

void step_execution::finish_one() {
  if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1)
    return;
  status final_status;
  {
    std::lock_guard<std::mutex> guard{status_mutex_};
    final_status = status_;
  }
  if (final_status.ok() && completed_.load(std::memory_order_acquire) !=
                             static_cast<std::int64_t>(plan_->frames()[0].nodes.size()))
    final_status = make_error(errc::internal, "step " + std::to_string(step_id_) + " on " +
                                                plan_->dev().full_name() +
                                                " stopped with nodes left unrun (a cycle?)");
  std::vector<tensor> fetched;
  if (final_status.ok())
    for (auto slot : fetch_slots_)
      fetched.push_back(root_->slots[static_cast<std::size_t>(slot)]);
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
