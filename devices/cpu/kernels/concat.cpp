// ConcatV2 (inputs x0 .. x{N-1}, attr axis) and its gradient SplitToShapesOf (inputs dy, x0 ..
// x{N-1}, attr axis): the same layout walked in opposite directions. Seen as matrices of
// `outer` rows (the product of the dimensions before axis), every part holds one contiguous
// block of each row of the whole, so both kernels copy whole blocks with memcpy, for every
// dtype alike.
#include "devices/cpu/kernels/kernel_util.hpp"

#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

/// Where the parts of a concatenation lie in the whole: part i holds part_row_bytes[i] bytes of
/// each of the `outer` rows, at byte offsets[i] of the whole's rows of row_bytes.
struct concat_layout {
  tensor_shape whole;
  std::int64_t outer = 1;
  std::size_t row_bytes = 0;
  std::vector<std::size_t> part_row_bytes;
  std::vector<std::size_t> offsets;
};

std::string shape_list(const std::vector<tensor_shape>& parts) {
  std::string out;
  for (auto& p : parts)
    out += (out.empty() ? "" : ", ") + p.to_string();
  return out;
}

/// The layout of `parts` (concrete shapes) concatenated along `axis_attr`; an error naming the
/// shapes when they have different ranks or differ other than along the axis.
result<concat_layout> make_layout(const std::string& op, const std::vector<tensor_shape>& parts,
                                  std::int64_t axis_attr, dtype type) {
  auto& first = parts.front();
  auto rank = first.rank();
  if (rank == 0)
    return make_error(errc::invalid_argument, op + " cannot concatenate scalars");
  auto axis = normalize_axis(axis_attr, rank, (op + " axis").c_str());
  if (!axis)
    return axis.error();
  concat_layout layout;
  std::vector<std::int64_t> dims = first.dims();
  std::int64_t extent = 0;
  for (auto& part : parts) {
    bool fits = part.rank() == rank;
    for (int d = 0; fits && d < rank; ++d)
      fits = d == *axis || part.dim(d) == first.dim(d);
    if (!fits)
      return make_error(errc::invalid_argument,
                        op + " along axis " + std::to_string(*axis) + ": shapes " +
                          shape_list(parts) + " differ in a dimension other than the axis");
    extent += part.dim(*axis);
  }
  dims[static_cast<std::size_t>(*axis)] = extent;
  layout.whole = tensor_shape{dims};
  std::size_t inner = size_of(type);
  for (int d = 0; d < rank; ++d) {
    if (d < *axis)
      layout.outer *= first.dim(d);
    else if (d > *axis)
      inner *= static_cast<std::size_t>(first.dim(d));
  }
  std::size_t offset = 0;
  for (auto& part : parts) {
    auto bytes = static_cast<std::size_t>(part.dim(*axis)) * inner;
    layout.part_row_bytes.push_back(bytes);
    layout.offsets.push_back(offset);
    offset += bytes;
  }
  layout.row_bytes = offset;
  return layout;
}

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
    auto layout = make_layout("ConcatV2", shapes, axis_, type);
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
    auto layout = make_layout("SplitToShapesOf", shapes, axis_, type);
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
