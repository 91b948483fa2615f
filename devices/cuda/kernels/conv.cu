// The convolution family on the GPU, with the CPU kernels' semantics, shapes and messages
// (devices/cpu/kernels/conv.cpp; graph/conv_ops.cpp defines the ops), NHWC, filters HWIO:
//   Conv2D(x, filter), Conv2DBackpropInput(x, filter, dy), Conv2DBackpropFilter(x, filter, dy)
//     on cuDNN, float32 only; built only with cuDNN (ACTORFLOW_HAVE_CUDNN);
//   MaxPool(x), MaxPoolGrad(x, y, dy), AvgPool(x), AvgPoolGrad(x, dy)
//     by direct kernels here, float32 and float64, in every CUDA build.
//
// Convolutions. cuDNN reads filters as KRSC (OHWI) next to NHWC data, never HWIO, so the filter
// is transposed into a temporary (and Conv2DBackpropFilter's result transposed back). cuDNN
// pads symmetrically; where TensorFlow's SAME puts an odd padding row (column) at the bottom
// (right), the input goes through a copy with one zero row (column) appended, and
// Conv2DBackpropInput computes into such a copy and crops it (devices/cuda/conv_plan.hpp).
// Algorithms: cuDNN's heuristic order (cudnnGet*Algorithm_v7), the first that cuDNN accepts and
// whose workspace the device allocator can give, remembered per kernel and shapes. The
// convolution descriptors ask for CUDNN_FMA_MATH: CUDNN_DEFAULT_MATH lets cuDNN use TF32 tensor
// cores on Ampere and later, which round inputs to 10 mantissa bits (the cuBLAS handle is kept
// off TF32 for the same reason, devices/cuda/cuda_device.cpp).
// float64: cuDNN lists double support, but whether any algorithm takes double NHWC with a KRSC
// filter could not be checked without a GPU; a registered kernel that then fails would fail
// graphs that the CPU would run, so float64 convolutions stay on the CPU (placement sees no GPU
// kernel). The code is a template: registering double is one line once a GPU has confirmed it.
//
// Pooling. cuDNN's pooling was not used: its max-pool backward does not promise TensorFlow's
// "first maximum of the window" on ties, and its "average excluding padding" cannot be told
// about the asymmetric SAME row that a padded copy would add. The kernels here run
// devices/cuda/conv_plan.hpp's per-element functions, which visit windows in the CPU kernels'
// order and so give the CPU's results bit for bit (tests/devices/cuda_conv_geometry.test.cpp
// checks that on the CPU): one thread per output for the forward passes, one thread per input
// element for the gradients, which gathers from every window covering it (deterministic, no
// atomics; a window's maximum is found again per covering element, cheap for the usual 2x2 and
// 3x3 windows).
#include "devices/cuda/conv_plan.hpp"
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"

#ifdef ACTORFLOW_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <algorithm>
#include <array>
#include <climits>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>

