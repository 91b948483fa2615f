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
/// kernels run inline") run there, at most max_inline_chain of them in a row before the rest
/// of the chain goes to the pool (or, where nodes run on the actor, to hooks.resume); the rest
/// go to the pool, so the actor stays responsive (to an abort, a step's deadline, other steps).

#include "devices/device.hpp"
#include "devices/kernel.hpp"
#include "devices/memory_budget.hpp"
#include "graph/frames.hpp"
#include "graph/graph.hpp"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <string>
#include <unordered_map>
#include <vector>

namespace actorflow {

class executor_plan {
public:
  enum class node_kind : std::uint8_t {
    kernel,
    send,
    recv,
    // Control flow (graph/control_flow.hpp): run by the executor itself, not by kernels.
    switch_node,
    merge,
    enter,
    exit,
    next_iteration,
  };

  /// One edge out of a node: to input `input` of node `dst` (-1: a control edge), carrying
  /// output `src_output`.
  struct edge {
    int dst = -1;
    int input = -1;
    int src_output = 0;
  };

  struct item {
    const node* def = nullptr;
    node_kind kind = node_kind::kernel;
    /// Shared with the session's other plans when it keeps_state().
    std::shared_ptr<op_kernel> kernel;
    /// Slots this node's inputs read, in input order (in the node's frame).
    std::vector<int> input_slots;
    /// Producer node of each input (for error messages).
    std::vector<int> input_nodes;
    /// For inputs read from a variable: its state, read when this node runs (TensorFlow's ref
    /// semantics: a read inside control_dependencies sees the updates it waited for).
    std::vector<std::shared_ptr<variable_state>> input_variables;
    /// The first of this node's output slots, in the frame its outputs live in (the child frame
    /// for an Enter, the parent for an Exit, its own otherwise).
    int first_slot = 0;
    int num_outputs = 0;
    /// Edges to consumers (data and control), so pending counts match.
    std::vector<edge> consumers;
    /// Per input: whether it is a variable ref (op_def::is_variable_ref_input), which may be
    /// an empty tensor and is not read from the variable at run time.
    std::vector<bool> variable_ref_inputs;
    /// Rendezvous key of a _Send / _Recv.
    std::string key;
    /// Whether the node may run on the thread that made it ready (an actor's) when its inputs
    /// are small: false for ops whose work is not bounded by their inputs' size (Fill, the
    /// random ops, MatMul's outer products).
    bool may_inline = true;
    /// The frame the node runs in (0: the step's own), and its index among that frame's nodes.
    int frame = 0;
    int local_id = 0;
    /// An Enter's frame, and whether its value goes to every iteration (a loop invariant).
    int child_frame = -1;
    /// The frame this node's outputs live in (frame_layout::output_frame).
    int out_frame = 0;
    bool constant_enter = false;
    /// A Merge's inputs from outside the loop and from NextIteration (back edges): all of the
    /// first kind dead makes it dead in a loop's first iteration.
    int merge_forward_inputs = 0;
  };

  /// A while loop's frame (or the step's own, frame 0; name, parent and parallel_iterations as
  /// graph/frames.hpp found them): what each of its iterations holds.
  struct frame_info : frame_layout::frame {
    /// Node ids by local id.
    std::vector<int> nodes;
    int num_slots = 0;
    /// Per local id: inputs to wait for (a Merge: twice its control inputs, plus one until a
    /// live input came).
    std::vector<int> initial_pending;
    /// Per slot: the data edges that read it.
    std::vector<int> slot_readers;
    /// Enter nodes into this frame, and its Exit nodes.
    int num_enters = 0;
    std::vector<int> exits;
  };

  /// Makes the kernels of every node of `partition` for `dev`; an error names the node and
  /// the device. The plan keeps `partition` alive and must not outlive `dev`. With `budget`,
  /// every output a kernel allocates is charged to it (devices/memory_budget.hpp). Kernels
  /// that keep state are those of `session`'s other plans on `dev` where they exist (0: the
  /// plan's own).
  static result<std::shared_ptr<const executor_plan>>
  make(std::shared_ptr<const graph> partition, device& dev, const kernel_registry& registry,
       std::shared_ptr<memory_budget> budget = nullptr, std::int64_t session = 0);

