#pragma once
/// What the kernels that update variables share on every device: finding the variables a node
/// names, locking them, checking them and the inputs, choosing between an update in place and
/// one into a fresh buffer (copy-on-write), and installing the result. Each device keeps only
/// its arithmetic and its copies (devices/cpu/kernels/apply_ops.cpp and assign.cpp,
/// devices/cuda/kernels/variable_updates.cu):
///   variable_update update{rules};                    // on the kernel's stack, once per call
///   AF_RETURN_IF_ERROR(update.prepare(ctx, *this, names_, dtype_of<T>(), {2}, {1}));
///   auto var = update.variable<T>(0);                 // write var.out from var.in, then
///   update.commit(ctx);                               // install, count the version, output 0
/// No CUDA and no Eigen here: nvcc and the host compiler both read this header.

#include "devices/kernel.hpp"
#include "graph/graph.hpp"
#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace actorflow {

/// What the shared update logic asks of the device whose kernel runs it.
struct update_rules {
  /// Ok when data input `i` of ctx exists, is initialised, has type `expected` and lies where
  /// the device can read it; the error otherwise, in the device's words (the CPU kernels'
  /// check_input, the GPU kernels' expect_input). Required.
  status (*check_input)(kernel_context& ctx, int i, dtype expected) = nullptr;
  /// Whether the device's kernels can only address its own memory (a GPU faults on any other
  /// pointer, and that ends its CUDA context): then the optimizer updates refuse a variable
  /// stored elsewhere, and Assign overwrites a stored buffer only with a value from the same
  /// memory space (otherwise it copies). The CPU kernels read host and test-device memory alike.
  bool own_memory_only = false;
};

/// update_rules::check_input made from a check in the CPU kernels' style, which fails ctx
/// itself and says whether the input passed: the error then also comes back as a value.
template <bool (*Check)(kernel_context&, int, dtype)>
status check_as_status(kernel_context& ctx, int i, dtype expected) {
  return Check(ctx, i, expected) ? status{} : ctx.status();
}

/// The names in a comma-separated list ("m,v"), empty ones included ("m,": "m" and ""); none for
/// an empty list.
std::vector<std::string> split_names(const std::string& list);

/// The `count` variables an update op writes, in input order: attr "variable" names input 0's,
/// attr "slots" (comma-separated) those of inputs 1 .. count-1. A name the attributes lack is
/// empty; variable_update::prepare reports it. Read once, when the kernel is made.
std::vector<std::string> updated_variable_names(const node& n, std::size_t count);

/// How many of ctx's inputs share `t`'s buffer: references that end with the kernel call, so
/// they do not count as other users.
long references_from_inputs(const kernel_context& ctx, const tensor& t);

/// Whether `held` (a handle this call owns, e.g. the variable's stored value) is the only
/// reference to its buffer besides ctx's inputs.
bool exclusively_owned(const kernel_context& ctx, const tensor& held);

/// Locks every state's mutex in address order, so that two updates sharing variables never
/// wait on each other whatever order they name them in. The locks come back in the order they
/// were taken; they must not outlive the states. The states must be distinct.
std::vector<std::unique_lock<std::mutex>>
lock_in_address_order(const std::vector<variable_state*>& states);

/// One variable an update writes: where to read its old value and where to write the new one
/// (the same memory when updated in place). Plain pointers into the device's memory, valid
/// while the variable_update that gave them lives; GPU kernels take it by value.
template <class T>
struct updated_variable {
  const T* in = nullptr;
  T* out = nullptr;
};

/// One call's hold on the variables an update kernel writes: from a successful prepare until it
/// is destroyed it holds their locks and knows, per variable, whether the update writes the
/// stored buffer in place or a fresh one that commit() installs. Lives on the stack of one
/// kernel call, on the thread that runs it; what prepare() checks stays true while it lives.
/// Without commit() (the arithmetic failed) nothing changes: fresh buffers are dropped and no
/// version counts.
class variable_update {
public:
  explicit variable_update(update_rules rules) : rules_(rules) {}
  variable_update(const variable_update&) = delete;
  variable_update& operator=(const variable_update&) = delete;