namespace actorflow::cuda {

namespace {

// --- pooling kernels -------------------------------------------------------------------------

/// MaxPool (Average false) or AvgPool: one thread per output element.
template <class T, bool Average>
__global__ void pool_forward(const T* x, T* y, conv_geometry g, std::int64_t c,
                             std::int64_t count, T lowest) {
  AF_GRID_STRIDE_LOOP(i, count) y[i] = pooled_element<Average>(x, g, c, i, lowest);
}

/// MaxPoolGrad (Average false) or AvgPoolGrad: one thread per input element.
template <class T, bool Average>
__global__ void pool_backward(const T* x, const T* dy, T* dx, conv_geometry g, std::int64_t c,
                              std::int64_t count) {
  AF_GRID_STRIDE_LOOP(i, count) dx[i] = pool_gradient_element<Average>(x, dy, g, c, i);
}

// --- pooling entry points --------------------------------------------------------------------

/// MaxPool / AvgPool (Grad false): x -> y; MaxPoolGrad (x, y, dy) / AvgPoolGrad (x, dy) -> dx.
template <class T, bool Average, bool Grad>
class pool_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    int inputs = !Grad ? 1 : Average ? 2 : 3;
    AF_RETURN_IF_ERROR(expect_inputs(ctx, inputs, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    auto g = make_pool_geometry(ctx.def(), x.shape());
    if (!g)
      return g.error();
    auto batch = x.shape().dim(0);
    auto c = x.shape().dim(3);
    tensor_shape out_shape{batch, g->out_h, g->out_w, c};
    if (!Grad) {
      tensor y = ctx.allocate_output(0, dtype_of<T>(), out_shape);
      auto count = y.num_elements();
      if (count == 0)
        return {};
      return launch_over(count, stream, pool_forward<T, Average>, x.data<T>(), y.data<T>(), *g, c,
          count, -std::numeric_limits<T>::infinity());
    }
    const tensor& grad = ctx.input(Average ? 1 : 2);
    if (grad.shape() != out_shape)
      return make_error(errc::invalid_argument, "the output gradient is " +
                                                  grad.shape().to_string() +
                                                  " but the pool's output is " +
                                                  out_shape.to_string());
    tensor dx = ctx.allocate_output(0, dtype_of<T>(), x.shape());
    auto count = dx.num_elements();
    if (count == 0)
      return {};
    return launch_over(count, stream, pool_backward<T, Average>, x.data<T>(), grad.data<T>(),
        dx.data<T>(), *g, c, count);
  }
};

template <class T>
using max_pool_kernel = pool_kernel<T, false, false>;
template <class T>
using max_pool_grad_kernel = pool_kernel<T, false, true>;
template <class T>
using avg_pool_kernel = pool_kernel<T, true, false>;
template <class T>
using avg_pool_grad_kernel = pool_kernel<T, true, true>;

#ifdef ACTORFLOW_HAVE_CUDNN

// --- layout kernels for cuDNN ----------------------------------------------------------------

/// out [cols, rows] = in [rows, cols] transposed: HWIO (as [kh*kw*in, out]) to OHWI and back.
template <class T>
__global__ void transpose(const T* in, T* out, std::int64_t rows, std::int64_t cols) {
  AF_GRID_STRIDE_LOOP(i, rows * cols) {
    auto r = i % rows;
    auto col = i / rows;
    out[i] = in[r * cols + col];
  }
}

/// padded [n, padded_h, padded_w, c] = x [n, h, w, c] with zero rows appended at the bottom and
/// zero columns at the right.
template <class T>
__global__ void pad_bottom_right(const T* x, T* padded, std::int64_t h, std::int64_t w,
                                 std::int64_t c, std::int64_t padded_h, std::int64_t padded_w,
                                 std::int64_t count) {
  AF_GRID_STRIDE_LOOP(i, count) {
    auto p = position_of(i, padded_h, padded_w, c);
    padded[i] = p.h < h && p.w < w ? x[((p.n * h + p.h) * w + p.w) * c + p.c] : T(0);
  }
}

/// x [n, h, w, c] = the top-left h x w of padded [n, padded_h, padded_w, c].
template <class T>
__global__ void crop_bottom_right(const T* padded, T* x, std::int64_t h, std::int64_t w,
                                  std::int64_t c, std::int64_t padded_h, std::int64_t padded_w,
                                  std::int64_t count) {
  AF_GRID_STRIDE_LOOP(i, count) {
    auto p = position_of(i, h, w, c);
    x[i] = padded[((p.n * padded_h + p.h) * padded_w + p.w) * c + p.c];
  }
}

template <class T>
status launch_transpose(const T* in, T* out, std::int64_t rows, std::int64_t cols,
                        cudaStream_t stream) {
  return launch_over(rows * cols, stream, transpose<T>, in, out, rows, cols);
}

// --- cuDNN descriptors -------------------------------------------------------------------------

template <class T>
constexpr cudnnDataType_t dnn_type() {
  return std::is_same_v<T, double> ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}

/// A cuDNN descriptor, destroyed with its owner whatever path the kernel leaves by.
template <class Handle, cudnnStatus_t (*Destroy)(Handle)>
class dnn_descriptor {
public:
  dnn_descriptor() = default;
  dnn_descriptor(const dnn_descriptor&) = delete;
  dnn_descriptor& operator=(const dnn_descriptor&) = delete;
  ~dnn_descriptor() {
    if (handle_ != nullptr)
      (void)Destroy(handle_);
  }

