// Conv2D and its gradients: float32 on oneDNN's primitives (devices/cpu/onednn_conv.hpp, 2-5x
// faster here), float64 and what oneDNN declines by im2col + GEMM on the BLAS; MaxPool and
// AvgPool and their gradients by direct loops; float32 and float64, NHWC (graph/conv_ops.cpp
// has the op definitions, graph/conv_geometry.hpp the window arithmetic all of them share).
// im2col unrolls each output position's window into a row of kh*kw*in values (zeros where the
// window hangs over the padding), so that the convolution of a batch chunk is one GEMM with the
// filter seen as a [kh*kw*in, out] matrix, which HWIO already is in memory.
#include "devices/cpu/kernels/blas.hpp"
#include "devices/cpu/kernels/im2col.hpp"
#include "devices/cpu/onednn_conv.hpp"
#include "devices/cpu/kernels/kernel_util.hpp"
#include "graph/conv_geometry.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

namespace actorflow {

namespace {

using namespace cpu;

/// Rows of the unrolled matrix per chunk: bounds the scratch to about 64 MiB of float32.
constexpr std::int64_t max_chunk_elements = std::int64_t{16} << 20;

/// Images per chunk so that the unrolled matrix stays within max_chunk_elements.
std::int64_t images_per_chunk(const conv_sizes& s) {
  auto per_image = std::max<std::int64_t>(1, s.positions() * s.row());
  return std::max<std::int64_t>(1, max_chunk_elements / per_image);
}

/// The window columns [begin, end) of output column `ow` that fall inside the input: a window
/// row inside the input is one contiguous run of (end - begin) * channels values in NHWC.
std::pair<std::int64_t, std::int64_t> columns_inside(const conv_geometry& g, std::int64_t ow) {
  auto iw0 = ow * g.stride_w - g.pad_left;
  return {std::max<std::int64_t>(0, -iw0), std::min(g.k_w, g.in_w - iw0)};
}

/// Unrolls images [first, first + count) of x into col [count * positions, row].
template <class T>
void im2col(const conv_sizes& s, const T* x, std::int64_t first, std::int64_t count, T* col) {
  auto& g = s.g;
  auto c = s.channels;
  for (std::int64_t i = 0; i < count; ++i) {
    const T* image = x + (first + i) * g.in_h * g.in_w * c;
    for (std::int64_t oh = 0; oh < g.out_h; ++oh)
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        T* row = col + ((i * g.out_h + oh) * g.out_w + ow) * s.row();
        auto [kw_begin, kw_end] = columns_inside(g, ow);
        auto iw0 = ow * g.stride_w - g.pad_left;
        for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
          auto ih = oh * g.stride_h - g.pad_top + kh;
          T* dst = row + kh * g.k_w * c;
          if (ih < 0 || ih >= g.in_h || kw_begin >= kw_end) {
            std::fill(dst, dst + g.k_w * c, T{0});
            continue;
          }
          std::fill(dst, dst + kw_begin * c, T{0});
          std::copy(image + (ih * g.in_w + iw0 + kw_begin) * c,
                    image + (ih * g.in_w + iw0 + kw_end) * c, dst + kw_begin * c);
          std::fill(dst + kw_end * c, dst + g.k_w * c, T{0});
        }
      }
  }
}

/// The reverse: adds col's rows back into images [first, first + count) of dx.
template <class T>
void col2im(const conv_sizes& s, const T* col, std::int64_t first, std::int64_t count, T* dx) {
  auto& g = s.g;
  auto c = s.channels;
  for (std::int64_t i = 0; i < count; ++i) {
    T* image = dx + (first + i) * g.in_h * g.in_w * c;
    for (std::int64_t oh = 0; oh < g.out_h; ++oh)
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        const T* row = col + ((i * g.out_h + oh) * g.out_w + ow) * s.row();
        auto [kw_begin, kw_end] = columns_inside(g, ow);
        auto iw0 = ow * g.stride_w - g.pad_left;
        for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
          auto ih = oh * g.stride_h - g.pad_top + kh;
          if (ih < 0 || ih >= g.in_h)
            continue;
          const T* src = row + (kh * g.k_w + kw_begin) * c;
          T* dst = image + (ih * g.in_w + iw0 + kw_begin) * c;
          for (std::int64_t k = 0, n = (kw_end - kw_begin) * c; k < n; ++k)
            dst[k] += src[k];
        }
      }
  }
}

