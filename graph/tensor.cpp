#include "graph/tensor.hpp"

#include "graph/environment.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <new>
#include <sstream>

namespace actorflow {

std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::float32: return 4;
    case dtype::float64: return 8;
    case dtype::int32: return 4;
    case dtype::int64: return 8;
    case dtype::boolean: return 1;
  }
  return 0;
}

const char* to_string(dtype t) {
  switch (t) {
    case dtype::float32: return "float32";
    case dtype::float64: return "float64";
    case dtype::int32: return "int32";
    case dtype::int64: return "int64";
    case dtype::boolean: return "bool";
  }
  return "unknown";
}

std::optional<dtype> parse_dtype(std::string_view name) {
  for (auto t : all_dtypes())
    if (name == to_string(t))
      return t;
  return std::nullopt;
}

bool is_floating(dtype t) { return t == dtype::float32 || t == dtype::float64; }
bool is_integer(dtype t) { return t == dtype::int32 || t == dtype::int64; }

namespace {

class aligned_allocator final : public allocator {
public:
  void* allocate(std::size_t bytes) override {
    auto rounded = (bytes + tensor_alignment - 1) / tensor_alignment * tensor_alignment;
    void* p = std::aligned_alloc(tensor_alignment, rounded == 0 ? tensor_alignment : rounded);
    if (p == nullptr)
      throw std::bad_alloc{};
    return p;
  }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
  const char* name() const override { return "aligned_host"; }
};

aligned_allocator plain_allocator;
std::atomic<allocator*> host_allocator{&plain_allocator};

std::atomic<std::size_t> tensor_cap_override{0};

} // namespace

std::size_t max_tensor_allocation_bytes() {
  if (auto bytes = tensor_cap_override.load(std::memory_order_relaxed))
    return bytes;
  static const std::size_t from_environment = size_from_environment("ACTORFLOW_MAX_TENSOR_BYTES", 0);
  return from_environment;
}

void set_max_tensor_allocation_bytes(std::size_t bytes) {
  tensor_cap_override.store(bytes, std::memory_order_relaxed);
}

allocator* default_host_allocator() { return host_allocator.load(std::memory_order_acquire); }

void set_default_host_allocator(allocator* alloc) {
  host_allocator.store(alloc != nullptr ? alloc : &plain_allocator, std::memory_order_release);
}

buffer::buffer(allocator* alloc, std::size_t bytes)
  : data_(alloc->allocate(bytes)), bytes_(bytes), alloc_(alloc), space_(alloc->space()) {}

buffer::buffer(void* data, std::size_t bytes, std::function<void(void*)> release,
               const memory_space* space)
  : data_(data), bytes_(bytes), space_(space), release_(std::move(release)) {}

buffer::~buffer() {
  if (alloc_ != nullptr)
    alloc_->deallocate(data_, bytes_);
  else if (release_)
    release_(data_);
}

std::size_t check_tensor_allocation_cap(dtype type, const tensor_shape& shape) {
  auto cap = max_tensor_allocation_bytes();
  auto bytes = static_cast<std::size_t>(shape.num_elements()) * size_of(type);
  if (cap != 0 && bytes > cap)
    throw allocation_failure("a " + std::string{to_string(type)} + " tensor of shape " +
                             shape.to_string() + " needs " + std::to_string(bytes) +
                             " bytes, over this process's per-tensor cap of " +
                             std::to_string(cap) + " (ACTORFLOW_MAX_TENSOR_BYTES)");
  return bytes;
}

