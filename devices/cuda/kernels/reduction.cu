// Reductions on the GPU, with the CPU kernels' semantics, dtypes and messages
// (devices/cpu/kernels/reduction.cpp, argmax.cpp, gradient_kernels.cpp):
//   Sum, Max, Min, Prod (float32, float64, int32, int64), Mean (float32, float64) over attr
//   "axes" (empty: all; negative from the end), attr "keep_dims"; SumToShapeOf (the gradient
//   of a broadcast);
//   ArgMax and ArgMin over attr "axis" (int64 output, the first index wins ties).
//   Cumsum along attr "axis" (exclusive, reverse), a thread per line.
// float32 sums accumulate in float64, as on the CPU: the kernels are memory-bound, so the wider
// adds cost nothing measurable, and results stay as close to the CPU's as the order of the
// additions allows. Any set of axes goes through one plan (devices/cuda/reduction_plan.hpp):
// one thread per output where outputs are many and neighbours read neighbouring memory (or
// each combines few elements), else a block per output, split into chunks across blocks (and
// combined by a second pass) when there are too few outputs to fill the card.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"
#include "devices/cuda/reduction_plan.hpp"
#include "devices/reducers.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace actorflow::cuda {

namespace {

struct sum_reducer : sum_traits {
  template <class A>
  __device__ static A combine(A a, A b) { return a + b; }
};

struct max_reducer : max_traits {
  // The CPU's comparison, so that NaN handling agrees where the order of visits does.
  template <class A>
  __device__ static A combine(A a, A b) { return a < b ? b : a; }
};

struct min_reducer : min_traits {
  template <class A>
  __device__ static A combine(A a, A b) { return b < a ? b : a; }
};

struct prod_reducer : prod_traits {
  template <class A>
  __device__ static A combine(A a, A b) { return a * b; }
};

/// What turns an accumulator into an output element: Mean scales, the others only convert.
template <class T>
struct finish {
  bool scale_it;
  T scale;
  template <class A>
  __device__ T operator()(A acc) const {
    T value = static_cast<T>(acc);
    return scale_it ? value * scale : value;
  }
};

/// The offset of an output's `r`-th element: one multiply for the common single reduced group.
__device__ inline std::int64_t element_offset(const reduction_plan& p, std::int64_t r) {
  return p.reduced_rank <= 1 ? r * p.reduced_strides[0] : reduced_offset(p, r);
}

/// One thread per output: coalesced where the innermost dimension is kept.
template <class T, class A, class R>
__global__ void reduce_per_thread(const T* x, T* out, reduction_plan p, A identity, finish<T> f) {
  AF_GRID_STRIDE_LOOP(o, p.out_count) {
    const T* base = x + output_base(p, o);
    A acc = identity;
    for (std::int64_t r = 0; r < p.reduced_count; ++r)
      acc = R::combine(acc, static_cast<A>(base[element_offset(p, r)]));
    out[o] = f(acc);
  }
}

constexpr int reduce_block = 256;

/// Block (o, c) combines chunk c ([c * chunk, (c + 1) * chunk)) of output o's elements; with one
/// chunk it writes the output, else partial[o * chunks + c].
template <class T, class A, class R>
__global__ void reduce_per_block(const T* x, T* out, A* partial, reduction_plan p, A identity,
                                 finish<T> f, std::int64_t chunk) {
  __shared__ A shared[reduce_block];
  auto chunks = static_cast<std::int64_t>(gridDim.y);
  auto begin = static_cast<std::int64_t>(blockIdx.y) * chunk;
  auto end = min(p.reduced_count, begin + chunk);
  for (std::int64_t o = blockIdx.x; o < p.out_count; o += gridDim.x) {
    const T* base = x + output_base(p, o);
    A acc = identity;
    for (auto r = begin + threadIdx.x; r < end; r += blockDim.x)
      acc = R::combine(acc, static_cast<A>(base[element_offset(p, r)]));
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int width = reduce_block / 2; width > 0; width /= 2) {
      if (static_cast<int>(threadIdx.x) < width)
        shared[threadIdx.x] = R::combine(shared[threadIdx.x], shared[threadIdx.x + width]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (chunks == 1)
        out[o] = f(shared[0]);
      else
        partial[o * chunks + blockIdx.y] = shared[0];
    }
    // shared[] is reused by the next output of this block.
    __syncthreads();
  }
}

/// Second pass of a chunked reduction: one thread per output over its chunks' partials.
template <class T, class A, class R>
__global__ void combine_partials(const A* partial, T* out, std::int64_t outputs,
                                 std::int64_t chunks, A identity, finish<T> f) {
  AF_GRID_STRIDE_LOOP(o, outputs) {
    A acc = identity;
    for (std::int64_t c = 0; c < chunks; ++c)
      acc = R::combine(acc, partial[o * chunks + c]);
    out[o] = f(acc);
  }
}

/// Reduces x by plan `p` into out (p.out_count elements, > 0). Scratch for partials comes from
/// ctx's device allocator; it may be freed as soon as this returns, since everything that could
/// reuse its memory is ordered after these kernels on the stream.
template <class T, class R>
status launch_reduction(kernel_context& ctx, cudaStream_t stream, const T* x, T* out,
                        const reduction_plan& p, finish<T> f) {
  using A = typename R::template accumulator<T>;
  const A identity = R::template identity<A>();
  // Enough outputs to fill the card with threads, or too few elements each for a block.
  constexpr std::int64_t outputs_for_threads = 4096;
  constexpr std::int64_t elements_for_block = 16;
  if (p.reduced_count <= elements_for_block ||
      (p.inner_kept && p.out_count >= outputs_for_threads)) {
    return launch_over(p.out_count, stream, reduce_per_thread<T, A, R>, x, out, p, identity, f);
  }
  // About 2048 blocks in all, each over at least reduce_block * 4 elements, at most 1024 chunks.
  constexpr std::int64_t target_blocks = 2048;
  auto chunks = std::min<std::int64_t>(
    {1024, std::max<std::int64_t>(1, target_blocks / p.out_count),
     std::max<std::int64_t>(1, p.reduced_count / (reduce_block * 4))});
  auto chunk = (p.reduced_count + chunks - 1) / chunks;
  chunks = (p.reduced_count + chunk - 1) / chunk;
  dim3 grid{static_cast<unsigned int>(std::min<std::int64_t>(p.out_count, 1 << 16)),
            static_cast<unsigned int>(chunks)};
  tensor scratch;
  A* partial = nullptr;
  if (chunks > 1) {
    scratch = tensor{dtype_of<A>(), tensor_shape{p.out_count * chunks}, ctx.dev().device_allocator()};
    partial = scratch.data<A>();
  }
  reduce_per_block<T, A, R><<<grid, reduce_block, 0, stream>>>(x, out, partial, p, identity, f,
                                                               chunk);
  AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  if (chunks > 1) {
    AF_RETURN_IF_ERROR(launch_over(p.out_count, stream, combine_partials<T, A, R>, partial, out,
        p.out_count, chunks, identity, f));
  }
  return {};
}

/// Which dimensions of a rank-`rank` tensor `axes` names (all for none); the CPU's message
/// for an axis out of range.
result<std::vector<bool>> reduced_dimensions(const std::vector<std::int64_t>& axes, int rank) {
  std::vector<bool> reduced(static_cast<std::size_t>(rank), axes.empty());
  for (auto axis : axes) {
    if (axis < -rank || axis >= rank)
      return make_error(errc::invalid_argument, "Invalid reduction dimension " +
                                                  std::to_string(axis) +
                                                  " is out of range for a tensor of rank " +
                                                  std::to_string(rank));
    reduced[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)] = true;
  }
  return reduced;
}