/// Conv2D (pass forward), Conv2DBackpropInput (input), Conv2DBackpropFilter (filter).
enum class conv_pass { forward, input, filter };

constexpr onednn_conv_pass onednn_pass(conv_pass pass) {
  return pass == conv_pass::forward ? onednn_conv_pass::forward
         : pass == conv_pass::input ? onednn_conv_pass::input
                                    : onednn_conv_pass::filter;
}

template <class T, conv_pass Pass>
class conv_kernel : public op_kernel {
public:
  bool is_expensive() const override { return true; }
  explicit conv_kernel(const node& n)
    : op_kernel(n), bf16_(std::is_same_v<T, float> && onednn_bf16_wanted(n)) {}

  void compute(kernel_context& ctx) override {
    int inputs = Pass == conv_pass::forward ? 2 : 3;
    if (!check_inputs(ctx, inputs, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    const tensor& filter = ctx.input(1);
    auto s = make_conv_sizes(ctx.def(), x.shape(), filter.shape());
    if (!s) {
      ctx.fail(s.error());
      return;
    }
    auto out_shape = s->output_shape();
    const T* dy = nullptr;
    if (Pass != conv_pass::forward) {
      const tensor& grad = ctx.input(2);
      if (grad.shape() != out_shape) {
        ctx.fail(make_error(errc::invalid_argument,
                            "the output gradient is " + grad.shape().to_string() +
                              " but the convolution's output is " + out_shape.to_string()));
        return;
      }
      dy = grad.data<T>();
    }
    tensor out = ctx.allocate_output(0, dtype_of<T>(),
                                     Pass == conv_pass::forward  ? out_shape
                                     : Pass == conv_pass::input ? x.shape()
                                                                : filter.shape());
    if (Pass != conv_pass::forward)
      view(out.data<T>(), out.num_elements()).setZero();
    if (s->batch == 0 || s->positions() == 0 || s->filters == 0 || s->row() == 0)
      return;
    if constexpr (std::is_same_v<T, float>)
      if (use_onednn_ && onednn_convolution(onednn_pass(Pass), *s, x.data<T>(), filter.data<T>(),
                                            dy, out.data<T>(), bf16_))
        return; // else (declined: refused, or slower there) im2col + GEMM below
    auto chunk = images_per_chunk(*s);
    // Reused across steps by this thread: a fresh buffer per call would be mapped and faulted
    // in from scratch every time.
    thread_local std::vector<T> col;
    col.resize(static_cast<std::size_t>(std::min(chunk, s->batch) * s->positions() * s->row()));
    auto per_image_out = s->positions() * s->filters;
    for (std::int64_t first = 0; first < s->batch; first += chunk) {
      auto count = std::min(chunk, s->batch - first);
      auto rows = count * s->positions();
      if (Pass == conv_pass::forward) {
        // out[rows, filters] = col[rows, row] * filter[row, filters]
        im2col(*s, x.data<T>(), first, count, col.data());
        gemm(false, false, rows, s->filters, s->row(), T{1}, col.data(), s->row(),
             filter.data<T>(), s->filters, T{0}, out.data<T>() + first * per_image_out, s->filters);
      } else if (Pass == conv_pass::filter) {
        // dfilter[row, filters] += col^T[row, rows] * dy[rows, filters]
        im2col(*s, x.data<T>(), first, count, col.data());
        gemm(true, false, s->row(), s->filters, rows, T{1}, col.data(), s->row(),
             dy + first * per_image_out, s->filters, T{1}, out.data<T>(), s->filters);
      } else {
        // dcol[rows, row] = dy[rows, filters] * filter^T[filters, row], folded back into dx
        gemm(false, true, rows, s->row(), s->filters, T{1}, dy + first * per_image_out,
             s->filters, filter.data<T>(), s->filters, T{0}, col.data(), s->row());
        col2im(*s, col.data(), first, count, out.data<T>());
      }
    }
  }

private:
  /// Decided when the kernel is made (ACTORFLOW_CPU_CONV=gemm keeps im2col + GEMM).
  bool use_onednn_ = std::is_same_v<T, float> && onednn_conv_wanted();
  /// Mixed precision (graph/mixed_precision.hpp): bf16 operands on oneDNN, float32 results.
  bool bf16_;
};

template <class T>
using conv2d_kernel = conv_kernel<T, conv_pass::forward>;
template <class T>
using conv2d_input_kernel = conv_kernel<T, conv_pass::input>;
template <class T>
using conv2d_filter_kernel = conv_kernel<T, conv_pass::filter>;

// --- pooling -------------------------------------------------------------------------------


/// Calls visit(image, oh, ow, ih_begin, ih_end, iw_begin, iw_end) for every output position:
/// the window's rows and columns inside the input.
template <class Visit>
void for_each_window(const conv_geometry& g, std::int64_t batch, Visit&& visit) {
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
      auto h0 = oh * g.stride_h - g.pad_top;
      auto h_begin = std::max<std::int64_t>(h0, 0);
      auto h_end = std::min(h0 + g.k_h, g.in_h);
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        auto w0 = ow * g.stride_w - g.pad_left;
        visit(n, oh, ow, h_begin, h_end, std::max<std::int64_t>(w0, 0),
              std::min(w0 + g.k_w, g.in_w));
      }
    }
}

