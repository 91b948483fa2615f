#pragma once
/// Tensors: a dtype, a shape and a reference-counted, 64-byte aligned buffer.
///   tensor t{dtype::float32, {2, 3}};   // uninitialised 2x3
///   t.flat<float>()[0] = 1.f;
///   tensor u = t;                       // shares the buffer, copies no data
/// Copying a tensor handle never copies data; use clone() for a deep copy.

#include "graph/dtype.hpp"
#include "graph/tensor_shape.hpp"

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace actorflow {

/// Memory the CPU cannot read directly: one device's (a GPU's, the test device's). Owned by
/// the device, which outlives its buffers. Host memory has no memory_space object: a buffer
/// whose space is null is on the host.
struct memory_space {
  /// The device's full name, for messages ("/job:w/replica:0/task:0/device:GPU:0").
  std::string device;
};

/// Where tensor buffers come from. Implementations must be thread-safe; a buffer is returned
/// to the allocator that made it, with the same byte count.
class allocator {
public:
  virtual ~allocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual const char* name() const = 0;
  /// The memory its buffers live in; null for host memory.
  virtual const memory_space* space() const { return nullptr; }
};

/// Thrown by allocators that cannot satisfy a request; what() says how many bytes were asked
/// for, from which allocator, and what is in use. Derives from std::bad_alloc so existing
/// catch sites keep working.
class allocation_failure : public std::bad_alloc {
public:
  explicit allocation_failure(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

private:
  std::string message_;
};

/// "512 B", "1.5 KiB", "3.0 MiB", "1.5 GiB": one decimal, the largest unit that keeps the
/// value at or above 1 (as rounded, so 1023.99 KiB prints "1.0 MiB", not "1024.0 KiB"). For
/// allocation messages.
std::string format_bytes(std::size_t bytes);

/// Thrown by the host-only accessors (scalar_value, to_vector, clone, sliced) when a tensor's
/// buffer is in device memory: copy it to the host first (device::copy_to_host). Kernels run
/// inside try blocks, so this becomes a step error naming the node, never a crash.
class device_memory_access : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

/// Alignment of every host buffer: enough for AVX-512 loads.
inline constexpr std::size_t tensor_alignment = 64;

/// The process-wide host allocator used when none is given. It starts as plain aligned
/// allocation; tasks and sessions install the pooling allocator here when their runtime_env
/// says so (devices/runtime_env.hpp).
allocator* default_host_allocator();
void set_default_host_allocator(allocator* alloc);

/// The largest tensor this process allocates, in bytes; 0 (the default) is no cap. A larger one
/// throws allocation_failure naming its shape and the cap, which a kernel's step reports as an
/// error naming the node. From ACTORFLOW_MAX_TENSOR_BYTES (read on the first call) unless
/// set_max_tensor_allocation_bytes() says otherwise (0 goes back to the environment's).
std::size_t max_tensor_allocation_bytes();
void set_max_tensor_allocation_bytes(std::size_t bytes);
/// The bytes a tensor of `type` and `shape` needs; throws allocation_failure when they are
/// over that cap.
std::size_t check_tensor_allocation_cap(dtype type, const tensor_shape& shape);

/// A block of memory owned by one allocator; freed when the last tensor referring to it dies.
class buffer {
public:
  buffer(allocator* alloc, std::size_t bytes);
  /// Wraps memory owned elsewhere (e.g. a GPU allocation); `release` runs when the buffer dies.
  buffer(void* data, std::size_t bytes, std::function<void(void*)> release,
         const memory_space* space = nullptr);
  ~buffer();
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  /// Null for host memory.
  const memory_space* space() const { return space_; }

private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  allocator* alloc_ = nullptr;
  const memory_space* space_ = nullptr;
  std::function<void(void*)> release_;
};

class tensor {
public:
  /// An empty handle: no buffer, dtype float32, scalar shape. is_initialized() is false.
  tensor() = default;
  /// A fully defined tensor with uninitialised contents from `alloc`.
  tensor(dtype type, tensor_shape shape, allocator* alloc = nullptr);
  /// A tensor viewing an existing buffer (which must hold at least the shape's bytes).
  tensor(dtype type, tensor_shape shape, std::shared_ptr<buffer> buf);

  template <class T>
  static tensor scalar(T value) {
    tensor t{dtype_of<T>(), tensor_shape{}};
    *t.data<T>() = value;
    return t;
  }
  template <class T>
  static tensor from_vector(const std::vector<T>& values, tensor_shape shape) {
    tensor t{dtype_of<T>(), std::move(shape)};
    for (std::size_t i = 0; i < values.size() && i < static_cast<std::size_t>(t.num_elements()); ++i)
      t.data<T>()[i] = values[i];
    return t;
  }
  template <class T>
  static tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, tensor_shape{static_cast<std::int64_t>(values.size())});
  }

  bool is_initialized() const { return buf_ != nullptr; }
  dtype type() const { return type_; }
  const tensor_shape& shape() const { return shape_; }
  std::int64_t num_elements() const { return shape_.num_elements(); }
  std::size_t bytes() const { return static_cast<std::size_t>(num_elements()) * size_of(type_); }

  /// Whether the CPU may read the buffer (an empty tensor counts as host).
  bool on_host() const { return buf_ == nullptr || buf_->space() == nullptr; }
  /// The device memory the buffer lives in; null on the host.
  const memory_space* space() const { return buf_ ? buf_->space() : nullptr; }
  /// An error naming `use` and the device whose memory holds the tensor, unless on_host(): for
  /// encoders, which return errors instead of throwing.
  status check_on_host(const std::string& use) const;
  /// Throws device_memory_access, naming `accessor`, unless on_host().
  void require_host(const char* accessor) const {
    if (!on_host())
      throw_device_memory_access(accessor);
  }

  /// The buffer's address: host or device memory (a device kernel's pointer).
  void* raw_data() const { return buf_ ? buf_->data() : nullptr; }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }
  /// The first element converted to T (scalars, mostly).
  template <class T>
  T scalar_value() const {
    require_host("scalar_value");
    return visit_dtype(type_, [&](auto zero) { return static_cast<T>(data<decltype(zero)>()[0]); });
  }
  /// All elements converted to T.
  template <class T>
  std::vector<T> to_vector() const {
    require_host("to_vector");
    std::vector<T> out(static_cast<std::size_t>(num_elements()));
    visit_dtype(type_, [&](auto zero) {
      auto* p = data<decltype(zero)>();
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<T>(p[i]);
      return 0;
    });
    return out;
  }

  /// Same buffer, another shape with the same element count.
  result<tensor> reshaped(tensor_shape shape) const;
  /// A deep copy into a fresh host buffer (from `alloc`, which must make host memory); the
  /// devices copy device memory (device::copy_on_device).
  tensor clone(allocator* alloc = nullptr) const;
  /// A copy of indices [offset, offset + extent) along `axis` (e.g. a batch's rows); an error
  /// names the axis or range that does not fit the shape.
  result<tensor> sliced(int axis, std::int64_t offset, std::int64_t extent) const;
  /// Shares the buffer with `other`.
  bool shares_buffer_with(const tensor& other) const { return buf_ && buf_ == other.buf_; }
  const std::shared_ptr<buffer>& buffer_ref() const { return buf_; }

  /// "float32[2,3]" followed by up to `max_elements` values (or by where it lives, for a
  /// tensor in device memory).
  std::string debug_string(std::size_t max_elements = 8) const;

private:
  [[noreturn]] void throw_device_memory_access(const char* accessor) const;

  dtype type_ = dtype::float32;
  tensor_shape shape_;
  std::shared_ptr<buffer> buf_;
};

} // namespace actorflow
