// Shape, Size and Rank on the GPU, with the CPU kernels' semantics and messages
// (devices/cpu/kernels/shape.cpp): the values come from the input's shape on the host and
// reach the output in device memory through one tiny kernel that takes them by value, so the
// step never waits for the stream and the input's bytes never leave the card (a CPU Shape of
// a GPU tensor would copy the whole tensor to the host first).
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace actorflow::cuda {

namespace {

/// The most values a launch carries: a Shape of rank up to 16 (ML tensors have at most 8).
constexpr int max_values = 16;

struct shape_values {
  std::int64_t values[max_values];
  int count;
};

template <class Out>
__global__ void write_values(Out* out, shape_values values) {
  auto i = static_cast<int>(threadIdx.x);
  if (i < values.count)
    out[i] = static_cast<Out>(values.values[i]);
}

enum class shape_query { shape, size, rank };

class shape_kernel final : public cuda_kernel {
public:
  shape_kernel(const node& n, shape_query query, dtype out_type)
    : cuda_kernel(n), query_(query), out_type_(out_type) {}

  template <shape_query Query>
  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto out_type = Query == shape_query::rank ? dtype::int32 : n.attr_or<dtype>("out_type", dtype::int32);
    if (out_type != dtype::int32 && out_type != dtype::int64)
      return make_error(errc::invalid_argument, n.op + " node '" + n.name +
                                                  "': out_type must be int32 or int64, not " +
                                                  to_string(out_type));
    return std::unique_ptr<op_kernel>{std::make_unique<shape_kernel>(n, Query, out_type)};
  }

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, ctx.def().kernel_type));
    auto& shape = ctx.input(0).shape();
    std::vector<std::int64_t> values;
    switch (query_) {
      case shape_query::shape:
        values = shape.dims();
        break;
      case shape_query::size:
        values = {shape.num_elements()};
        break;
      case shape_query::rank:
        values = {shape.rank()};
        break;
    }
    if (values.size() > static_cast<std::size_t>(max_values))
      return make_error(errc::unimplemented, "Shape on a GPU takes ranks up to " +
                                               std::to_string(max_values) + ", not " +
                                               std::to_string(values.size()));
    shape_values arg{};
    arg.count = static_cast<int>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (out_type_ == dtype::int32 && values[i] > std::numeric_limits<std::int32_t>::max())
        return make_error(errc::invalid_argument,
                          ctx.def().op + ": " + std::to_string(values[i]) + " (of shape " +
                            shape.to_string() + ") does not fit in int32; use out_type int64");
      arg.values[i] = values[i];
    }
    auto out = ctx.allocate_output(0, out_type_, query_ == shape_query::shape
                                                   ? tensor_shape{static_cast<std::int64_t>(values.size())}
                                                   : tensor_shape{});
    if (values.empty())
      return {};
    if (out_type_ == dtype::int64)
      write_values<<<1, max_values, 0, stream>>>(out.data<std::int64_t>(), arg);
    else
      write_values<<<1, max_values, 0, stream>>>(out.data<std::int32_t>(), arg);
    AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return {};
  }

private:
  shape_query query_;
  dtype out_type_;
};

} // namespace

void register_shape_kernels(kernel_registry& registry) {
  registry.add("Shape", "GPU", all_dtypes(), &shape_kernel::make<shape_query::shape>);
  registry.add("Size", "GPU", all_dtypes(), &shape_kernel::make<shape_query::size>);
  registry.add("Rank", "GPU", all_dtypes(), &shape_kernel::make<shape_query::rank>);
}

} // namespace actorflow::cuda