// --- Sum, Mean, Max ------------------------------------------------------------------------

template <class T, class R, bool mean>
class reduction_kernel final : public cuda_kernel {
public:
  explicit reduction_kernel(const node& n)
    : cuda_kernel(n), axes_(n.attr_or<std::vector<std::int64_t>>("axes", {})),
      keep_dims_(n.attr_or<bool>("keep_dims", false)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    const auto& shape = x.shape();
    auto reduced = reduced_dimensions(axes_, shape.rank());
    if (!reduced)
      return reduced.error();
    std::vector<std::int64_t> out_dims;
    for (int i = 0; i < shape.rank(); ++i) {
      if (!(*reduced)[static_cast<std::size_t>(i)])
        out_dims.push_back(shape.dim(i));
      else if (keep_dims_)
        out_dims.push_back(1);
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{out_dims});
    if (out.num_elements() == 0)
      return {};
    auto plan = make_reduction_plan(shape, *reduced);
    if (!plan)
      return plan.error();
    finish<T> f{false, T(1)};
    if constexpr (mean) {
      // Each output summarises x.num_elements() / out.num_elements() elements; none: NaN.
      auto per_output = x.num_elements() / out.num_elements();
      f = {true, per_output == 0 ? std::numeric_limits<T>::quiet_NaN() : T(1) / T(per_output)};
    }
    return launch_reduction<T, R>(ctx, stream, x.data<T>(), out.data<T>(), *plan, f);
  }

private:
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

// --- SumToShapeOf --------------------------------------------------------------------------

/// Sums `grad` (shape G) down to the shape X of input 1 (broadcastable to G; read for its shape
/// only): numpy broadcasting run backwards.
template <class T>
class sum_to_shape_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    if (ctx.num_inputs() < 2)
      return make_error(errc::invalid_argument, ctx.def().op + " expects 2 inputs");
    const tensor& grad = ctx.input(0);
    const tensor_shape& g = grad.shape();
    const tensor_shape& x = ctx.input(1).shape();
    if (g == x) {
      ctx.set_output(0, grad);
      return {};
    }
    auto mismatch = make_error(errc::invalid_argument, ctx.def().op + ": cannot sum a gradient of shape " +
                                                         g.to_string() + " down to shape " +
                                                         x.to_string());
    if (x.rank() > g.rank())
      return mismatch;
    auto lead = g.rank() - x.rank();
    std::vector<bool> reduced(static_cast<std::size_t>(g.rank()), false);
    for (int i = 0; i < g.rank(); ++i) {
      auto gd = g.dim(i);
      auto xd = i < lead ? 1 : x.dim(i - lead);
      if (xd != gd && xd != 1)
        return mismatch;
      reduced[static_cast<std::size_t>(i)] = xd != gd || i < lead;
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(), x);
    if (out.num_elements() == 0)
      return {};
    auto plan = make_reduction_plan(g, reduced);
    if (!plan)
      return plan.error();
    return launch_reduction<T, sum_reducer>(ctx, stream, grad.data<T>(), out.data<T>(), *plan,
                                            finish<T>{false, T(1)});
  }
};