  Handle* out() { return &handle_; }
  Handle get() const { return handle_; }

private:
  Handle handle_ = nullptr;
};

using tensor_descriptor = dnn_descriptor<cudnnTensorDescriptor_t, &cudnnDestroyTensorDescriptor>;
using filter_descriptor = dnn_descriptor<cudnnFilterDescriptor_t, &cudnnDestroyFilterDescriptor>;
using convolution_descriptor =
  dnn_descriptor<cudnnConvolutionDescriptor_t, &cudnnDestroyConvolutionDescriptor>;

/// The descriptors of one convolution: x as cuDNN sees it (padded where needed), the OHWI
/// filter, dy / y, and the convolution itself.
struct conv_descriptors {
  tensor_descriptor x;
  filter_descriptor filter;
  tensor_descriptor y;
  convolution_descriptor conv;
};

/// An error when a size is beyond the int cuDNN takes.
status expect_int_range(const std::vector<std::int64_t>& sizes, const std::string& op) {
  for (auto s : sizes)
    if (s > INT_MAX)
      return make_error(errc::invalid_argument,
                        op + " size " + std::to_string(s) + " exceeds cuDNN's int range");
  return {};
}

template <class T>
status describe(conv_descriptors& d, const conv_sizes& s, const cudnn_padding& p) {
  auto i = [](std::int64_t v) { return static_cast<int>(v); };
  AF_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(d.x.out()));
  AF_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(d.x.get(), CUDNN_TENSOR_NHWC, dnn_type<T>(),
                                                      i(s.batch), i(s.channels), i(p.padded_h),
                                                      i(p.padded_w)));
  AF_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(d.filter.out()));
  AF_CUDNN_RETURN_IF_ERROR(cudnnSetFilter4dDescriptor(d.filter.get(), dnn_type<T>(),
                                                      CUDNN_TENSOR_NHWC, i(s.filters),
                                                      i(s.channels), i(s.g.k_h), i(s.g.k_w)));
  AF_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(d.y.out()));
  AF_CUDNN_RETURN_IF_ERROR(cudnnSetTensor4dDescriptor(d.y.get(), CUDNN_TENSOR_NHWC, dnn_type<T>(),
                                                      i(s.batch), i(s.filters), i(s.g.out_h),
                                                      i(s.g.out_w)));
  AF_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(d.conv.out()));
  // TensorFlow's Conv2D is a cross-correlation (the filter is not flipped).
  AF_CUDNN_RETURN_IF_ERROR(cudnnSetConvolution2dDescriptor(
    d.conv.get(), i(p.pad_h), i(p.pad_w), i(s.g.stride_h), i(s.g.stride_w), 1, 1,
    CUDNN_CROSS_CORRELATION, dnn_type<T>()));
  AF_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(d.conv.get(), CUDNN_FMA_MATH));
  return {};
}

// --- algorithms ------------------------------------------------------------------------------

/// The algorithms a heuristic found usable, best first; `fallback` (documented for every layout
/// and type) last if the heuristic left it out.
template <class Perf, class Algo>
std::vector<Algo> usable_algorithms(const Perf* perf, int returned, Algo fallback) {
  std::vector<Algo> algorithms;
  for (int i = 0; i < returned; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS)
      algorithms.push_back(perf[i].algo);
  if (std::find(algorithms.begin(), algorithms.end(), fallback) == algorithms.end())
    algorithms.push_back(fallback);
  return algorithms;
}

