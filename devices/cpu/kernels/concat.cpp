// ConcatV2 (inputs x0 .. x{N-1}, attr axis) and its gradient SplitToShapesOf (inputs dy, x0 ..
// x{N-1}, attr axis): the same layout walked in opposite directions. Seen as matrices of
// `outer` rows (the product of the dimensions before axis), every part holds one contiguous
// block of each row of the whole, so both kernels copy whole blocks with memcpy, for every
// dtype alike.
#include "devices/concat_layout.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/kernel_attrs.hpp"

#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

enum class direction { into_whole, out_of_whole };

/// Copies every part's blocks into the whole or out of it, rows in parallel when large.
void copy_blocks(kernel_context& ctx, const concat_layout& layout, void* whole,
                 const std::vector<void*>& parts, direction dir) {
  auto* base = static_cast<char*>(whole);
  auto element_bytes = static_cast<std::int64_t>(size_of(ctx.def().kernel_type));
  auto row_elements = static_cast<std::int64_t>(layout.row_bytes) / std::max<std::int64_t>(1, element_bytes);
  for_blocks(
    ctx, layout.outer,
    [&](std::int64_t begin, std::int64_t end) {
      for (auto row = begin; row < end; ++row)
        for (std::size_t i = 0; i < parts.size(); ++i) {
          auto bytes = layout.part_row_bytes[i];
          // An empty part may have no buffer at all; memcpy wants valid pointers even for 0.
          if (bytes == 0)
            continue;
          auto* in_whole = base + static_cast<std::size_t>(row) * layout.row_bytes + layout.offsets[i];
          auto* in_part = static_cast<char*>(parts[i]) + static_cast<std::size_t>(row) * bytes;
          if (dir == direction::into_whole)
            std::memcpy(in_whole, in_part, bytes);
          else
            std::memcpy(in_part, in_whole, bytes);
        }
    },
    std::max<std::int64_t>(1, row_elements));
}

class concat_kernel : public op_kernel {
public:
  concat_kernel(const node& n, std::int64_t axis) : op_kernel(n), axis_(axis) {}

  void compute(kernel_context& ctx) override {
    auto plan = plan_concat(ctx, axis_);
    if (!plan) {
      ctx.fail(plan.error());
      return;
    }
    if (ctx.num_inputs() == 1) {
      ctx.set_output(0, ctx.input(0));
      return;
    }
    tensor out = ctx.allocate_output(0, ctx.def().kernel_type, plan->layout.whole);
    copy_blocks(ctx, plan->layout, out.raw_data(), plan->parts, direction::into_whole);
  }

private:
  std::int64_t axis_;
};

class split_to_shapes_kernel : public op_kernel {
public:
  split_to_shapes_kernel(const node& n, std::int64_t axis) : op_kernel(n), axis_(axis) {}

  void compute(kernel_context& ctx) override {
    auto layout = plan_split_to_shapes(ctx, axis_);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    const tensor& dy = ctx.input(0);
    if (ctx.num_inputs() == 2) {
      ctx.set_output(0, dy);
      return;
    }
    std::vector<void*> parts;
    for (int i = 1; i < ctx.num_inputs(); ++i)
      parts.push_back(
        ctx.allocate_output(i - 1, ctx.def().kernel_type, ctx.input(i).shape()).raw_data());
    copy_blocks(ctx, *layout, dy.raw_data(), parts, direction::out_of_whole);
  }

private:
  std::int64_t axis_;
};

} // namespace

void register_concat_kernels(kernel_registry& registry) {
  registry.add("ConcatV2", "CPU", all_dtypes(), &make_with_axis<concat_kernel>);
  registry.add("SplitToShapesOf", "CPU", all_dtypes(), &make_with_axis<split_to_shapes_kernel>);
}

} // namespace actorflow
