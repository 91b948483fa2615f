#pragma once
/// Running one partition on one device: an immutable plan made once at registration, and a
/// small per-step state made for every step.
///   auto plan = executor_plan::make(partition, dev, kernel_registry::global());
///   auto step = std::make_shared<step_execution>(*plan, step_id, hooks);
///   step->start(feeds, fetches, [](status s, std::vector<tensor> fetched) { ... });
/// Ready nodes run on the thread that made them ready; when several become ready at once, all
/// but one go to hooks.schedule (the inter-op pool) when it is set, otherwise they run in turn
/// on the current thread (the deterministic mode that actor tests use). On an actor's thread
/// only inexpensive nodes (inputs of at most inline_input_bytes, TensorFlow's "inexpensive
/// kernels run inline") run there; the rest go to the pool, so the actor stays responsive.

#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "devices/memory_budget.hpp"
#include "graph/graph.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace actorflow {

class executor_plan {
public:
  enum class node_kind : std::uint8_t { kernel, send, recv };

  struct item {
    const node* def = nullptr;
    node_kind kind = node_kind::kernel;
    std::unique_ptr<op_kernel> kernel;
    /// Output slots this node's inputs read, in input order.
    std::vector<int> input_slots;
    /// Producer node of each input (for error messages).
    std::vector<int> input_nodes;
    /// For inputs read from a variable: its state, read when this node runs (TensorFlow's ref
    /// semantics: a read inside control_dependencies sees the updates it waited for).
    std::vector<std::shared_ptr<variable_state>> input_variables;
    int first_slot = 0;
    int num_outputs = 0;
    /// Consumers, once per edge (data and control), so pending counts match.
    std::vector<int> consumers;
    int initial_pending = 0;
    /// Per input: whether it is a variable ref (op_def::is_variable_ref_input), which may be
    /// an empty tensor and is not read from the variable at run time.
    std::vector<bool> variable_ref_inputs;
    /// Rendezvous key of a _Send / _Recv.
    std::string key;
    /// Whether the node may run on the thread that made it ready (an actor's) when its inputs
    /// are small: false for ops whose work is not bounded by their inputs' size (Fill, the
    /// random ops, MatMul's outer products).
    bool may_inline = true;
  };

  /// Makes the kernels of every node of `partition` for `dev`; an error names the node and
  /// the device. The plan keeps `partition` alive and must not outlive `dev`. With `budget`,
  /// every output a kernel allocates is charged to it (devices/memory_budget.hpp).
  static result<std::shared_ptr<const executor_plan>>
  make(std::shared_ptr<const graph> partition, device& dev, const kernel_registry& registry,
       std::shared_ptr<memory_budget> budget = nullptr);

  const std::vector<item>& items() const { return items_; }
  /// Number of data edges reading each output slot; a step frees a slot after its last reader.
  const std::vector<int>& slot_readers() const { return slot_readers_; }
  const std::vector<int>& roots() const { return roots_; }
  int num_slots() const { return num_slots_; }
  device& dev() const { return *device_; }
  /// Whether the device computes in memory of its own (inputs may need copies), decided once.
  bool device_has_own_memory() const { return own_memory_; }
  /// What the outputs of this plan's kernels are charged to; null: no cap.
  memory_budget* budget() const { return budget_.get(); }
  /// Update nodes marked as their step's first (commit_gate_attr): an all-or-nothing step
  /// holds them in a commit_gate.
  int gated_updates() const { return gated_updates_; }
  /// Node id for a name, -1 if absent (used when a step starts, not per node).
  int find(const std::string& name) const;
  /// Slot of "name:index" or "name", -1 if absent.
  int slot_of(const std::string& tensor_name) const;

private:
  std::shared_ptr<const graph> partition_;
  device* device_ = nullptr;
  bool own_memory_ = false;
  std::shared_ptr<memory_budget> budget_;
  int gated_updates_ = 0;
  std::vector<item> items_;
  std::vector<int> roots_;
  int num_slots_ = 0;
  std::vector<int> slot_readers_;
  std::unordered_map<std::string, int> by_name_;
};

/// How a step reaches the outside world; set by the device actor.
struct step_hooks {
  /// A _Send produced `value` for `key`. May be called from any executor thread.
  std::function<void(const std::string& key, const tensor& value)> send;
  /// A _Recv waits for `key`: `deliver` must be called exactly once, with the tensor or an error
  /// (e.g. when the step is aborted), from any thread.
  std::function<void(const std::string& key, std::function<void(result<tensor>)> deliver)> recv;
  /// The step failed or was aborted (called once): pending receives must now be delivered an
  /// error so that the step can end.
  std::function<void(const status& reason)> aborted;
  /// Runs work on the inter-op pool; when empty, everything runs on the calling thread.
  std::function<void(std::function<void()>)> schedule;
};