/// Runs the first of `candidates` that cuDNN accepts and whose workspace the device allocator
/// can give: workspace_bytes(algo, &bytes) asks its size, run(algo, workspace, bytes) enqueues
/// the convolution. Returns the algorithm that ran. The workspace is a float32 tensor (there is
/// no byte dtype) from the device's allocator, so its reuse is ordered on the compute stream
/// like every tensor's: it may be freed as soon as this returns.
template <class Algo, class Size, class Run>
result<Algo> run_first_supported(kernel_context& ctx, const std::vector<Algo>& candidates,
                                 Size workspace_bytes, Run run, const char* call) {
  for (auto algo : candidates) {
    std::size_t bytes = 0;
    if (workspace_bytes(algo, &bytes) != CUDNN_STATUS_SUCCESS)
      continue; // not for this configuration
    tensor workspace;
    if (bytes > 0) {
      try {
        workspace = tensor{dtype::float32,
                           tensor_shape{static_cast<std::int64_t>((bytes + 3) / 4)},
                           ctx.dev().device_allocator()};
      } catch (const std::bad_alloc&) {
        continue; // a later algorithm may need less
      }
    }
    const cudnnStatus_t code = run(algo, bytes > 0 ? workspace.raw_data() : nullptr, bytes);
    if (code == CUDNN_STATUS_SUCCESS)
      return algo;
    // Refused before anything was enqueued: the next candidate may do.
    if (code != CUDNN_STATUS_NOT_SUPPORTED)
      return call_failed(gpu_library::cudnn, static_cast<int>(code), call, __FILE__, __LINE__);
  }
  return make_error(errc::unimplemented, std::string{"cuDNN offers no algorithm that "} + call +
                                           " accepts for these shapes and dtype (tried " +
                                           std::to_string(candidates.size()) + ")");
}

/// Conv2D (forward), Conv2DBackpropInput (input), Conv2DBackpropFilter (filter).
enum class conv_pass { forward, input, filter };

/// What one convolution pass works on (device pointers): the input as cuDNN sees it, the OHWI
/// filter, dy or y; `out` is what the pass writes (y, the padded dx, or the OHWI dfilter).
struct conv_operands {
  const void* x = nullptr;
  const void* filter = nullptr;
  const void* dy = nullptr;
  void* out = nullptr;
};

/// Enqueues pass P with algorithm `remembered` if it is >= 0, else with the heuristic's order;
/// returns the algorithm that ran.
template <class T, conv_pass P>
result<int> run_pass(kernel_context& ctx, cudnnContext* handle, const conv_descriptors& d,
                     const conv_operands& o, int remembered) {
  const T one = 1;
  const T zero = 0;
  if constexpr (P == conv_pass::forward) {
    std::vector<cudnnConvolutionFwdAlgo_t> candidates;
    if (remembered >= 0) {
      candidates.push_back(static_cast<cudnnConvolutionFwdAlgo_t>(remembered));
    } else {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      AF_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(
        handle, d.x.get(), d.filter.get(), d.conv.get(), d.y.get(),
        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
      candidates = usable_algorithms(perf, returned, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    }
    auto ran = run_first_supported(
      ctx, candidates,
      [&](cudnnConvolutionFwdAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle, d.x.get(), d.filter.get(),
                                                       d.conv.get(), d.y.get(), algo, bytes);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, void* workspace, std::size_t bytes) {
        return cudnnConvolutionForward(handle, &one, d.x.get(), o.x, d.filter.get(), o.filter,
                                       d.conv.get(), algo, workspace, bytes, &zero, d.y.get(),
                                       o.out);
      },
      "cudnnConvolutionForward");
    if (!ran)
      return ran.error();
    return static_cast<int>(*ran);
  } else if constexpr (P == conv_pass::input) {
    std::vector<cudnnConvolutionBwdDataAlgo_t> candidates;
    if (remembered >= 0) {
      candidates.push_back(static_cast<cudnnConvolutionBwdDataAlgo_t>(remembered));
    } else {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int returned = 0;
      AF_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        handle, d.filter.get(), d.y.get(), d.conv.get(), d.x.get(),
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
      candidates = usable_algorithms(perf, returned, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
    }
    auto ran = run_first_supported(
      ctx, candidates,
      [&](cudnnConvolutionBwdDataAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d.filter.get(), d.y.get(),
                                                            d.conv.get(), d.x.get(), algo, bytes);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* workspace, std::size_t bytes) {
        return cudnnConvolutionBackwardData(handle, &one, d.filter.get(), o.filter, d.y.get(),
                                            o.dy, d.conv.get(), algo, workspace, bytes, &zero,
                                            d.x.get(), o.out);
      },
      "cudnnConvolutionBackwardData");
    if (!ran)
      return ran.error();
    return static_cast<int>(*ran);
  } else {
    std::vector<cudnnConvolutionBwdFilterAlgo_t> candidates;
    if (remembered >= 0) {
      candidates.push_back(static_cast<cudnnConvolutionBwdFilterAlgo_t>(remembered));
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int returned = 0;
      AF_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, d.x.get(), d.y.get(), d.conv.get(), d.filter.get(),
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf));
      candidates = usable_algorithms(perf, returned, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
    }
    auto ran = run_first_supported(
      ctx, candidates,
      [&](cudnnConvolutionBwdFilterAlgo_t algo, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, d.x.get(), d.y.get(), d.conv.get(), d.filter.get(), algo, bytes);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, void* workspace, std::size_t bytes) {
        return cudnnConvolutionBackwardFilter(handle, &one, d.x.get(), o.x, d.y.get(), o.dy,
                                              d.conv.get(), algo, workspace, bytes, &zero,
                                              d.filter.get(), o.out);
      },
      "cudnnConvolutionBackwardFilter");
    if (!ran)
      return ran.error();
    return static_cast<int>(*ran);
  }
}

