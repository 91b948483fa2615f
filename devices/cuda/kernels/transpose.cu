// Transpose on the GPU, with the CPU kernel's semantics and messages
// (devices/cpu/kernels/transpose.cpp): the copy is planned on the host on the fewest dimensions
// (devices/transpose_layout.hpp), and each thread computes one output element's input offset
// from the merged extents and strides. Every dtype, moved as unsigned integers of its size; a
// permutation that moves no data shares the input's buffer, as on the CPU.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"
#include "devices/transpose_layout.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace actorflow::cuda {

namespace {

/// The most merged axes a launch takes by value. Merging leaves more only for a permutation
/// that scatters more than 8 axes of extent > 1, none of which an ML graph makes.
constexpr int max_axes = 8;

struct transpose_axes {
  std::int64_t extents[max_axes];
  std::int64_t in_strides[max_axes];
  int rank;
};

template <class T>
__global__ void transpose_body(const T* in, T* out, transpose_axes axes, std::int64_t n) {
  AF_GRID_STRIDE_LOOP(i, n) {
    auto rest = i;
    std::int64_t offset = 0;
    for (int k = axes.rank - 1; k >= 0; --k) {
      offset += (rest % axes.extents[k]) * axes.in_strides[k];
      rest /= axes.extents[k];
    }
    out[i] = in[offset];
  }
}

template <class T>
status launch_transpose(cudaStream_t stream, const tensor& x, tensor& out,
                        const transpose_axes& axes, std::int64_t n) {
  return launch_over(n, stream, transpose_body<T>, static_cast<const T*>(x.raw_data()),
                     static_cast<T*>(out.raw_data()), axes, n);
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
    if (layout->moves_nothing()) {
      auto same = x.reshaped(layout->out_shape);
      if (!same)
        return same.error();
      ctx.set_output(0, std::move(*same));
      return {};
    }
    auto rank = static_cast<int>(layout->extents.size());
    if (rank > max_axes)
      return make_error(errc::unimplemented,
                        "Transpose on a GPU moves at most " + std::to_string(max_axes) +
                          " axes after merging, and perm scatters " + std::to_string(rank) +
                          " of input shape " + x.shape().to_string());
    transpose_axes axes{};
    axes.rank = rank;
    for (int k = 0; k < rank; ++k) {
      axes.extents[k] = layout->extents[static_cast<std::size_t>(k)];
      axes.in_strides[k] = layout->in_strides[static_cast<std::size_t>(k)];
    }
    tensor out = ctx.allocate_output(0, x.type(), layout->out_shape);
    auto n = out.num_elements();
    if (n == 0)
      return {};
    switch (size_of(x.type())) {
      case 1:
        return launch_transpose<std::uint8_t>(stream, x, out, axes, n);
      case 2:
        return launch_transpose<std::uint16_t>(stream, x, out, axes, n);
      case 4:
        return launch_transpose<std::uint32_t>(stream, x, out, axes, n);
      default:
        return launch_transpose<std::uint64_t>(stream, x, out, axes, n);
    }
  }

private:
  std::vector<std::int64_t> perm_;
};

} // namespace

void register_transpose_kernels(kernel_registry& registry) {
  registry.add("Transpose", "GPU", all_dtypes(), &make_kernel<transpose_kernel>);
}

} // namespace actorflow::cuda
