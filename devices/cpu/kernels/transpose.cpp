// Transpose: x's axes in the order of attr perm (graph/shape_ops.hpp), for every dtype. The
// copy is planned on the fewest dimensions that describe it (devices/transpose_layout.hpp); a
// permutation that moves no data (only axes of extent 1 move) shares the input's buffer.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/transpose_layout.hpp"

#include <cstring>

namespace actorflow {

namespace {

using namespace cpu;

/// Output elements [begin, end) of the transpose `layout` describes, from `in` to `out`.
/// Elements are moved as unsigned integers of their size: a transpose never looks at values.
template <class T>
void copy_permuted(const T* in, T* out, const transpose_layout& layout, std::int64_t begin,
                   std::int64_t end) {
  auto rank = layout.extents.size();
  auto& extents = layout.extents;
  auto& strides = layout.in_strides;
  // The output position `begin` as an index per axis, and where it reads in the input.
  std::vector<std::int64_t> index(rank);
  std::int64_t offset = 0;
  auto rest = begin;
  for (auto k = rank; k-- > 0;) {
    index[k] = rest % extents[k];
    rest /= extents[k];
    offset += index[k] * strides[k];
  }
  auto inner = rank - 1;
  auto inner_extent = extents[inner];
  auto inner_stride = strides[inner];
  for (auto i = begin; i < end;) {
    // One run along the innermost output axis, then carry into the outer ones.
    auto run = std::min(inner_extent - index[inner], end - i);
    const T* from = in + offset;
    T* to = out + i;
    for (std::int64_t j = 0; j < run; ++j)
      to[j] = from[j * inner_stride];
    i += run;
    index[inner] += run;
    offset += run * inner_stride;
    if (index[inner] < inner_extent || i >= end)
      continue;
    offset -= inner_extent * inner_stride;
    index[inner] = 0;
    for (auto k = inner; k-- > 0;) {
      ++index[k];
      offset += strides[k];
      if (index[k] < extents[k])
        break;
      offset -= extents[k] * strides[k];
      index[k] = 0;
    }
  }
}

class transpose_kernel : public op_kernel {
public:
  transpose_kernel(const node& n)
    : op_kernel(n), perm_(n.attr_or<std::vector<std::int64_t>>("perm", {})) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, ctx.def().kernel_type))
      return;
    const tensor& x = ctx.input(0);
    auto layout = make_transpose_layout(x.shape(), perm_);
    if (!layout) {
      ctx.fail(layout.error());
      return;
    }
    if (layout->moves_nothing()) {
      auto same = x.reshaped(layout->out_shape);
      if (same)
        ctx.set_output(0, std::move(*same));
      else
        ctx.fail(same.error());
      return;
    }
    tensor out = ctx.allocate_output(0, x.type(), layout->out_shape);
    auto n = out.num_elements();
    auto copy = [&](auto element) {
      using U = decltype(element);
      auto* from = static_cast<const U*>(x.raw_data());
      auto* to = static_cast<U*>(out.raw_data());
      // Strided reads cost more than a plain copy's: blocks half the usual size.
      for_blocks(ctx, n, [&](std::int64_t begin, std::int64_t end) {
        copy_permuted(from, to, *layout, begin, end);
      }, 2);
    };
    switch (size_of(x.type())) {
      case 1:
        copy(std::uint8_t{});
        break;
      case 2:
        copy(std::uint16_t{});
        break;
      case 4:
        copy(std::uint32_t{});
        break;
      default:
        copy(std::uint64_t{});
        break;
    }
  }

private:
  std::vector<std::int64_t> perm_;
};

} // namespace

void register_transpose_kernels(kernel_registry& registry) {
  registry.add("Transpose", "CPU", all_dtypes(), &make_kernel<transpose_kernel>);
}

} // namespace actorflow