// --- convolution entry points ----------------------------------------------------------------

template <class T, conv_pass P>
class conv_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

  bool is_expensive() const override { return true; }

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_inputs(ctx, P == conv_pass::forward ? 2 : 3, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    const tensor& filter = ctx.input(1);
    auto s = make_conv_sizes(ctx.def(), x.shape(), filter.shape());
    if (!s)
      return s.error();
    auto out_shape = s->output_shape();
    const tensor* dy = nullptr;
    if (P != conv_pass::forward) {
      dy = &ctx.input(2);
      if (dy->shape() != out_shape)
        return make_error(errc::invalid_argument,
                          "the output gradient is " + dy->shape().to_string() +
                            " but the convolution's output is " + out_shape.to_string());
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(),
                                     P == conv_pass::forward ? out_shape
                                     : P == conv_pass::input ? x.shape()
                                                             : filter.shape());
    if (s->empty()) {
      // Sums of nothing (cuDNN refuses zero dimensions).
      if (out.bytes() > 0)
        AF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out.raw_data(), 0, out.bytes(), stream));
      return {};
    }
    auto p = make_cudnn_padding(s->g);
    AF_RETURN_IF_ERROR(expect_int_range(
      {s->batch, s->channels, s->filters, p.padded_h, p.padded_w,
       s->batch * p.padded_h * p.padded_w * s->channels, out_shape.num_elements(),
       filter.num_elements()},
      ctx.def().op));

    auto* allocator = ctx.dev().device_allocator();
    auto rows = s->g.k_h * s->g.k_w * s->channels; // HWIO as a [rows, filters] matrix
    tensor filter_ohwi{dtype_of<T>(), tensor_shape{s->filters, rows}, allocator};
    if (P != conv_pass::filter)
      AF_RETURN_IF_ERROR(
        launch_transpose(filter.data<T>(), filter_ohwi.data<T>(), rows, s->filters, stream));
    // The input as cuDNN sees it: x itself, or its copy with the bottom/right padding.
    tensor padded;
    const T* x_seen = x.data<T>();
    tensor_shape padded_shape{s->batch, p.padded_h, p.padded_w, s->channels};
    if (p.needs_copy()) {
      padded = tensor{dtype_of<T>(), padded_shape, allocator};
      if (P != conv_pass::input) {
        auto count = padded.num_elements();
        AF_RETURN_IF_ERROR(launch_over(count, stream, pad_bottom_right<T>, x.data<T>(),
            padded.data<T>(), s->g.in_h, s->g.in_w, s->channels, p.padded_h, p.padded_w, count));
        x_seen = padded.data<T>();
      }
    }

    conv_operands o;
    o.x = x_seen;
    o.filter = filter_ohwi.data<T>();
    o.dy = dy != nullptr ? dy->data<T>() : nullptr;
    o.out = P == conv_pass::forward ? out.raw_data()
            : P == conv_pass::input ? (p.needs_copy() ? padded.raw_data() : out.raw_data())
                                    : filter_ohwi.raw_data();
    AF_RETURN_IF_ERROR(with_cudnn(ctx, [&](cudnnContext* handle) -> status {
      conv_descriptors d;
      AF_RETURN_IF_ERROR(describe<T>(d, *s, p));
      auto key = cache_key(x.shape(), filter.shape());
      auto known = remembered(key);
      auto ran = run_pass<T, P>(ctx, handle, d, o, known);
      // The remembered algorithm's workspace may not fit this time: let the others compete.
      if (!ran && known >= 0 && ran.error().code() == errc::unimplemented)
        ran = run_pass<T, P>(ctx, handle, d, o, -1);
      if (!ran)
        return ran.error();
      remember(key, *ran);
      return {};
    }));

    if (P == conv_pass::filter)
      return launch_transpose(filter_ohwi.data<T>(), out.data<T>(), s->filters, rows, stream);
    if (P == conv_pass::input && p.needs_copy()) {
      auto count = out.num_elements();
      AF_RETURN_IF_ERROR(launch_over(count, stream, crop_bottom_right<T>, padded.data<T>(),
          out.data<T>(), s->g.in_h, s->g.in_w, s->channels, p.padded_h, p.padded_w, count));
    }
    return {};
  }

