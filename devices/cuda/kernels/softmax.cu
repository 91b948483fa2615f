// Softmax over the last axis and SoftmaxCrossEntropyWithLogits on the GPU (float32, float64),
// with the CPU kernels' arithmetic and messages (devices/cpu/kernels/softmax.cpp,
// softmax_cross_entropy.cpp): every row is shifted by its maximum so exp never overflows.
// One block per row, block-wide reductions in shared memory. A plain kernel rather than
// cudnnSoftmaxForward: the cross entropy needs its own kernel anyway, and this keeps both ops
// working in builds without cuDNN.
#include "devices/cuda/cuda_kernel_util.hpp"
#include "devices/cuda/kernels/cuda_kernels.hpp"
#include "devices/cuda/kernels/device_math.cuh"

#include <algorithm>
#include <limits>

namespace actorflow::cuda {

namespace {

/// Threads per row at most; a power of two (the reductions halve it).
constexpr int max_row_block = 256;

/// Threads for rows of `cols` elements: the smallest power of two from 32 that covers a row, at
/// most max_row_block.
int row_block(std::int64_t cols) {
  int block = 32;
  while (block < max_row_block && block < cols)
    block *= 2;
  return block;
}

/// Rows per grid; each block loops over more rows when there are more.
unsigned int row_blocks(std::int64_t rows) {
  return static_cast<unsigned int>(std::min<std::int64_t>(rows, 1 << 16));
}

struct max_of {
  template <class T>
  __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
struct sum_of {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};

/// Combines every thread's `value` with `op`; all threads get the result. `shared` has
/// blockDim.x elements, blockDim.x is a power of two, and every thread of the block calls it.
template <class T, class Op>
__device__ T block_reduce(T value, T* shared, Op op) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width)
      shared[threadIdx.x] = op(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
  T result = shared[0];
  // shared[] is reused by the caller's next reduction.
  __syncthreads();
  return result;
}

// --- Softmax -------------------------------------------------------------------------------

template <class T>
__global__ void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols,
                             T lowest) {
  __shared__ T shared[max_row_block];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * cols;
    T* out = y + row * cols;
    T m = lowest;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      m = max_of{}(m, in[j]);
    m = block_reduce(m, shared, max_of{});
    T sum = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      T e = exp_of(in[j] - m);
      out[j] = e;
      sum += e;
    }
    sum = block_reduce(sum, shared, sum_of{});
    // Each thread divides the elements it wrote itself: no barrier needed.
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      out[j] /= sum;
  }
}

template <class T>
status launch_softmax(cudaStream_t stream, const T* x, T* y, std::int64_t rows,
                      std::int64_t cols) {
  softmax_rows<T><<<row_blocks(rows), row_block(cols), 0, stream>>>(
    x, y, rows, cols, -std::numeric_limits<T>::infinity());
  AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

template <class T>
class softmax_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_input(ctx, 0, dtype_of<T>()));
    const tensor& x = ctx.input(0);
    if (x.shape().rank() < 1)
      return make_error(errc::invalid_argument, "Softmax needs a tensor of rank 1 or more, got " +
                                                  x.shape().to_string());
    tensor out = ctx.allocate_output(0, dtype_of<T>(), x.shape());
    auto cols = x.shape().dim(x.shape().rank() - 1);
    if (cols == 0 || x.num_elements() == 0)
      return {};
    return launch_softmax<T>(stream, x.data<T>(), out.data<T>(), x.num_elements() / cols, cols);
  }
};

// --- SoftmaxCrossEntropyWithLogits ---------------------------------------------------------

/// Per row r: loss[r] = sum_j labels_j (logsumexp(x) - x_j), computed as
/// log(sum exp(s)) * sum(labels) - sum(s * labels) with s = x - max(x); and
/// backprop = softmax(x) - labels.
template <class T>
__global__ void softmax_cross_entropy_rows(const T* logits, const T* labels, T* loss,
                                           T* backprop, std::int64_t rows, std::int64_t cols,
                                           T lowest) {
  __shared__ T shared[max_row_block];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = logits + row * cols;
    const T* y = labels + row * cols;
    T* b = backprop + row * cols;
    T m = lowest;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      m = max_of{}(m, x[j]);
    m = block_reduce(m, shared, max_of{});
    T sum_exp = 0;
    T shifted_dot_labels = 0;
    T sum_labels = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      T shifted = x[j] - m;
      T e = exp_of(shifted);
      b[j] = e;
      sum_exp += e;
      shifted_dot_labels += shifted * y[j];
      sum_labels += y[j];
    }
    sum_exp = block_reduce(sum_exp, shared, sum_of{});
    shifted_dot_labels = block_reduce(shifted_dot_labels, shared, sum_of{});
    sum_labels = block_reduce(sum_labels, shared, sum_of{});
    if (threadIdx.x == 0)
      loss[row] = log_of(sum_exp) * sum_labels - shifted_dot_labels;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      b[j] = b[j] / sum_exp - y[j];
  }
}

template <class T>
status launch_softmax_cross_entropy(cudaStream_t stream, const T* logits, const T* labels,
                                    T* loss, T* backprop, std::int64_t rows, std::int64_t cols) {
  softmax_cross_entropy_rows<T><<<row_blocks(rows), row_block(cols), 0, stream>>>(
    logits, labels, loss, backprop, rows, cols, -std::numeric_limits<T>::infinity());
  AF_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return {};
}

template <class T>
class softmax_cross_entropy_kernel final : public cuda_kernel {
public:
  using cuda_kernel::cuda_kernel;

protected:
  status launch(kernel_context& ctx, cudaStream_t stream) override {
    AF_RETURN_IF_ERROR(expect_inputs(ctx, 2, dtype_of<T>()));
    const tensor& logits = ctx.input(0);
    const tensor& labels = ctx.input(1);
    if (logits.shape().rank() != 2 || logits.shape() != labels.shape())
      return make_error(errc::invalid_argument,
                        "logits and labels must be matrices of the same shape: logits " +
                          logits.shape().to_string() + ", labels " + labels.shape().to_string());
    auto batch = logits.shape().dim(0);
    auto classes = logits.shape().dim(1);
    tensor loss = ctx.allocate_output(0, dtype_of<T>(), tensor_shape{batch});
    tensor backprop = ctx.allocate_output(1, dtype_of<T>(), logits.shape());
    if (batch == 0)
      return {};
    if (classes == 0) {
      AF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(loss.raw_data(), 0, loss.bytes(), stream));
      return {};
    }
    return launch_softmax_cross_entropy<T>(stream, logits.data<T>(), labels.data<T>(),
                                           loss.data<T>(), backprop.data<T>(), batch, classes);
  }
};

} // namespace

void register_softmax_kernels(kernel_registry& registry) {
  add_gpu_kernels<softmax_kernel, float, double>(registry, "Softmax");
  add_gpu_kernels<softmax_cross_entropy_kernel, float, double>(registry,
                                                               "SoftmaxCrossEntropyWithLogits");
}

} // namespace actorflow::cuda
