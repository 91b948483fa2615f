// Sum, Mean, Max, Min, Prod over attr "axes" (empty = all, negative from the end), attr
// "keep_dims"; and ProdGrad, Prod's gradient.
//
// The input is viewed as alternating groups of kept and reduced dimensions (size-1 dimensions
// dropped, neighbours of the same kind merged). The common layouts then become one of four
// contiguous patterns, each a loop of vectorised Eigen reductions:
//   [R]        everything          -> one value (split into chunks for the pool)
//   [K, R]     innermost axes      -> one reduction per row
//   [R, K]     outermost axes      -> rows accumulated into one output row
//   [K, R, K]  middle axes         -> the previous pattern per outer index
// Anything else falls back to a strided walk over the input.
#include "devices/cpu/kernels/kernel_util.hpp"
#include "devices/reducers.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace actorflow {

namespace {

using namespace cpu;

struct sum_reducer : sum_traits {
  template <class T>
  static T combine(T a, T b) { return a + b; }
  template <class X>
  static auto reduce(const X& x) { return x.sum(); }
  template <class A, class B>
  static void accumulate(A& into, const B& row) { into += row; }
};

struct max_reducer : max_traits {
  template <class T>
  static T combine(T a, T b) { return a < b ? b : a; }
  template <class X>
  static auto reduce(const X& x) { return x.maxCoeff(); }
  template <class A, class B>
  static void accumulate(A& into, const B& row) { into = into.max(row); }
};

struct min_reducer : min_traits {
  template <class T>
  static T combine(T a, T b) { return b < a ? b : a; }
  template <class X>
  static auto reduce(const X& x) { return x.minCoeff(); }
  template <class A, class B>
  static void accumulate(A& into, const B& row) { into = into.min(row); }
};

struct prod_reducer : prod_traits {
  template <class T>
  static T combine(T a, T b) { return a * b; }
  template <class X>
  static auto reduce(const X& x) { return x.prod(); }
  template <class A, class B>
  static void accumulate(A& into, const B& row) { into *= row; }
};

/// A dimension group: its size and whether it is reduced.
struct group {
  std::int64_t size;
  bool reduced;
};

/// fn(input index, output index) for every element of an input of dimensions `dims`, in order;
/// the output index moves by out_strides[d] along dimension d (0 along a reduced one).
template <class F>
void for_each_output_index(const std::vector<std::int64_t>& dims,
                           const std::vector<std::int64_t>& out_strides, F&& fn) {
  std::int64_t total = 1;
  for (auto d : dims)
    total *= d;
  std::vector<std::int64_t> index(dims.size(), 0);
  std::int64_t o = 0;
  for (std::int64_t i = 0; i < total; ++i) {
    fn(i, o);
    for (std::size_t d = dims.size(); d-- > 0;) {
      o += out_strides[d];
      if (++index[d] < dims[d])
        break;
      o -= index[d] * out_strides[d];
      index[d] = 0;
    }
  }
}

template <class T, class Reducer>
T reduce_contiguous(const T* p, std::int64_t n) {
  if (n == 0)
    return Reducer::template identity<T>();
  using acc = typename Reducer::template accumulator<T>;
  if constexpr (std::is_same_v<acc, T>) {
    return Reducer::reduce(view(p, n));
  } else {
    return static_cast<T>(Reducer::reduce(view(p, n).template cast<acc>()));
  }
}

/// out[0, cols) = reduction over `rows` rows of length `cols` starting at `p` (row stride cols).
template <class T, class Reducer>
void reduce_columns(const T* p, std::int64_t rows, std::int64_t cols, T* out) {
  auto o = view(out, cols);
  if (rows == 0) {
    o.setConstant(Reducer::template identity<T>());
    return;
  }
  using acc = typename Reducer::template accumulator<T>;
  if constexpr (std::is_same_v<acc, T>) {
    o = view(p, cols);
    for (std::int64_t r = 1; r < rows; ++r)
      Reducer::accumulate(o, view(p + r * cols, cols));
  } else {
    array<acc> total = view(p, cols).template cast<acc>();
    for (std::int64_t r = 1; r < rows; ++r)
      Reducer::accumulate(total, view(p + r * cols, cols).template cast<acc>());
    o = total.template cast<T>();
  }
}

template <class T, class Reducer, bool mean>
class reduction_kernel : public op_kernel {
public:
  explicit reduction_kernel(const node& n)
    : op_kernel(n), axes_(n.attr_or<std::vector<std::int64_t>>("axes", {})),
      keep_dims_(n.attr_or<bool>("keep_dims", false)) {}

