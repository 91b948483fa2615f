// Shape, Size and Rank: what a tensor's run-time shape says, as int32 (or, for Shape and Size
// with attr out_type, int64) tensors. Registered for every input dtype; the input's values are
// never read.
#include "devices/cpu/kernels/kernel_util.hpp"

#include <limits>

namespace actorflow {

namespace {

using namespace cpu;

enum class shape_query { shape, size, rank };

class shape_kernel : public op_kernel {
public:
  shape_kernel(const node& n, shape_query query, dtype out_type)
    : op_kernel(n), query_(query), out_type_(out_type) {}

  template <shape_query Query>
  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    auto out_type = Query == shape_query::rank ? dtype::int32 : n.attr_or<dtype>("out_type", dtype::int32);
    if (out_type != dtype::int32 && out_type != dtype::int64)
      return make_error(errc::invalid_argument, n.op + " node '" + n.name +
                                                  "': out_type must be int32 or int64, not " +
                                                  to_string(out_type));
    return std::unique_ptr<op_kernel>{std::make_unique<shape_kernel>(n, Query, out_type)};
  }

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, ctx.def().kernel_type))
      return;
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
    auto out = ctx.allocate_output(0, out_type_, query_ == shape_query::shape
                                                   ? tensor_shape{static_cast<std::int64_t>(values.size())}
                                                   : tensor_shape{});
    if (out_type_ == dtype::int64) {
      std::copy(values.begin(), values.end(), out.data<std::int64_t>());
      return;
    }
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] > std::numeric_limits<std::int32_t>::max()) {
        ctx.fail(make_error(errc::invalid_argument,
                            ctx.def().op + ": " + std::to_string(values[i]) + " (of shape " +
                              shape.to_string() + ") does not fit in int32; use out_type int64"));
        return;
      }
      out.data<std::int32_t>()[i] = static_cast<std::int32_t>(values[i]);
    }
  }

private:
  shape_query query_;
  dtype out_type_;
};

} // namespace

void register_shape_kernels(kernel_registry& registry) {
  registry.add("Shape", "CPU", all_dtypes(), &shape_kernel::make<shape_query::shape>);
  registry.add("Size", "CPU", all_dtypes(), &shape_kernel::make<shape_query::size>);
  registry.add("Rank", "CPU", all_dtypes(), &shape_kernel::make<shape_query::rank>);
}

} // namespace actorflow
