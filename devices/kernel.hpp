#pragma once
/// Op kernels: the code that runs one node on one device.
///   class relu_kernel : public op_kernel { void compute(kernel_context& ctx) override; };
///   registry.add({"Relu", "CPU", dtype::float32}, make_kernel<relu_kernel>);
/// A kernel object is made once per node when a partition is registered (reading attributes
/// there), and compute() runs once per step, possibly for several steps at the same time:
/// kernels keep no per-step state in members (random kernels guard their generator).

#include "devices/update_fence.hpp"
#include "graph/graph.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <exception>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace actorflow {

class commit_gate;
class metric_counter;
class device;
class hash_embedding_table;
class memory_budget;
class thread_pool;
class op_kernel;

/// What becomes of an update that waited for its turn.
enum class update_turn {
  /// Apply it now.
  apply,
  /// It will never be applied: whoever ordered updates stopped first.
  cancelled,
  /// Its fence was applied before (devices/update_fence.hpp): the kernel succeeds without
  /// touching the variable.
  repeat,
};

/// An update of a variable waiting for its turn: called once.
using pending_update = std::function<void(update_turn)>;

/// A variable's storage on a device. `value` is replaced, not written in place, when other
/// tensors still share its buffer, so readers never see a half-made update.
struct variable_state {
  std::mutex mutex;
  tensor value;
  /// How many updates (assigns, adds, optimizer steps) the variable has applied; guarded by
  /// `mutex` like the value.
  std::int64_t version = 0;
  /// Set while a shard actor serves the variable (actors/shard_actor.hpp): the graph's update
  /// kernels hand their update to it, so its mailbox orders them with the shard protocol's.
  /// Empty otherwise: updates then apply on the kernel's thread under `mutex`. Guarded by it.
  /// The claim names the update's step fence and node, for the shard to refuse repeats.
  std::function<void(pending_update, update_claim)> order_update;
  /// Counts the updates for the process's metrics while a shard actor serves the variable
  /// (actorflow_shard_updates_total); null otherwise. Guarded by `mutex`.
  metric_counter* update_counter = nullptr;
  /// Set when this is a hash embedding's table shard (devices/hash_embedding_table.hpp), made by
  /// its HashEmbeddingTable kernel; `value` then stays empty. Guarded by `mutex`.
  std::shared_ptr<hash_embedding_table> table;

  /// One update applied (under `mutex`): the version goes up, and update_counter when set.
  /// Returns the new version. Every update of the value goes through here.
  std::int64_t count_update();
};

/// Per-device, per-session state that outlives steps: the variables.
class resource_manager {
public:
  /// The variable named `name`, created empty on first use (then announced to the observer).
  std::shared_ptr<variable_state> variable(const std::string& name);
  /// The variable if it exists.
  std::shared_ptr<variable_state> find_variable(const std::string& name) const;
  std::vector<std::string> variable_names() const;
  /// Called (on the creating thread, outside this manager's lock) with every variable created
  /// from now on: a task serves each with a shard actor as it appears.
  void on_variable_created(std::function<void(const std::string&)> observer);

  /// The kernel of node `made->name()` that session `session` already runs in another plan, if
  /// one is alive and of the same op; else `made`, remembered for the session's next plans.
  /// For kernels that keep_state(); the plans own them, this manager only finds them.
  std::shared_ptr<op_kernel> session_kernel(std::int64_t session, std::shared_ptr<op_kernel> made);

private:
  mutable std::mutex mutex_;
  std::function<void(const std::string&)> observer_;
  std::unordered_map<std::string, std::shared_ptr<variable_state>> variables_;
  std::map<std::pair<std::int64_t, std::string>, std::weak_ptr<op_kernel>> session_kernels_;
};

/// What ends the waits of a step's asynchronous kernels when the step is aborted (TensorFlow's
/// CancellationManager): a kernel that waits on others (a collective) registers how to stop
/// waiting, so an aborted step never hangs on it. Thread-safe.
class step_cancellation {
public:
  /// Registers `cancel`, which runs at most once, on the aborting thread. Returns a token for
  /// remove(), or 0 when the step is already aborted: then the kernel must not start waiting.
  std::uint64_t add(std::function<void()> cancel);
  /// Drops a registration whose wait ended; false when its cancel has run or is running.
  bool remove(std::uint64_t token);
  /// Runs every registered cancel once; later add() calls return 0.
  void cancel_all();

private:
  std::mutex mutex_;
  bool cancelled_ = false;
  std::uint64_t next_token_ = 1;
  std::unordered_map<std::uint64_t, std::function<void()>> waiting_;
};

