// Assign, AssignAdd, AssignSub: update the variable named by attr "variable". Input 0 is the
// variable's own output (possibly an empty tensor), input 1 the value; the output is the new
// value. A stored buffer is only written in place when nothing outside this kernel call holds
// it, so readers never see a half-made update and no other tensor is ever changed behind its
// owner's back. Those rules live in devices/variable_update.hpp, shared with the GPU; this
// file keeps the CPU's byte copy and arithmetic.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/device.hpp"
#include "devices/variable_update.hpp"

#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

/// check_input's words, and no memory rules (as in apply_ops.cpp).
const update_rules cpu_update_rules{&check_as_status<&check_input>, false};

template <class T>
class assign_kernel : public op_kernel {
public:
  explicit assign_kernel(const node& n)
    : op_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

  void compute(kernel_context& ctx) override {
    auto overwrite = [](tensor& stored, const tensor& value) -> status {
      std::memcpy(stored.raw_data(), value.raw_data(), value.bytes());
      return {};
    };
    auto st = assign_variable(ctx, *this, variable_, dtype_of<T>(), cpu_update_rules, overwrite);
    if (!st.ok())
      ctx.fail(std::move(st));
  }

private:
  std::string variable_;
};

struct add_update {
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a + b; }
};
struct sub_update {
  template <class A, class B>
  static auto apply(const A& a, const B& b) { return a - b; }
};

template <class T, class Update>
class assign_update_kernel : public op_kernel {
public:
  explicit assign_update_kernel(const node& n)
    : op_kernel(n), variable_(n.attr_or<std::string>("variable", "")) {}

  void compute(kernel_context& ctx) override {
    variable_update held{cpu_update_rules};
    auto prepared = held.prepare_assign_update(ctx, *this, variable_, dtype_of<T>());
    if (!prepared.ok())
      return ctx.fail(std::move(prepared));
    auto var = held.variable<T>(0);
    const T* delta = ctx.input(1).data<T>();
    // In place, var.out is var.in: each element is read before it is written.
    for_blocks(ctx, held.num_elements(), [&](std::int64_t begin, std::int64_t end) {
      auto n = end - begin;
      view(var.out + begin, n) = Update::apply(view(var.in + begin, n), view(delta + begin, n));
    });
    held.commit(ctx);
  }

private:
  std::string variable_;
};

template <class T>
using assign_add_kernel = assign_update_kernel<T, add_update>;
template <class T>
using assign_sub_kernel = assign_update_kernel<T, sub_update>;

} // namespace

void register_assign_kernels(kernel_registry& registry) {
  add_typed_kernels<assign_kernel, float, double, std::int32_t, std::int64_t>(registry, "Assign");
  add_typed_kernels<assign_add_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                  "AssignAdd");
  add_typed_kernels<assign_sub_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                  "AssignSub");
}

} // namespace actorflow