  void compute(kernel_context& ctx) override {
    if (!check_input(ctx, 0, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    const auto& shape = x.shape();
    auto rank = shape.rank();

    auto reduced_or_error = reduced_dimensions(axes_, rank);
    if (!reduced_or_error) {
      ctx.fail(reduced_or_error.error());
      return;
    }
    auto& reduced = *reduced_or_error;

    std::vector<std::int64_t> out_dims;
    for (int i = 0; i < rank; ++i) {
      if (!reduced[static_cast<std::size_t>(i)])
        out_dims.push_back(shape.dim(i));
      else if (keep_dims_)
        out_dims.push_back(1);
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{out_dims});
    auto out_count = out.num_elements();
    if (out_count == 0)
      return;
    auto in_count = x.num_elements();
    const T* px = x.data<T>();
    T* po = out.data<T>();

    std::vector<group> groups;
    for (int i = 0; i < rank; ++i) {
      auto d = shape.dim(i);
      bool r = reduced[static_cast<std::size_t>(i)];
      if (d == 1)
        continue;
      if (!groups.empty() && groups.back().reduced == r)
        groups.back().size *= d;
      else
        groups.push_back({d, r});
    }

    if (groups.empty() || (groups.size() == 1 && !groups[0].reduced)) {
      // Only size-1 axes are reduced: the values pass through.
      std::memcpy(po, px, x.bytes());
    } else if (groups.size() == 1) {
      reduce_all(ctx, px, in_count, po);
    } else if (groups.size() == 2 && !groups[0].reduced) {
      auto rows = groups[0].size;
      auto len = groups[1].size;
      for_blocks(
        ctx, rows,
        [&](std::int64_t begin, std::int64_t end) {
          for (auto r = begin; r < end; ++r)
            po[r] = reduce_contiguous<T, Reducer>(px + r * len, len);
        },
        len);
    } else if (groups.size() == 2) {
      reduce_outer(ctx, px, groups[0].size, groups[1].size, po);
    } else if (groups.size() == 3 && !groups[0].reduced) {
      auto outer = groups[0].size;
      auto rows = groups[1].size;
      auto cols = groups[2].size;
      for_blocks(
        ctx, outer,
        [&](std::int64_t begin, std::int64_t end) {
          for (auto o = begin; o < end; ++o)
            reduce_columns<T, Reducer>(px + o * rows * cols, rows, cols, po + o * cols);
        },
        rows * cols);
    } else {
      reduce_strided(groups, px, po, out_count);
    }

    if constexpr (mean) {
      // in_count / out_count is the number of elements each output summarises.
      auto per_output = in_count / out_count;
      T scale = per_output == 0 ? std::numeric_limits<T>::quiet_NaN() : T(1) / T(per_output);
      if (per_output == 0)
        view(po, out_count).setConstant(scale);
      else
        view(po, out_count) *= scale;
    }
  }

private:
  void reduce_all(kernel_context& ctx, const T* p, std::int64_t n, T* out) {
    auto chunks = reduction_chunks(ctx, n);
    if (chunks == 1) {
      *out = reduce_contiguous<T, Reducer>(p, n);
      return;
    }
    std::vector<T> partial(static_cast<std::size_t>(chunks));
    auto chunk = (n + chunks - 1) / chunks;
    ctx.intra_op_pool().parallel_for(chunks, [&](std::int64_t begin, std::int64_t end) {
      for (auto c = begin; c < end; ++c) {
        auto first = std::min(n, c * chunk);
        auto last = std::min(n, first + chunk);
        partial[static_cast<std::size_t>(c)] = reduce_contiguous<T, Reducer>(p + first, last - first);
      }
    });
    T total = partial[0];
    for (std::size_t c = 1; c < partial.size(); ++c)
      total = Reducer::combine(total, partial[c]);
    *out = total;
  }

  /// [rows, cols] reduced over rows. Parallel by splitting the rows into chunks, each
  /// accumulating its own partial output row, so it scales even when cols is small.
  void reduce_outer(kernel_context& ctx, const T* p, std::int64_t rows, std::int64_t cols, T* out) {
    auto chunks = std::min(rows, reduction_chunks(ctx, rows * cols));
    if (chunks <= 1) {
      reduce_columns<T, Reducer>(p, rows, cols, out);
      return;
    }
    auto chunk = (rows + chunks - 1) / chunks;
    array<T> partial(static_cast<Eigen::Index>(chunks * cols));
    ctx.intra_op_pool().parallel_for(chunks, [&](std::int64_t begin, std::int64_t end) {
      for (auto c = begin; c < end; ++c) {
        auto first = std::min(rows, c * chunk);
        auto last = std::min(rows, first + chunk);
        reduce_columns<T, Reducer>(p + first * cols, last - first, cols, partial.data() + c * cols);
      }
    });
    auto o = view(out, cols);
    o = view(static_cast<const T*>(partial.data()), cols);
    for (std::int64_t c = 1; c < chunks; ++c)
      Reducer::accumulate(o, view(static_cast<const T*>(partial.data()) + c * cols, cols));
  }

  /// The general case: walk the input in order, tracking the output offset with an odometer.
  static void reduce_strided(const std::vector<group>& groups, const T* p, T* out_values,
                             std::int64_t out_count) {
    using acc = typename Reducer::template accumulator<T>;
    std::vector<acc> out(static_cast<std::size_t>(out_count),
                         static_cast<acc>(Reducer::template identity<T>()));
    auto g = groups.size();
    // Output stride of each group: 0 for reduced groups, else the product of later kept sizes.
    std::vector<std::int64_t> sizes(g), out_strides(g, 0);
    std::int64_t stride = 1;
    for (std::size_t i = g; i-- > 0;) {
      sizes[i] = groups[i].size;
      if (!groups[i].reduced) {
        out_strides[i] = stride;
        stride *= groups[i].size;
      }
    }
    for_each_output_index(sizes, out_strides, [&](std::int64_t i, std::int64_t o) {
      auto& slot = out[static_cast<std::size_t>(o)];
      slot = Reducer::combine(slot, static_cast<acc>(p[i]));
    });
    for (std::int64_t i = 0; i < out_count; ++i)
      out_values[i] = static_cast<T>(out[static_cast<std::size_t>(i)]);
  }

  std::vector<std::int64_t> axes_;
  bool keep_dims_;
};

template <class T>
using sum_kernel = reduction_kernel<T, sum_reducer, false>;
template <class T>
using mean_kernel = reduction_kernel<T, sum_reducer, true>;
template <class T>
using max_kernel = reduction_kernel<T, max_reducer, false>;
template <class T>
using min_kernel = reduction_kernel<T, min_reducer, false>;
template <class T>
using prod_kernel = reduction_kernel<T, prod_reducer, false>;

/// ProdGrad(x, dy), attrs axes and keep_dims as the Prod's: dx = dy times the product of the
/// other elements of each element's group. Counting a group's zeros keeps it exact where
/// there are some: with one zero only that element gets the product of the rest, with two
/// or more every element gets 0. Without zeros it is the group's product over the element.
template <class T>
class prod_grad_kernel : public op_kernel {
public:
  explicit prod_grad_kernel(const node& n)
    : op_kernel(n), axes_(n.attr_or<std::vector<std::int64_t>>("axes", {})) {}

  void compute(kernel_context& ctx) override {
    if (!check_inputs(ctx, 2, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    const tensor& dy = ctx.input(1);
    auto rank = x.shape().rank();
    auto reduced = reduced_dimensions(axes_, rank);
    if (!reduced) {
      ctx.fail(reduced.error());
      return;
    }
    // Each input element's output index: strides over the kept dimensions, 0 over reduced ones.
    std::vector<std::int64_t> out_strides(static_cast<std::size_t>(rank), 0);
    std::int64_t out_count = 1;
    for (int i = rank - 1; i >= 0; --i) {
      if ((*reduced)[static_cast<std::size_t>(i)])
        continue;
      out_strides[static_cast<std::size_t>(i)] = out_count;
      out_count *= x.shape().dim(i);
    }
    if (dy.num_elements() != out_count) {
      ctx.fail(make_error(errc::invalid_argument,
                          "ProdGrad '" + ctx.def().name + "': the gradient has " +
                            std::to_string(dy.num_elements()) + " elements where the Prod of " +
                            x.shape().to_string() + " gives " + std::to_string(out_count)));
      return;
    }
    tensor dx = ctx.allocate_output(0, dtype_of<T>(), x.shape());
    using acc = typename prod_traits::template accumulator<T>;
    std::vector<acc> nonzero_product(static_cast<std::size_t>(out_count), acc(1));
    std::vector<std::int64_t> zeros(static_cast<std::size_t>(out_count), 0);
    const T* px = x.data<T>();
    const T* pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    const auto& dims = x.shape().dims();
    for_each_output_index(dims, out_strides, [&](std::int64_t i, std::int64_t o) {
      auto k = static_cast<std::size_t>(o);
      if (px[i] == T(0))
        ++zeros[k];
      else
        nonzero_product[k] *= static_cast<acc>(px[i]);
    });
    for_each_output_index(dims, out_strides, [&](std::int64_t i, std::int64_t o) {
      auto k = static_cast<std::size_t>(o);
      acc others = 0;
      if (zeros[k] == 0)
        others = nonzero_product[k] / static_cast<acc>(px[i]);
      else if (zeros[k] == 1 && px[i] == T(0))
        others = nonzero_product[k];
      pdx[i] = static_cast<T>(static_cast<acc>(pdy[o]) * others);
    });
  }

private:
  std::vector<std::int64_t> axes_;
};

} // namespace

void register_reduction_kernels(kernel_registry& registry) {
  add_typed_kernels<sum_kernel, float, double, std::int32_t, std::int64_t>(registry, "Sum");
  add_typed_kernels<mean_kernel, float, double>(registry, "Mean");
  add_typed_kernels<max_kernel, float, double, std::int32_t, std::int64_t>(registry, "Max");
  add_typed_kernels<min_kernel, float, double, std::int32_t, std::int64_t>(registry, "Min");
  add_typed_kernels<prod_kernel, float, double, std::int32_t, std::int64_t>(registry, "Prod");
  add_typed_kernels<prod_grad_kernel, float, double, std::int32_t, std::int64_t>(registry,
                                                                                 "ProdGrad");
}

} // namespace actorflow