std::string format_bytes(std::size_t bytes) {
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  static const char* const units[] = {"KiB", "MiB", "GiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  std::size_t u = 0;
  while (u + 1 < std::size(units) && std::round(value * 10.0) >= 10240.0) {
    value /= 1024.0;
    ++u;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[u]);
  return text;
}

tensor::tensor(dtype type, tensor_shape shape, allocator* alloc)
  : type_(type), shape_(std::move(shape)) {
  check_tensor_allocation_cap(type_, shape_);
  auto* a = alloc != nullptr ? alloc : default_host_allocator();
  buf_ = std::make_shared<buffer>(a, bytes());
}

tensor::tensor(dtype type, tensor_shape shape, std::shared_ptr<buffer> buf)
  : type_(type), shape_(std::move(shape)), buf_(std::move(buf)) {}

result<tensor> tensor::reshaped(tensor_shape shape) const {
  if (shape.num_elements() != num_elements())
    return make_error(errc::invalid_argument, "cannot reshape a tensor of shape " +
                                                shape_.to_string() + " (" +
                                                std::to_string(num_elements()) +
                                                " elements) to " + shape.to_string());
  return tensor{type_, std::move(shape), buf_};
}

status tensor::check_on_host(const std::string& use) const {
  if (on_host())
    return {};
  return make_error(errc::failed_precondition,
                    use + " needs host memory, but the " + to_string(type_) + shape_.to_string() +
                      " tensor is in the memory of " + space()->device +
                      ": copy it to the host first");
}

void tensor::throw_device_memory_access(const char* accessor) const {
  throw device_memory_access{std::string{accessor} + " needs host memory, but the " +
                             to_string(type_) + shape_.to_string() + " tensor is in the memory of " +
                             space()->device + ": copy it to the host first"};
}

tensor tensor::clone(allocator* alloc) const {
  require_host("clone");
  tensor copy{type_, shape_, alloc};
  copy.require_host("clone (into a device allocator)");
  if (bytes() > 0)
    std::memcpy(copy.raw_data(), raw_data(), bytes());
  return copy;
}

result<tensor> tensor::sliced(int axis, std::int64_t offset, std::int64_t extent) const {
  if (!on_host())
    return make_error(errc::invalid_argument, "cannot slice a tensor in the memory of " +
                                                space()->device + " on the host");
  if (axis < 0 || axis >= shape_.rank())
    return make_error(errc::invalid_argument, "cannot slice axis " + std::to_string(axis) +
                                                " of a tensor of shape " + shape_.to_string());
  auto dims = shape_.dims();
  auto axis_dim = dims[static_cast<std::size_t>(axis)];
  if (offset < 0 || extent < 0 || offset > axis_dim - extent)
    return make_error(errc::out_of_range,
                      "cannot slice [" + std::to_string(offset) + ", " +
                        std::to_string(offset + extent) + ") of axis " + std::to_string(axis) +
                        " of a tensor of shape " + shape_.to_string());
  dims[static_cast<std::size_t>(axis)] = extent;
  tensor out{type_, tensor_shape{dims}};
  // The slice is `outer` blocks of `extent * inner` contiguous bytes each.
  std::int64_t outer = 1;
  std::size_t inner = size_of(type_);
  for (int d = 0; d < shape_.rank(); ++d) {
    if (d < axis)
      outer *= dims[static_cast<std::size_t>(d)];
    else if (d > axis)
      inner *= static_cast<std::size_t>(dims[static_cast<std::size_t>(d)]);
  }
  auto block = static_cast<std::size_t>(extent) * inner;
  if (block == 0)
    return out;
  auto* src = static_cast<const char*>(raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (std::int64_t row = 0; row < outer; ++row)
    std::memcpy(dst + static_cast<std::size_t>(row) * block,
                src + static_cast<std::size_t>(row * axis_dim + offset) * inner, block);
  return out;
}

std::string tensor::debug_string(std::size_t max_elements) const {
  std::ostringstream out;
  out << to_string(type_) << shape_.to_string();
  if (!is_initialized())
    return out.str() + " <empty>";
  if (!on_host())
    return out.str() + " in the memory of " + space()->device;
  auto values = to_vector<double>();
  out << " {";
  for (std::size_t i = 0; i < values.size() && i < max_elements; ++i)
    out << (i > 0 ? ", " : "") << values[i];
  if (values.size() > max_elements)
    out << ", ...";
  out << "}";
  return out.str();
}

} // namespace actorflow
