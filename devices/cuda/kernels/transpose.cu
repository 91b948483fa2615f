// The strided copies on the GPU: Transpose, StridedSlice and StridedSliceGrad, with the CPU
// kernels' semantics and messages (devices/cpu/kernels/transpose.cpp, strided_slice.cpp). The
// copy is planned on the host on the fewest dimensions (devices/strided_layout.hpp), and each
// thread computes one output element's input offset from the merged extents and strides. Every
// dtype, moved as unsigned integers of its size; a copy that moves no data shares the input's
// buffer, as on the CPU. One file for the three: nvcc is slow per file.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"
#include "devices/strided_layout.hpp"
#include "graph/strided_slice.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow::cuda {

namespace {

/// The most merged axes a launch takes by value. Merging leaves more only for a permutation
/// or subscript that scatters more than 8 axes of extent > 1, none of which an ML graph makes.
constexpr int max_axes = 8;

struct strided_axes {
  std::int64_t extents[max_axes];
  std::int64_t in_strides[max_axes];
  std::int64_t in_offset;
  int rank;
};

/// `layout` as a launch argument; unimplemented, naming `op` and the shape, past max_axes.
status make_axes(const strided_layout& layout, const char* op, const tensor_shape& in,
                 strided_axes& axes) {
  auto rank = static_cast<int>(layout.extents.size());
  if (rank > max_axes)
    return make_error(errc::unimplemented,
                      std::string(op) + " on a GPU moves at most " + std::to_string(max_axes) +
                        " axes after merging, and this one scatters " + std::to_string(rank) +
                        " of input shape " + in.to_string());
  axes = strided_axes{};
  axes.rank = rank;
  axes.in_offset = layout.in_offset;
  for (int k = 0; k < rank; ++k) {
    axes.extents[k] = layout.extents[static_cast<std::size_t>(k)];
    axes.in_strides[k] = layout.in_strides[static_cast<std::size_t>(k)];
  }
  return {};
}

/// Where output element i lies in the strided side.
__device__ std::int64_t strided_offset(const strided_axes& axes, std::int64_t i) {
  std::int64_t offset = axes.in_offset;
  for (int k = axes.rank - 1; k >= 0; --k) {
    offset += (i % axes.extents[k]) * axes.in_strides[k];
    i /= axes.extents[k];
  }
  return offset;
}

template <class T>
__global__ void gather_body(const T* in, T* out, strided_axes axes, std::int64_t n) {
  AF_GRID_STRIDE_LOOP(i, n) { out[i] = in[strided_offset(axes, i)]; }
}

template <class T>
__global__ void scatter_body(const T* values, T* into, strided_axes axes, std::int64_t n) {
  AF_GRID_STRIDE_LOOP(i, n) { into[strided_offset(axes, i)] = values[i]; }
}

/// Output element i of `axes` is from[offset(i)] (gather) or lands at to[offset(i)] (scatter),
/// for n output elements moved as unsigned integers of `type`'s size.
template <bool Scatter>
status launch_strided(cudaStream_t stream, dtype type, const void* from, void* to,
                      const strided_axes& axes, std::int64_t n) {
  if (n == 0)
    return {};
  auto launch = [&](auto element) {
    using U = decltype(element);
    auto body = Scatter ? scatter_body<U> : gather_body<U>;
    return launch_over(n, stream, body, static_cast<const U*>(from), static_cast<U*>(to), axes, n);
  };
  switch (size_of(type)) {
    case 1:
      return launch(std::uint8_t{});
    case 2:
      return launch(std::uint16_t{});
    case 4:
      return launch(std::uint32_t{});
    default:
      return launch(std::uint64_t{});
  }
}

/// The output of a copy that moves nothing: `x`'s buffer under `shape`.
status share_buffer(kernel_context& ctx, const tensor& x, const tensor_shape& shape) {
  auto same = x.reshaped(shape);
  if (!same)
    return same.error();
  ctx.set_output(0, std::move(*same));
  return {};
}

class transpose_kernel final : public cuda_kernel {
public:
  explicit transpose_kernel(const node& n)
    : cuda_kernel(n), perm_(n.attr_or<std::vector<std::int64_t>>("perm", {})) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, ctx.def().kernel_type));
    const tensor& x = ctx.input(0);
    auto layout = make_transpose_layout(x.shape(), perm_);
    if (!layout)
      return layout.error();
    if (layout->moves_nothing())
      return share_buffer(ctx, x, layout->out_shape);
    strided_axes axes;
    AF_RETURN_IF_ERROR(make_axes(*layout, "Transpose", x.shape(), axes));
    tensor out = ctx.allocate_output(0, x.type(), layout->out_shape);
    return launch_strided<false>(stream, x.type(), x.raw_data(), out.raw_data(), axes,
                                 out.num_elements());
  }

private:
  std::vector<std::int64_t> perm_;
};

class strided_slice_kernel final : public cuda_kernel {
public:
  explicit strided_slice_kernel(const node& n) : cuda_kernel(n), spec_(strided_slice_spec::of(n)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, ctx.def().kernel_type));
    const tensor& x = ctx.input(0);
    auto layout = make_strided_slice_layout(x.shape(), spec_, ctx.def().name);
    if (!layout)
      return layout.error();
    if (layout->moves_nothing())
      return share_buffer(ctx, x, layout->out_shape);
    strided_axes axes;
    AF_RETURN_IF_ERROR(make_axes(*layout, "StridedSlice", x.shape(), axes));
    tensor out = ctx.allocate_output(0, x.type(), layout->out_shape);
    return launch_strided<false>(stream, x.type(), x.raw_data(), out.raw_data(), axes,
                                 out.num_elements());
  }

private:
  strided_slice_spec spec_;
};

class strided_slice_grad_kernel final : public cuda_kernel {
public:
  explicit strided_slice_grad_kernel(const node& n)
    : cuda_kernel(n), spec_(strided_slice_spec::of(n)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    // Input 0 (x) gives only its shape.
    AF_RETURN_IF_ERROR(expect_input(ctx, 1, ctx.def().kernel_type));
    const tensor& x = ctx.input(0);
    const tensor& dy = ctx.input(1);
    auto layout = make_strided_slice_grad_layout(x.shape(), dy.shape(), spec_, ctx.def().name);
    if (!layout)
      return layout.error();
    if (layout->moves_nothing())
      return share_buffer(ctx, dy, x.shape());
    strided_axes axes;
    AF_RETURN_IF_ERROR(make_axes(*layout, "StridedSliceGrad", x.shape(), axes));
    tensor dx = ctx.allocate_output(0, dy.type(), x.shape());
    if (dx.bytes() > 0)
      AF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx.raw_data(), 0, dx.bytes(), stream));
    return launch_strided<true>(stream, dy.type(), dy.raw_data(), dx.raw_data(), axes,
                                dy.num_elements());
  }

private:
  strided_slice_spec spec_;
};

} // namespace

void register_transpose_kernels(kernel_registry& registry) {
  registry.add("Transpose", "GPU", all_dtypes(), &make_kernel<transpose_kernel>);
  registry.add("StridedSlice", "GPU", all_dtypes(), &make_kernel<strided_slice_kernel>);
  registry.add("StridedSliceGrad", "GPU", all_dtypes(), &make_kernel<strided_slice_grad_kernel>);
}

} // namespace actorflow::cuda