  const std::vector<item>& items() const { return items_; }
  const std::vector<frame_info>& frames() const { return frames_; }
  /// Nodes of frame 0 without inputs.
  const std::vector<int>& roots() const { return roots_; }
  /// Whether any node is a control-flow primitive or a _Recv that may get a dead tensor
  /// (attr may_be_dead): steps then track frames, iterations and dead tensors (TensorFlow's PropagatorState); otherwise the lock-free simple propagation.
  bool has_control_flow() const { return has_control_flow_; }
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
  /// Slot of "name:index" or "name" in frame 0, -1 if absent or in a loop.
  int slot_of(const std::string& tensor_name) const;

private:
  std::shared_ptr<const graph> partition_;
  device* device_ = nullptr;
  bool own_memory_ = false;
  bool has_control_flow_ = false;
  std::shared_ptr<memory_budget> budget_;
  int gated_updates_ = 0;
  std::vector<item> items_;
  std::vector<frame_info> frames_;
  std::vector<int> roots_;
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
  /// Without `schedule`: runs the rest of a long chain of nodes off the actor's thread (on the
  /// task's inter-op pool, otherwise unused for ready nodes), so that the actor can take an
  /// abort or a step's deadline meanwhile. When empty (deterministic tests), the chain runs to
  /// its end.
  std::function<void(std::function<void()>)> resume;
};

/// Which outputs of a finished node are dead (control flow: graph/control_flow.hpp).
struct output_deadness {
  /// All of them (a node with a dead input).
  bool all = false;
  /// Only this one is live (a Switch); -1: every output is live unless `all`.
  int live_output = -1;
};

/// One step of one plan. Keep it alive (shared_ptr) until `done` was called.
class step_execution : public std::enable_shared_from_this<step_execution> {
public:
  /// Nodes whose inputs total at most this many bytes run inline on an actor's thread.
  static constexpr std::size_t inline_input_bytes = 16 * 1024;
  /// The most nodes one call runs in a row on an actor's thread before the rest of its chain
  /// moves off it (a loop of small nodes: about 25 us of them).
  static constexpr std::size_t max_inline_chain = 64;

  using done_callback = std::function<void(status, std::vector<tensor>)>;

  step_execution(std::shared_ptr<const executor_plan> plan, std::int64_t step_id, step_hooks hooks);
  ~step_execution();

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
  /// The most iterations of one loop alive at once in this step (0 without loops).
  std::int64_t peak_iterations() const { return peak_iterations_.load(std::memory_order_relaxed); }