/// What a step's kernels keep for later nodes of the same step: the stacks in which a while
/// loop pushes the forward values its gradient pops (StackPush / StackPop), one entry per
/// forward iteration. Dropped with the step, so nothing outlives it. Thread-safe.
class step_resources {
public:
  using index = std::vector<std::int64_t>;
  /// Keeps `value` under (stack, at); a pop waiting for it gets it now.
  void push(const std::string& stack, const index& at, tensor value);
  /// Calls `done` once with the value pushed under (stack, at), removing it: now, or when it
  /// is pushed; or with `cancel`'s error once the step is cancelled.
  void pop(const std::string& stack, const index& at, std::function<void(result<tensor>)> done);
  /// Ends every waiting pop with `reason`; later pops that find nothing fail at once.
  void cancel(const status& reason);

private:
  std::mutex mutex_;
  status cancelled_;
  std::map<std::pair<std::string, index>, tensor> values_;
  std::map<std::pair<std::string, index>, std::function<void(result<tensor>)>> waiting_;
};

/// Everything a kernel sees during one compute() call. Lives until the kernel is done.
class kernel_context {
public:
  kernel_context(const node& n, device& dev, std::int64_t step_id, std::vector<tensor> inputs);

  const node& def() const { return node_; }
  device& dev() { return device_; }
  std::int64_t step_id() const { return step_id_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const tensor& input(int i) const { return inputs_[static_cast<std::size_t>(i)]; }

  /// A fresh output buffer from the device's allocator.
  tensor allocate_output(int i, dtype type, tensor_shape shape);
  /// Sets output i to an existing tensor (shared, not copied).
  void set_output(int i, tensor t);
  std::vector<tensor>& outputs() { return outputs_; }

  /// Marks the kernel failed; the executor adds the node and device to the message.
  void fail(actorflow::status s) {
    if (status_.ok())
      status_ = std::move(s);
  }
  const actorflow::status& status() const { return status_; }

  /// The step's cancellation, for kernels that wait on others; null outside steps (tests,
  /// shards), where nothing aborts.
  step_cancellation* cancellation() const { return cancellation_; }
  void set_cancellation(step_cancellation* cancellation) { cancellation_ = cancellation; }

  /// What allocate_output charges (the session's cap on this device); null: nothing.
  void set_memory_budget(memory_budget* budget) { budget_ = budget; }

  /// The step's resources (its stacks); null outside steps.
  step_resources* resources_of_step() const { return step_resources_; }
  void set_step_resources(step_resources* resources) { step_resources_ = resources; }

  /// The step's fence (devices/update_fence.hpp); unfenced outside coordinator closures.
  const update_fence& fence() const { return fence_; }
  void set_fence(const update_fence& fence) { fence_ = fence; }

  /// Where the step's first updates wait to apply all or none (devices/commit_gate.hpp); null
  /// unless the step asked for that.
  commit_gate* gate() const { return gate_; }
  void set_gate(commit_gate* gate) { gate_ = gate; }

  /// The device's intra-op pool (never null) and its resources.
  thread_pool& intra_op_pool();
  resource_manager& resources();

private:
  const node& node_;
  device& device_;
  std::int64_t step_id_;
  std::vector<tensor> inputs_;
  std::vector<tensor> outputs_;
  actorflow::status status_;
  step_cancellation* cancellation_ = nullptr;
  memory_budget* budget_ = nullptr;
  step_resources* step_resources_ = nullptr;
  update_fence fence_;
  commit_gate* gate_ = nullptr;
};

/// Ok when input `i` of ctx exists, is initialised and has type `expected`; otherwise the
/// error a kernel reports, naming the op and the input. The executor and shape inference
/// normally guarantee all three; this turns a miswired graph into an error instead of a crash.
/// The one check and wording behind the CPU kernels' check_input and the GPU's expect_input.
status input_status(const kernel_context& ctx, int i, dtype expected);

class op_kernel {
public:
  explicit op_kernel(const node& n) : name_(n.name), op_(n.op) {}
  virtual ~op_kernel() = default;