enum class pool_kind { max, average };

/// MaxPool / AvgPool (Grad false): x -> y; MaxPoolGrad (x, y, dy) / AvgPoolGrad (x, dy) -> dx.
template <class T, pool_kind Kind, bool Grad>
class pool_kernel : public op_kernel {
public:
  using op_kernel::op_kernel;

  void compute(kernel_context& ctx) override {
    int inputs = !Grad ? 1 : Kind == pool_kind::max ? 3 : 2;
    if (!check_inputs(ctx, inputs, dtype_of<T>()))
      return;
    const tensor& x = ctx.input(0);
    auto g = make_pool_geometry(ctx.def(), x.shape());
    if (!g) {
      ctx.fail(g.error());
      return;
    }
    auto batch = x.shape().dim(0);
    auto c = x.shape().dim(3);
    tensor_shape out_shape{batch, g->out_h, g->out_w, c};
    const T* in = x.data<T>();
    if (!Grad) {
      tensor y = ctx.allocate_output(0, dtype_of<T>(), out_shape);
      T* out = y.data<T>();
      for_each_window(*g, batch, [&](auto n, auto oh, auto ow, auto h0, auto h1, auto w0, auto w1) {
        T* o = out + ((n * g->out_h + oh) * g->out_w + ow) * c;
        std::fill(o, o + c, Kind == pool_kind::max ? -std::numeric_limits<T>::infinity() : T{0});
        for (auto ih = h0; ih < h1; ++ih)
          for (auto iw = w0; iw < w1; ++iw) {
            const T* v = in + ((n * g->in_h + ih) * g->in_w + iw) * c;
            for (std::int64_t k = 0; k < c; ++k)
              o[k] = Kind == pool_kind::max ? std::max(o[k], v[k]) : o[k] + v[k];
          }
        if (Kind == pool_kind::average) {
          auto count = static_cast<T>((h1 - h0) * (w1 - w0));
          for (std::int64_t k = 0; k < c; ++k)
            o[k] /= count;
        }
      });
      return;
    }
    const tensor& grad = ctx.input(Kind == pool_kind::max ? 2 : 1);
    if (grad.shape() != out_shape) {
      ctx.fail(make_error(errc::invalid_argument, "the output gradient is " +
                                                    grad.shape().to_string() +
                                                    " but the pool's output is " +
                                                    out_shape.to_string()));
      return;
    }
    tensor dx = ctx.allocate_output(0, dtype_of<T>(), x.shape());
    T* out = dx.data<T>();
    view(out, dx.num_elements()).setZero();
    const T* dy = grad.data<T>();
    std::vector<std::int64_t> best(static_cast<std::size_t>(c));
    std::vector<T> best_value(static_cast<std::size_t>(c));
    for_each_window(*g, batch, [&](auto n, auto oh, auto ow, auto h0, auto h1, auto w0, auto w1) {
      const T* d = dy + ((n * g->out_h + oh) * g->out_w + ow) * c;
      if (Kind == pool_kind::average) {
        auto count = static_cast<T>((h1 - h0) * (w1 - w0));
        for (auto ih = h0; ih < h1; ++ih)
          for (auto iw = w0; iw < w1; ++iw) {
            T* o = out + ((n * g->in_h + ih) * g->in_w + iw) * c;
            for (std::int64_t k = 0; k < c; ++k)
              o[k] += d[k] / count;
          }
        return;
      }
      // The gradient goes to the window's first maximum of each channel (TensorFlow's choice).
      if (h0 >= h1 || w0 >= w1)
        return;
      auto first = ((n * g->in_h + h0) * g->in_w + w0) * c;
      for (std::int64_t k = 0; k < c; ++k) {
        best[static_cast<std::size_t>(k)] = first + k;
        best_value[static_cast<std::size_t>(k)] = in[first + k];
      }
      for (auto ih = h0; ih < h1; ++ih)
        for (auto iw = w0; iw < w1; ++iw) {
          auto at = ((n * g->in_h + ih) * g->in_w + iw) * c;
          for (std::int64_t k = 0; k < c; ++k)
            if (in[at + k] > best_value[static_cast<std::size_t>(k)]) {
              best_value[static_cast<std::size_t>(k)] = in[at + k];
              best[static_cast<std::size_t>(k)] = at + k;
            }
        }
      for (std::int64_t k = 0; k < c; ++k)
        out[best[static_cast<std::size_t>(k)]] += d[k];
    });
  }
};