// --- Cumsum --------------------------------------------------------------------------------

/// One thread per (outer, inner) line, summing along the axis in order (exclusive: each element
/// left out of its own sum; reverse: from the end), as the CPU kernel.
template <class T>
__global__ void cumsum_body(const T* x, T* out, std::int64_t lines, std::int64_t len,
                            std::int64_t inner, bool exclusive, bool reverse) {
  AF_GRID_STRIDE_LOOP(line, lines) {
    auto base = (line / inner) * len * inner + line % inner;
    T sum = 0;
    for (std::int64_t k = 0; k < len; ++k) {
      auto at = base + (reverse ? len - 1 - k : k) * inner;
      auto v = x[at];
      if (exclusive) {
        out[at] = sum;
        sum += v;
      } else {
        sum += v;
        out[at] = sum;
      }
    }
  }
}

template <class T>
class cumsum_kernel final : public cuda_kernel {
public:
  explicit cumsum_kernel(const node& n)
    : cuda_kernel(n), axis_(n.attr_or<std::int64_t>("axis", 0)),
      exclusive_(n.attr_or<bool>("exclusive", false)), reverse_(n.attr_or<bool>("reverse", false)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    const auto& shape = x.shape();
    auto rank = shape.rank();
    if (axis_ < -rank || axis_ >= rank)
      return make_error(errc::invalid_argument, "Cumsum axis " + std::to_string(axis_) +
                                                  " is out of range for a tensor of rank " +
                                                  std::to_string(rank));
    tensor out = ctx.allocate_output(0, dtype_of<T>(), shape);
    if (out.num_elements() == 0)
      return {};
    auto axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    auto len = shape.dim(axis);
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < rank; ++i) {
      if (i < axis)
        outer *= shape.dim(i);
      else if (i > axis)
        inner *= shape.dim(i);
    }
    return launch_over(outer * inner, stream, cumsum_body<T>, x.data<T>(), out.data<T>(),
                       outer * inner, len, inner, exclusive_, reverse_);
  }