  /// Runs the node synchronously; reports failure through ctx.fail().
  virtual void compute(kernel_context& ctx) = 0;

  /// Asynchronous kernels (receives, GPU work that finishes on a stream) override this and
  /// call `done` exactly once, possibly on another thread, after the outputs are set.
  virtual bool is_async() const { return false; }
  virtual void compute_async(kernel_context& ctx, std::function<void()> done) {
    compute(ctx);
    done();
  }

  /// Whether the kernel's work can exceed what the size of its inputs suggests (Fill and the
  /// random ops make any amount from a shape, MatMul and Conv2D multiply): such kernels never
  /// run inline on an actor's thread (TensorFlow's OpKernel::IsExpensive).
  virtual bool is_expensive() const { return false; }
  /// Whether the kernel carries state from one run to the next (the random ops' generators):
  /// such a kernel is made once per node and session and shared by every plan of the session
  /// that runs the node (TensorFlow's OpSegment), so that a new run signature continues the
  /// node's sequence instead of replaying it.
  virtual bool keeps_state() const { return false; }
  /// Whether input `i` must be in host memory when the kernel runs on a device with memory of
  /// its own (TensorFlow's HostMemory("shape")): the executor copies it there first. Other
  /// inputs are copied into the device's memory.
  virtual bool host_memory_input(int i) const {
    (void)i;
    return false;
  }

  const std::string& name() const { return name_; }
  const std::string& op() const { return op_; }

private:
  std::string name_;
  std::string op_;
};

/// Runs `body` (a kernel's compute, a device's allocation) and turns what it throws into an
/// error: allocation failures keep their message (bytes asked for, bytes in use), other
/// exceptions say what they were. No exception may reach the actor running a step.
template <class Body>
status run_guarded(Body&& body) {
  try {
    body();
    return {};
  } catch (const allocation_failure& e) {
    return make_error(errc::resource_exhausted, e.what());
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, "out of host memory");
  } catch (const std::exception& e) {
    return make_error(errc::internal, std::string{"kernel threw: "} + e.what());
  }
}

/// Makes a kernel for a node; may fail on bad attributes.
using kernel_factory = std::function<result<std::unique_ptr<op_kernel>>(const node&)>;

template <class Kernel>
result<std::unique_ptr<op_kernel>> make_kernel(const node& n) {
  return std::unique_ptr<op_kernel>{std::make_unique<Kernel>(n)};
}

struct kernel_key {
  std::string op;
  /// "CPU", "GPU".
  std::string device_type;
  dtype type;
};

/// Kernels by (op, device type, dtype). Placement and execution both ask this registry, so they
/// never disagree about what can run where.
class kernel_registry {
public:
  /// The process-wide registry with every built-in kernel (CPU always, GPU when built with CUDA).
  static kernel_registry& global();

  void add(const kernel_key& key, kernel_factory factory);
  /// Registers the same factory for several dtypes.
  void add(const std::string& op, const std::string& device_type, std::vector<dtype> types,
           kernel_factory factory);
  bool has(const std::string& op, const std::string& device_type, dtype type) const;
  /// Every kernel registered for `device_type`, as "Op:dtype", sorted (what a task reports to
  /// its master: kernel_key_name).
  std::vector<std::string> kernels_for(const std::string& device_type) const;
  /// Registers every kernel of `existing_type` for `new_type` too (the test device runs the
  /// CPU's kernels on its stream).
  void add_device_type_like(const std::string& new_type, const std::string& existing_type);
  /// Makes the kernel for `n` on a device of `device_type`; an error names the node, the op,
  /// the device type and the dtype when none is registered.
  result<std::unique_ptr<op_kernel>> create(const node& n, const std::string& device_type) const;

private:
  static std::string key_string(const std::string& op, const std::string& device_type, dtype t);
  /// The three fields of a key_string, viewing it.
  struct key_fields {
    std::string_view op, device_type, type;
  };
  static key_fields split_key(const std::string& key);
  std::unordered_map<std::string, kernel_factory> factories_;
};

/// "MatMul:float32": how kernel sets name a kernel of a device type.
std::string kernel_key_name(const std::string& op, dtype type);

/// Registers every CPU kernel (devices/cpu/kernels/).
void register_cpu_kernels(kernel_registry& registry);

} // namespace actorflow