  /// For the optimizer updates (ApplyGradientDescent, ApplyMomentum, ApplyAdam): inputs
  /// 0 .. names.size()-1 are the variables `names` names (the variable, then its slots), every
  /// later input is data of type `type`; `like_variable` lists the data inputs that must have
  /// the variable's shape, `scalars` those that must hold one element. Checks, in this order
  /// and with these errors: every name is there, the data inputs (rules' check_input), no
  /// variable named twice; then locks the variables and checks that all are initialised, that
  /// the variable has type `type`, the slots its type and shape, the inputs their shapes, and
  /// (own_memory_only) that every variable lies in the memory of ctx's device. A variable is
  /// updated in place when only this call's ref inputs share its buffer besides the store; a
  /// data input or any reader elsewhere makes the update write a fresh buffer from
  /// ctx.dev().device_allocator(). `kernel` names the op and node in errors.
  /// `index_inputs`: data inputs that are row indices (int32 or int64) rather than of `type`
  /// (the sparse updates' and scatters').
  status prepare(kernel_context& ctx, const op_kernel& kernel,
                 const std::vector<std::string>& names, dtype type,
                 const std::vector<int>& like_variable, const std::vector<int>& scalars,
                 const std::vector<int>& index_inputs = {});

  /// For AssignAdd and AssignSub: input 0 is the variable `variable` names, input 1 the value
  /// of type `type` that changes it. Checks the value (rules' check_input) and the name, locks
  /// the variable, and checks that it is initialised and has the value's type and shape. The
  /// stored buffer is written in place when nothing but ctx's inputs shares it (each element
  /// is read before it is written, so an input aliasing it is harmless).
  status prepare_assign_update(kernel_context& ctx, const op_kernel& kernel,
                               const std::string& variable, dtype type);

  /// Elements of each variable (they all have the first one's shape), and that shape; valid
  /// after prepare.
  std::int64_t num_elements() const;
  const tensor_shape& shape() const { return states_[0]->value.shape(); }

  /// Variable `i`'s old and new memory, in the order prepare() was given the names.
  template <class T>
  updated_variable<T> variable(std::size_t i) const {
    const tensor& stored = states_[i]->value;
    T* out = fresh_[i].is_initialized() ? fresh_[i].template data<T>() : stored.data<T>();
    return {stored.data<T>(), out};
  }
  /// All `Refs` variables at once, for kernels that take them as an array.
  template <class T, std::size_t Refs>
  std::array<updated_variable<T>, Refs> variables() const {
    std::array<updated_variable<T>, Refs> all;
    for (std::size_t i = 0; i < Refs; ++i)
      all[i] = variable<T>(i);
    return all;
  }
  /// Whether variable `i` is updated in its stored buffer (no fresh one).
  bool in_place(std::size_t i) const { return !fresh_[i].is_initialized(); }

  /// After the arithmetic was written (on a GPU: enqueued): installs the fresh buffers, counts
  /// one more version of the first variable, and makes its value ctx's output 0. The locks
  /// stay held until this object is destroyed.
  void commit(kernel_context& ctx);

private:
  /// Decides in place or fresh for every locked variable; `writable` says whether a stored
  /// buffer may be written in place.
  template <class Writable>
  void choose_buffers(kernel_context& ctx, Writable&& writable);

  update_rules rules_;
  std::vector<std::shared_ptr<variable_state>> states_;
  // After states_: the locks go first, while their mutexes surely live.
  std::vector<std::unique_lock<std::mutex>> locks_;
  std::vector<tensor> fresh_;
};

/// Copies `value`'s bytes into `stored`'s buffer: same dtype and shape, distinct buffers, the
/// same memory space when the rules ask for it. On a GPU: enqueued on the compute stream.
using overwrite_function = std::function<status(tensor& stored, const tensor& value)>;

/// Assign: stores input 1 (type `type`) as the variable `variable` names, under its lock, and
/// makes it ctx's output 0. Adopts the value's buffer when only ctx's inputs hold it; else
/// overwrites the stored buffer (`overwrite`) when it has the value's type and shape and
/// nothing but ctx's inputs holds it; else stores a private copy (ctx.dev().copy_on_device).
/// Then counts one more version. `kernel` names the op and node in errors.
status assign_variable(kernel_context& ctx, const op_kernel& kernel, const std::string& variable,
                       dtype type, const update_rules& rules, const overwrite_function& overwrite);

} // namespace actorflow
