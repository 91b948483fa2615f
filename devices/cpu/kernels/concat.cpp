// ConcatV2 (inputs x0 .. x{N-1}, attr axis) and its gradient SplitToShapesOf (inputs dy, x0 ..
// x{N-1}, attr axis): the same layout walked in opposite directions. Seen as matrices of
// `outer` rows (the product of the dimensions before axis), every part holds one contiguous
// block of each row of the whole, so both kernels copy whole blocks with memcpy, for every
// dtype alike.
#include "devices/concat_layout.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"

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

/// Makes a Kernel(node, axis) once the required attr "axis" is read.
template <class Kernel>
result<std::unique_ptr<op_kernel>> make_with_axis(const node& n) {
  auto* axis = n.attr<std::int64_t>("axis");
  if (axis == nullptr)
    return bad_attr(n, "axis", "an integer");
  return std::unique_ptr<op_kernel>{std::make_unique<Kernel>(n, *axis)};
}

class concat_kernel : public op_kernel {
public:
  concat_kernel(const node& n, std::int64_t axis) : op_kernel(n), axis_(axis) {}

  void compute(kernel_context& ctx) override {
    auto type = ctx.def().kernel_type;
    if (ctx.num_inputs() == 0) {
      ctx.fail(make_error(errc::invalid_argument, "ConcatV2 needs at least one input"));
      return;
    }
    if (!check_inputs(ctx, ctx.num_inputs(), type))
      return;
    std::vector<tensor_shape> shapes;
    std::vector<void*> parts;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      shapes.push_back(ctx.input(i).shape());
      parts.push_back(ctx.input(i).raw_data());
    }
    auto layout = make_concat_layout("ConcatV2", shapes, axis_, type);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    if (ctx.num_inputs() == 1) {
      ctx.set_output(0, ctx.input(0));
      return;
    }
    tensor out = ctx.allocate_output(0, type, layout->whole);
    copy_blocks(ctx, *layout, out.raw_data(), parts, direction::into_whole);
  }

private:
  std::int64_t axis_;
};

class split_to_shapes_kernel : public op_kernel {
public:
  split_to_shapes_kernel(const node& n, std::int64_t axis) : op_kernel(n), axis_(axis) {}

  void compute(kernel_context& ctx) override {
    auto type = ctx.def().kernel_type;
    if (ctx.num_inputs() < 2) {
      ctx.fail(make_error(errc::invalid_argument,
                          "SplitToShapesOf needs the gradient and at least one shape input"));
      return;
    }
    if (!check_input(ctx, 0, type))
      return;
    const tensor& dy = ctx.input(0);
    // Only the shapes of inputs 1.. matter; their values are never read.
    std::vector<tensor_shape> shapes;
    for (int i = 1; i < ctx.num_inputs(); ++i)
      shapes.push_back(ctx.input(i).shape());
    auto layout = make_concat_layout("SplitToShapesOf", shapes, axis_, type);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    if (layout->whole != dy.shape()) {
      ctx.fail(make_error(errc::invalid_argument,
                          "SplitToShapesOf: a gradient of shape " + dy.shape().to_string() +
                            " cannot be split into shapes " + shape_list(shapes) + " along axis " +
                            std::to_string(axis_)));
      return;
    }
    if (shapes.size() == 1) {
      ctx.set_output(0, dy);
      return;
    }
    std::vector<void*> parts;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      parts.push_back(ctx.allocate_output(static_cast<int>(i), type, shapes[i]).raw_data());
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