private:
  /// The shapes an algorithm was chosen for: x's and the filter's dimensions.
  using shapes_key = std::array<std::int64_t, 8>;

  static shapes_key cache_key(const tensor_shape& x, const tensor_shape& filter) {
    shapes_key key{};
    for (int i = 0; i < 4; ++i) {
      key[static_cast<std::size_t>(i)] = x.dim(i);
      key[static_cast<std::size_t>(4 + i)] = filter.dim(i);
    }
    return key;
  }

  /// The algorithm that ran for `key` before; -1 if none did.
  int remembered(const shapes_key& key) {
    std::lock_guard<std::mutex> guard{mutex_};
    auto found = algorithms_.find(key);
    return found == algorithms_.end() ? -1 : found->second;
  }

  void remember(const shapes_key& key, int algorithm) {
    std::lock_guard<std::mutex> guard{mutex_};
    algorithms_[key] = algorithm;
  }

  /// Guards algorithms_: one kernel object may run for two steps at once.
  std::mutex mutex_;
  /// The algorithm that ran per shapes, so that the heuristic is asked once per shapes.
  std::map<shapes_key, int> algorithms_;
};

template <class T>
using conv2d_kernel = conv_kernel<T, conv_pass::forward>;
template <class T>
using conv2d_input_kernel = conv_kernel<T, conv_pass::input>;
template <class T>
using conv2d_filter_kernel = conv_kernel<T, conv_pass::filter>;

#endif // ACTORFLOW_HAVE_CUDNN

} // namespace

void register_conv_kernels(kernel_registry& registry) {
  add_gpu_kernels<max_pool_kernel, float, double>(registry, "MaxPool");
  add_gpu_kernels<max_pool_grad_kernel, float, double>(registry, "MaxPoolGrad");
  add_gpu_kernels<avg_pool_kernel, float, double>(registry, "AvgPool");
  add_gpu_kernels<avg_pool_grad_kernel, float, double>(registry, "AvgPoolGrad");
#ifdef ACTORFLOW_HAVE_CUDNN
  // float32 only: see the top of this file for float64.
  add_gpu_kernels<conv2d_kernel, float>(registry, "Conv2D");
  add_gpu_kernels<conv2d_input_kernel, float>(registry, "Conv2DBackpropInput");
  add_gpu_kernels<conv2d_filter_kernel, float>(registry, "Conv2DBackpropFilter");
#endif
}

} // namespace actorflow::cuda
