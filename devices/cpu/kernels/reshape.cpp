// Reshape: the same buffer under a new shape (attr "shape", at most one -1 to infer).
#include "devices/cpu/kernels/cpu_kernels.hpp"
#include "devices/kernel.hpp"

namespace actorflow {

namespace {

class reshape_kernel : public op_kernel {
public:
  reshape_kernel(const node& n, std::vector<std::int64_t> dims, int unknown)
    : op_kernel(n), dims_(std::move(dims)), unknown_(unknown) {}

  static result<std::unique_ptr<op_kernel>> make(const node& n) {
    std::vector<std::int64_t> dims;
    if (auto* d = n.attr<std::vector<std::int64_t>>("shape"))
      dims = *d;
    else if (auto* s = n.attr<tensor_shape>("shape"); s != nullptr && s->rank_known())
      dims = s->dims();
    else
      return make_error(errc::invalid_argument,
                        "Reshape node '" + n.name + "' has no 'shape' attribute");
    int unknown = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] >= 0)
        continue;
      if (dims[i] != -1 || unknown >= 0)
        return make_error(errc::invalid_argument,
                          "Reshape node '" + n.name + "': shape " + tensor_shape{dims}.to_string() +
                            " may have only one unknown (-1) dimension and no other negative one");
      unknown = static_cast<int>(i);
    }
    return std::unique_ptr<op_kernel>{std::make_unique<reshape_kernel>(n, std::move(dims), unknown)};
  }

  void compute(kernel_context& ctx) override {
    const tensor& x = ctx.input(0);
    auto dims = dims_;
    std::int64_t known = 1;
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (static_cast<int>(i) != unknown_)
        known *= dims[i];
    auto count = x.num_elements();
    if (unknown_ >= 0) {
      if (known == 0 || count % known != 0) {
        ctx.fail(mismatch(x, dims));
        return;
      }
      dims[static_cast<std::size_t>(unknown_)] = count / known;
    } else if (known != count) {
      ctx.fail(mismatch(x, dims));
      return;
    }
    auto reshaped = x.reshaped(tensor_shape{std::move(dims)});
    if (!reshaped) {
      ctx.fail(reshaped.error());
      return;
    }
    ctx.set_output(0, std::move(*reshaped));
  }

private:
  static status mismatch(const tensor& x, const std::vector<std::int64_t>& dims) {
    return make_error(errc::invalid_argument,
                      "Input to reshape is a tensor with " + std::to_string(x.num_elements()) +
                        " values (shape " + x.shape().to_string() +
                        "), which cannot be reshaped to " + tensor_shape{dims}.to_string());
  }

  std::vector<std::int64_t> dims_;
  int unknown_;
};

} // namespace

void register_reshape_kernels(kernel_registry& registry) {
  registry.add("Reshape", "CPU",
               all_dtypes(),
               &reshape_kernel::make);
}

} // namespace actorflow