private:
  std::int64_t axis_;
  bool exclusive_, reverse_;
};

// --- ArgMax --------------------------------------------------------------------------------

/// One thread per (outer, inner) position, walking the axis; strict '>' ('<' for ArgMin)
/// keeps the first of equal extremes, and a NaN never wins, as on the CPU.
template <class T, bool Smallest>
__global__ void argmax_body(const T* x, std::int64_t* out, std::int64_t outer, std::int64_t len,
                            std::int64_t inner) {
  AF_GRID_STRIDE_LOOP(i, outer * inner) {
    auto o = i / inner;
    auto j = i % inner;
    const T* slice = x + o * len * inner + j;
    std::int64_t best = 0;
    for (std::int64_t k = 1; k < len; ++k)
      if (Smallest ? slice[k * inner] < slice[best * inner] : slice[k * inner] > slice[best * inner])
        best = k;
    out[i] = best;
  }
}

template <class T, bool Smallest>
status launch_argmax(cudaStream_t stream, const T* x, std::int64_t* out, std::int64_t outer,
                     std::int64_t len, std::int64_t inner) {
  return launch_over(outer * inner, stream, argmax_body<T, Smallest>, x, out, outer, len, inner);
}

/// ArgMax, or ArgMin when `Smallest`.
template <class T, bool Smallest>
class arg_extremum_kernel final : public cuda_kernel {
public:
  explicit arg_extremum_kernel(const node& n)
    : cuda_kernel(n), axis_(n.attr_or<std::int64_t>("axis", 0)) {}

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    const auto& shape = x.shape();
    auto rank = shape.rank();
    if (axis_ < -rank || axis_ >= rank)
      return make_error(errc::invalid_argument,
                        op() + " axis " + std::to_string(axis_) +
                          " is out of range for a tensor of rank " + std::to_string(rank));
    auto axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    auto len = shape.dim(axis);
    std::int64_t outer = 1;
    std::int64_t inner = 1;
    std::vector<std::int64_t> out_dims;
    for (int i = 0; i < rank; ++i) {
      if (i < axis)
        outer *= shape.dim(i);
      else if (i > axis)
        inner *= shape.dim(i);
      if (i != axis)
        out_dims.push_back(shape.dim(i));
    }
    if (len == 0 && outer * inner > 0)
      return make_error(errc::invalid_argument, op() + " over an empty axis " +
                                                  std::to_string(axis) + " of shape " +
                                                  shape.to_string());
    tensor out = ctx.allocate_output(0, dtype::int64, tensor_shape{out_dims});
    if (out.num_elements() == 0)
      return {};
    return launch_argmax<T, Smallest>(stream, x.data<T>(), out.data<std::int64_t>(), outer, len, inner);
  }

private:
  std::int64_t axis_;
};

template <class T>
using argmax_kernel = arg_extremum_kernel<T, false>;
template <class T>
using argmin_kernel = arg_extremum_kernel<T, true>;

} // namespace

void register_reduction_kernels(kernel_registry& registry) {
  using std::int32_t;
  using std::int64_t;
  add_gpu_kernels<sum_kernel, float, double, int32_t, int64_t>(registry, "Sum");
  add_gpu_kernels<mean_kernel, float, double>(registry, "Mean");
  add_gpu_kernels<max_kernel, float, double, int32_t, int64_t>(registry, "Max");
  add_gpu_kernels<min_kernel, float, double, int32_t, int64_t>(registry, "Min");
  add_gpu_kernels<prod_kernel, float, double, int32_t, int64_t>(registry, "Prod");
  add_gpu_kernels<sum_to_shape_kernel, float, double, int32_t, int64_t>(registry, "SumToShapeOf");
  add_gpu_kernels<argmax_kernel, float, double, int32_t, int64_t>(registry, "ArgMax");
  add_gpu_kernels<argmin_kernel, float, double, int32_t, int64_t>(registry, "ArgMin");
  add_gpu_kernels<cumsum_kernel, float, double, int32_t, int64_t>(registry, "Cumsum");
}

} // namespace actorflow::cuda