/// One step of one plan. Keep it alive (shared_ptr) until `done` was called.
class step_execution : public std::enable_shared_from_this<step_execution> {
public:
  /// Nodes whose inputs total at most this many bytes run inline on an actor's thread.
  static constexpr std::size_t inline_input_bytes = 16 * 1024;

  using done_callback = std::function<void(status, std::vector<tensor>)>;

  step_execution(std::shared_ptr<const executor_plan> plan, std::int64_t step_id, step_hooks hooks);

  /// Starts the step. `feeds` replace the outputs of the named nodes ("x" or "x:0"); `fetches`
  /// name the tensors returned to `done` in order. `done` runs exactly once, on some thread,
  /// after no node of this step is running any more.
  void start(std::vector<std::pair<std::string, tensor>> feeds, std::vector<std::string> fetches,
             done_callback done);

  /// The fence every variable update of this step claims (devices/update_fence.hpp); set
  /// before start().
  void set_fence(const update_fence& fence) { fence_ = fence; }
  /// The gate of an all-or-nothing step (devices/commit_gate.hpp); any abort of the step
  /// cancels it. Set before start().
  void set_gate(std::shared_ptr<commit_gate> gate);

  /// Ends the step early with `reason` (nodes already running finish; no new ones start).
  void abort(status reason);

  std::int64_t step_id() const { return step_id_; }
  /// Nanoseconds from start() until the last node finished; valid once `done` was called.
  std::int64_t execution_ns() const { return execution_ns_; }

private:
  /// Runs `first` and what it makes ready; `on_pool` says whether this is a pool thread.
  void run_from(int first, bool on_pool);
  /// Whether node `id`, now ready, is cheap enough to run on an actor's thread.
  bool inexpensive(int id);
  /// Runs one node; appends nodes it made ready to `ready`. Returns false when the node
  /// completes later (async kernel or receive).
  bool process(int id, std::vector<int>& ready);
  void complete(int id, std::vector<int>& ready);
  void fail(int id, status s);
  /// For nodes that finish after process() returned (receives, copies, asynchronous
  /// devices): completes `id` and dispatches what it made ready, or fails it; then counts it
  /// done.
  void complete_later(int id);
  void fail_later(int id, status s);
  /// Hands node `id` to its device's asynchronous compute().
  void compute_later(int id, std::vector<tensor> inputs);
  /// Whether input `k` of a kernel on a device with memory of its own is in the wrong memory
  /// (host or device) for it.
  bool needs_copy(const executor_plan::item& it, int k, const tensor& input) const;
  bool inputs_need_copies(int id, const std::vector<tensor>& inputs) const;
  /// Copies the inputs that are in the wrong memory, then computes node `id`.
  void copy_inputs_then_compute(int id, std::vector<tensor> inputs);
  /// Fetched tensors in device memory go to the host before `done` sees them.
  void copy_fetches_to_host(std::vector<tensor> fetched);
  /// One outstanding node is done; the last one ends the step. Nodes a finished node makes
  /// ready are added to outstanding_ before it calls this.
  void finish_one();
  /// Runs `ready` nodes. From an actor's thread (`on_pool` false) every node goes to the pool
  /// when there is one, so the actor stays free for aborts and transfers.
  void dispatch(std::vector<int>& ready, bool on_pool);
  /// Drops this node's hold on its input slots; a slot with no reader left is freed.
  void release_inputs(int id);

  std::shared_ptr<const executor_plan> plan_;
  std::int64_t step_id_;
  step_hooks hooks_;
  std::vector<tensor> slots_;
  std::unique_ptr<std::atomic<int>[]> pending_;
  std::unique_ptr<std::atomic<int>[]> readers_left_;
  std::vector<bool> fed_;
  std::vector<int> fetch_slots_;
  done_callback done_;
  /// Nodes made ready (or running) and not yet finished.
  std::atomic<std::int64_t> outstanding_{0};
  std::atomic<std::int64_t> completed_{0};
  std::atomic<bool> aborted_{false};
  std::chrono::steady_clock::time_point started_;
  std::int64_t execution_ns_ = 0;
  std::mutex status_mutex_;
  status status_;
  /// Ends the waits of this step's collective kernels when it is aborted.
  step_cancellation cancellation_;
  update_fence fence_;
  std::shared_ptr<commit_gate> gate_;
};

} // namespace actorflow