template <class T>
using max_pool_kernel = pool_kernel<T, pool_kind::max, false>;
template <class T>
using max_pool_grad_kernel = pool_kernel<T, pool_kind::max, true>;
template <class T>
using avg_pool_kernel = pool_kernel<T, pool_kind::average, false>;
template <class T>
using avg_pool_grad_kernel = pool_kernel<T, pool_kind::average, true>;

} // namespace

// Exposed for fused_conv.cpp (devices/cpu/kernels/im2col.hpp).
template <class T>
void cpu::unroll_windows(const conv_sizes& s, const T* x, std::int64_t first, std::int64_t count,
                         T* col) {
  im2col(s, x, first, count, col);
}
template void cpu::unroll_windows<float>(const conv_sizes&, const float*, std::int64_t,
                                         std::int64_t, float*);
template void cpu::unroll_windows<double>(const conv_sizes&, const double*, std::int64_t,
                                          std::int64_t, double*);
std::int64_t cpu::conv_images_per_chunk(const conv_sizes& s) { return images_per_chunk(s); }

void register_conv_kernels(kernel_registry& registry) {
  add_typed_kernels<conv2d_kernel, float, double>(registry, "Conv2D");
  add_typed_kernels<conv2d_input_kernel, float, double>(registry, "Conv2DBackpropInput");
  add_typed_kernels<conv2d_filter_kernel, float, double>(registry, "Conv2DBackpropFilter");
  add_typed_kernels<max_pool_kernel, float, double>(registry, "MaxPool");
  add_typed_kernels<max_pool_grad_kernel, float, double>(registry, "MaxPoolGrad");
  add_typed_kernels<avg_pool_kernel, float, double>(registry, "AvgPool");
  add_typed_kernels<avg_pool_grad_kernel, float, double>(registry, "AvgPoolGrad");
}

} // namespace actorflow
