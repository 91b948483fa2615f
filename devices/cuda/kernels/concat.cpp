// ConcatV2 and its gradient SplitToShapesOf on the GPU: the layout is the CPU's
// (devices/concat_layout.hpp), and each part's blocks move with one strided device-to-device
// cudaMemcpy2DAsync on the compute stream (the part's rows are `part_row_bytes` wide, the whole's
// `row_bytes`; along axis 0, one plain copy). Semantics and messages are the CPU kernels'
// (devices/cpu/kernels/concat.cpp).
#include "devices/concat_layout.hpp"
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/kernel_attrs.hpp"

namespace actorflow::cuda {

namespace {

enum class direction { into_whole, out_of_whole };

/// The largest pitch cudaMemcpy2DAsync takes: cudaDeviceProp::memPitch, 2^31 - 1 on every card
/// since Kepler (H100/H200 included).
constexpr std::size_t max_copy_pitch = 2147483647;

status copy_blocks(const concat_layout& layout, void* whole, const std::vector<void*>& parts,
                   direction dir, cudaStream_t stream) {
  if (layout.outer == 0)
    return {};
  auto* base = static_cast<char*>(whole);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto width = layout.part_row_bytes[i];
    // An empty part may have no buffer at all.
    if (width == 0)
      continue;
    auto* in_whole = base + layout.offsets[i];
    auto* part = static_cast<char*>(parts[i]);
    auto rows = static_cast<std::size_t>(layout.outer);
    auto* to = dir == direction::into_whole ? in_whole : part;
    auto* from = dir == direction::into_whole ? part : in_whole;
    auto to_pitch = dir == direction::into_whole ? layout.row_bytes : width;
    auto from_pitch = dir == direction::into_whole ? width : layout.row_bytes;
    if (rows == 1) {
      // Concatenating along axis 0: one contiguous block, of any size.
      AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to, from, width, cudaMemcpyDeviceToDevice, stream));
    } else if (layout.row_bytes > max_copy_pitch) {
      // cudaMemcpy2DAsync refuses pitches above the device's memPitch: a row at a time (rows
      // this wide are few: the whole must fit on the card).
      for (std::size_t r = 0; r < rows; ++r)
        AF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(to + r * to_pitch, from + r * from_pitch, width,
                                                cudaMemcpyDeviceToDevice, stream));
    } else {
      AF_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, rows,
                                                cudaMemcpyDeviceToDevice, stream));
    }
  }
  return {};
}

class concat_kernel final : public cuda_kernel {
public:
  concat_kernel(const node& n, std::int64_t axis) : cuda_kernel(n), axis_(axis) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_inputs(ctx, ctx.num_inputs(), ctx.def().kernel_type));
    auto plan = plan_concat(ctx, axis_);
    if (!plan)
      return plan.error();
    if (ctx.num_inputs() == 1) {
      ctx.set_output(0, ctx.input(0));
      return {};
    }
    tensor out = ctx.allocate_output(0, ctx.def().kernel_type, plan->layout.whole);
    return copy_blocks(plan->layout, out.raw_data(), plan->parts, direction::into_whole, stream);
  }

private:
  std::int64_t axis_;
};

class split_to_shapes_kernel final : public cuda_kernel {
public:
  split_to_shapes_kernel(const node& n, std::int64_t axis) : cuda_kernel(n), axis_(axis) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    auto layout = plan_split_to_shapes(ctx, axis_);
    if (!layout)
      return layout.error();
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, ctx.def().kernel_type));
    const tensor& dy = ctx.input(0);
    if (ctx.num_inputs() == 2) {
      ctx.set_output(0, dy);
      return {};
    }
    std::vector<void*> parts;
    for (int i = 1; i < ctx.num_inputs(); ++i)
      parts.push_back(
        ctx.allocate_output(i - 1, ctx.def().kernel_type, ctx.input(i).shape()).raw_data());
    return copy_blocks(*layout, dy.raw_data(), parts, direction::out_of_whole, stream);
  }

private:
  std::int64_t axis_;
};

} // namespace

void register_concat_kernels(kernel_registry& registry) {
  registry.add("ConcatV2", "GPU", all_dtypes(), &make_with_axis<concat_kernel>);
  registry.add("SplitToShapesOf", "GPU", all_dtypes(), &make_with_axis<split_to_shapes_kernel>);
}

} // namespace actorflow::cuda