  struct frame_state;
  struct iteration_state;
  /// A node to run in one iteration of one frame.
  struct tagged_node {
    int id = -1;
    iteration_state* iteration = nullptr;
  };
  using deadness = output_deadness;

private:
  /// Runs `first` and what it makes ready; `on_pool` says whether this is a pool thread.
  void run_from(tagged_node first, bool on_pool);
  /// Whether node `t`, now ready, is cheap enough to run on an actor's thread.
  bool inexpensive(const tagged_node& t);
  /// Runs one node; appends nodes it made ready to `ready`. Returns false when the node
  /// completes later (async kernel or receive).
  bool process(const tagged_node& t, std::vector<tagged_node>& ready);
  /// Runs a control-flow primitive, with its inputs read.
  bool process_control_flow(const tagged_node& t, std::vector<tensor>& inputs,
                            std::vector<tagged_node>& ready);
  /// Node `t` finished with its outputs in their slots (Enter, Exit and NextIteration pass
  /// theirs in `value`): makes ready what waited for it, in whichever frame and iteration.
  void complete(const tagged_node& t, std::vector<tagged_node>& ready, deadness dead = {},
                tensor value = {});
  void fail(int id, status s);
  /// The rendezvous key of _Send or _Recv `t`: the partition's own string outside loops (no
  /// copy per step), else that plus the frame and iteration, made in `storage`
  /// (graph/rendezvous_key.hpp).
  const std::string& key_of(const tagged_node& t, std::string& storage) const;
  /// For nodes that finish after process() returned (receives, copies, asynchronous
  /// devices): completes `t` and dispatches what it made ready, or fails it; then counts it
  /// done.
  void complete_later(const tagged_node& t, deadness dead = {});
  void fail_later(int id, status s);
  /// Hands node `t` to its device's asynchronous compute().
  void compute_later(const tagged_node& t, std::vector<tensor> inputs);
  /// Whether input `k` of a kernel on a device with memory of its own is in the wrong memory
  /// (host or device) for it.
  bool needs_copy(const executor_plan::item& it, int k, const tensor& input) const;
  bool inputs_need_copies(int id, const std::vector<tensor>& inputs) const;
  /// Copies the inputs that are in the wrong memory, then computes node `t`.
  void copy_inputs_then_compute(const tagged_node& t, std::vector<tensor> inputs);
  /// Fetched tensors in device memory go to the host before `done` sees them.
  void copy_fetches_to_host(std::vector<tensor> fetched);
  /// One outstanding node is done; the last one ends the step. Nodes a finished node makes
  /// ready are added to outstanding_ before it calls this.
  void finish_one();
  /// Runs `ready` nodes, each before any node it makes ready. From an actor's thread
  /// (`on_pool` false) the expensive ones go to the pool when there is one, so the actor stays
  /// free for aborts and transfers.
  void dispatch(std::vector<tagged_node>& ready, bool on_pool);
  /// Hands the nodes of `ready` that this thread should not run to the pool (none without
  /// one) and leaves the others in `ready`, in order: a pool thread keeps the first, an
  /// actor's thread the inexpensive ones.
  void keep_or_hand_off(std::vector<tagged_node>& ready, bool on_pool);
  /// Drops this node's hold on its input slots; a slot with no reader left is freed.
  void release_inputs(const tagged_node& t);
  /// Stores a node's outputs in their slots, those that someone reads or fetches only.
  void keep_read_outputs(iteration_state& iteration, const executor_plan::item& it,
                         std::vector<tensor>& outs);

  // Frames and iterations (steps of plans with control flow only); see executor.cpp.
  void activate(iteration_state& iteration, int id, deadness dead, std::vector<tagged_node>& ready);
  void deliver(iteration_state& iteration, int id, deadness dead, tensor value,
               std::vector<tagged_node>& ready);
  iteration_state& new_iteration(frame_state& frame, std::int64_t index,
                                 std::vector<tagged_node>& ready);
  void enter_frame(const tagged_node& t, bool dead, tensor value, std::vector<tagged_node>& ready);
  void next_iteration(const tagged_node& t, tensor value, std::vector<tagged_node>& ready);
  void leave_frame(const tagged_node& t, tensor value, std::vector<tagged_node>& ready);
  /// Ends the frame's oldest iterations that are done, starting a waiting next one for each;
  /// true when the whole frame is done. Under the frame's mutex.
  bool advance(frame_state& frame, std::vector<tagged_node>& ready);
  /// One node of `iteration` finished: ends the iteration (and the frame) when it was the last.
  void finish_in_frame(iteration_state& iteration, std::vector<tagged_node>& ready);
  void end_frame(frame_state& frame, std::vector<tagged_node>& ready);

  std::shared_ptr<const executor_plan> plan_;
  std::int64_t step_id_;
  step_hooks hooks_;
  std::unique_ptr<frame_state> root_frame_;
  iteration_state* root_ = nullptr;
  std::vector<bool> fed_;
  std::vector<int> fetch_slots_;
  done_callback done_;
  /// Nodes made ready (or running) and not yet finished.
  std::atomic<std::int64_t> outstanding_{0};
  /// Nodes of frame 0 finished: all of them must have when the step ends.
  std::atomic<std::int64_t> completed_{0};
  std::atomic<bool> aborted_{false};
  std::atomic<std::int64_t> peak_iterations_{0};
  std::chrono::steady_clock::time_point started_;
  std::int64_t execution_ns_ = 0;
  std::mutex status_mutex_;
  status status_;
  /// Ends the waits of this step's collective kernels when it is aborted.
  step_cancellation cancellation_;
  /// What kernels keep for later nodes of this step (a loop's stacks).
  step_resources resources_;
  update_fence fence_;
  std::shared_ptr<commit_gate> gate_;
};

} // namespace actorflow
