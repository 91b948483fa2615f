#include "serialization/idx_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <numeric>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace actorflow {

namespace {

/// Decompressed files larger than this are refused: no idx file we read comes close, and a
/// crafted gzip stream must not be able to exhaust memory.
constexpr std::uint64_t max_decompressed_bytes = std::uint64_t{1} << 32;

std::string hex32(std::uint32_t value) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::string file_context(const std::string& path) { return "idx file '" + path + "'"; }

status corrupt(std::string message) { return make_error(errc::data_loss, std::move(message)); }

/// Reads a whole regular file. Errors do not name the file; callers add it.
result<std::vector<std::uint8_t>> read_whole_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int error = errno;
    return make_error(error == ENOENT || error == ENOTDIR ? errc::not_found
                                                          : errc::failed_precondition,
                      std::string{"cannot open: "} + std::strerror(error));
  }
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_at_exit{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    return make_error(errc::failed_precondition, std::string{"cannot stat: "} + std::strerror(errno));
  // FIFOs, devices and directories could block forever or never end.
  if (!S_ISREG(info.st_mode))
    return make_error(errc::invalid_argument, "not a regular file");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(info.st_size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    auto n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return make_error(errc::data_loss, "read failed at byte " + std::to_string(done) + ": " +
                                           std::strerror(errno));
    }
    if (n == 0)
      return corrupt("file shrank to " + std::to_string(done) + " bytes while being read");
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

bool is_gzip(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

/// Inflates one or more concatenated gzip members (what `gzip -d` accepts), checking each
/// member's CRC-32 and length. Errors do not name the file.
result<std::vector<std::uint8_t>> gunzip(const std::vector<std::uint8_t>& in) {
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 16) != Z_OK)
    return make_error(errc::resource_exhausted, "cannot initialise zlib");
  struct ender {
    z_stream* s;
    ~ender() { inflateEnd(s); }
  } end_at_exit{&stream};

  std::vector<std::uint8_t> out;
  // The last member's trailer holds its uncompressed size mod 2^32: a good first guess.
  if (in.size() >= 18) {
    std::uint32_t hint = 0;
    for (int i = 3; i >= 0; --i)
      hint = (hint << 8) | in[in.size() - 4 + static_cast<std::size_t>(i)];
    // Deflate expands at most about 1032 times; a crafted trailer must not reserve more.
    // One spare byte lets inflate finish the stream (trailer included) without a second,
    // reallocating round when the hint is exact.
    out.reserve(static_cast<std::size_t>(
      std::min<std::uint64_t>(std::uint64_t{hint} + 1, std::uint64_t{1032} * in.size())));
  }
  std::size_t in_pos = 0;
  std::size_t out_pos = 0;
  constexpr std::size_t max_chunk = std::size_t{1} << 30;
  for (;;) {
    if (out_pos == out.size()) {
      if (out.size() >= max_decompressed_bytes)
        return corrupt("gzip stream decompresses to more than " +
                       std::to_string(max_decompressed_bytes) + " bytes");
      auto grow = std::max<std::size_t>(std::size_t{1} << 20, out.capacity() - out.size());
      out.resize(static_cast<std::size_t>(
        std::min<std::uint64_t>(out.size() + grow, max_decompressed_bytes)));
    }
    auto in_chunk = std::min(in.size() - in_pos, max_chunk);
    auto out_chunk = std::min(out.size() - out_pos, max_chunk);
    stream.next_in = const_cast<Bytef*>(in.data() + in_pos);
    stream.avail_in = static_cast<uInt>(in_chunk);
    stream.next_out = out.data() + out_pos;
    stream.avail_out = static_cast<uInt>(out_chunk);
    int rc = inflate(&stream, Z_NO_FLUSH);
    in_pos += in_chunk - stream.avail_in;
    out_pos += out_chunk - stream.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_pos == in.size())
        break;
      // Another member follows, or garbage.
      if (in.size() - in_pos >= 2 && in[in_pos] == 0x1f && in[in_pos + 1] == 0x8b) {
        inflateReset(&stream);
        continue;
      }
      return corrupt("corrupt gzip data: " + std::to_string(in.size() - in_pos) +
                     " bytes of garbage after the compressed stream");
    }
    if (rc == Z_OK)
      continue;
    // No progress: the input ended inside the stream (output space is never the problem, it
    // grows above).
    if (rc == Z_BUF_ERROR && in_pos == in.size())
      return corrupt("corrupt gzip data: the compressed stream is truncated after " +
                     std::to_string(in.size()) + " bytes (" + std::to_string(out_pos) +
                     " bytes decompressed)");
    if (rc == Z_MEM_ERROR)
      return make_error(errc::resource_exhausted, "out of memory while decompressing");
    std::string reason = stream.msg != nullptr ? stream.msg : "error " + std::to_string(rc);
    return corrupt("corrupt gzip data at compressed byte " + std::to_string(in_pos) + ": " +
                   reason);
  }
  out.resize(out_pos);
  return out;
}

/// The file's contents, decompressed when it is gzip.
result<std::vector<std::uint8_t>> read_contents(const std::string& path) {
  auto bytes = read_whole_file(path);
  if (!bytes || !is_gzip(*bytes))
    return bytes;
  return gunzip(*bytes);
}

std::uint32_t big_endian32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

struct idx_contents {
  std::vector<std::uint8_t> bytes;
  std::vector<std::int64_t> dims;
  std::size_t data_offset = 0;
};

std::string dims_string(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

const char* magic_meaning(std::uint32_t magic) {
  switch (magic) {
    case idx_images_magic: return "idx3 unsigned-byte images";
    case idx_labels_magic: return "idx1 unsigned-byte labels";
    default: return "idx unsigned bytes";
  }
}

/// Reads an idx file of unsigned bytes with magic number `magic` (which fixes the rank) and
/// checks that the data is exactly as long as the dimensions say. Errors name the file.
result<idx_contents> read_idx(const std::string& path, std::uint32_t magic) {
  auto context = file_context(path);
  auto contents = read_contents(path);
  if (!contents)
    return contents.error().with_context(context);
  idx_contents idx;
  idx.bytes = std::move(*contents);
  auto& bytes = idx.bytes;
  if (bytes.size() < 4)
    return corrupt(context + ": truncated: expected at least 4 bytes of header, found " +
                   std::to_string(bytes.size()));
  auto found = big_endian32(bytes.data());
  if (found != magic)
    return corrupt(context + ": bad magic number " + hex32(found) + ", expected " + hex32(magic) +
                   " (" + magic_meaning(magic) + ")");
  std::size_t rank = magic & 0xff;
  idx.data_offset = 4 + 4 * rank;
  if (bytes.size() < idx.data_offset)
    return corrupt(context + ": truncated: expected " + std::to_string(idx.data_offset) +
                   " bytes of header, found " + std::to_string(bytes.size()));
  std::uint64_t elements = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    std::uint64_t d = big_endian32(bytes.data() + 4 + 4 * i);
    idx.dims.push_back(static_cast<std::int64_t>(d));
    // Each factor is below 2^32; stop before the product can overflow.
    elements = elements > max_decompressed_bytes ? elements : elements * d;
  }
  auto actual = bytes.size() - idx.data_offset;
  if (elements > actual)
    return corrupt(context + ": truncated: dimensions " + dims_string(idx.dims) + " need " +
                   std::to_string(elements) + " bytes of data, found " + std::to_string(actual));
  if (elements < actual)
    return corrupt(context + ": " + std::to_string(actual - elements) +
                   " unexpected bytes after the " + std::to_string(elements) +
                   " bytes of data for dimensions " + dims_string(idx.dims));
  return idx;
}

/// Whether `path` names an existing file system entry.
bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

} // namespace

result<tensor> read_idx_images(const std::string& path) {
  auto idx = read_idx(path, idx_images_magic);
  if (!idx)
    return idx.error();
  auto n = idx->dims[0];
  // With n > 0 the data size bounds rows * cols; with n == 0 it does not.
  auto features = static_cast<std::uint64_t>(idx->dims[1]) * static_cast<std::uint64_t>(idx->dims[2]);
  if (features > max_decompressed_bytes)
    return corrupt(file_context(path) + ": images of " + std::to_string(idx->dims[1]) + " x " +
                   std::to_string(idx->dims[2]) + " pixels are too large");
  tensor images{dtype::float32, tensor_shape{n, static_cast<std::int64_t>(features)}};
  // Dividing (not multiplying by 1/255) makes 255 exactly 1.
  std::array<float, 256> scale{};
  for (int i = 0; i < 256; ++i)
    scale[static_cast<std::size_t>(i)] = static_cast<float>(i) / 255.f;
  const auto* src = idx->bytes.data() + idx->data_offset;
  auto* dst = images.data<float>();
  auto count = static_cast<std::size_t>(images.num_elements());
  for (std::size_t i = 0; i < count; ++i)
    dst[i] = scale[src[i]];
  return images;
}

result<tensor> read_idx_labels(const std::string& path) {
  auto idx = read_idx(path, idx_labels_magic);
  if (!idx)
    return idx.error();
  tensor labels{dtype::int64, tensor_shape{idx->dims[0]}};
  const auto* src = idx->bytes.data() + idx->data_offset;
  auto* dst = labels.data<std::int64_t>();
  for (std::int64_t i = 0; i < idx->dims[0]; ++i)
    dst[i] = src[i];
  return labels;
}

result<dataset> load_fashion_mnist(const std::string& dir, const std::string& split) {
  if (split != "train" && split != "t10k")
    return make_error(errc::invalid_argument,
                      "Fashion-MNIST split '" + split + "' is neither 'train' nor 't10k'");
  auto locate = [&](const std::string& base) -> result<std::string> {
    auto gz = dir + "/" + base + ".gz";
    if (exists(gz))
      return gz;
    auto raw = dir + "/" + base;
    if (exists(raw))
      return raw;
    return make_error(errc::not_found, "idx file '" + gz + "' (or '" + raw +
                                         "'): no such file; Debian's dataset-fashion-mnist "
                                         "package installs it in " +
                                         fashion_mnist_default_dir);
  };
  auto images_path = locate(split + "-images-idx3-ubyte");
  if (!images_path)
    return images_path.error();
  auto labels_path = locate(split + "-labels-idx1-ubyte");
  if (!labels_path)
    return labels_path.error();
  auto images = read_idx_images(*images_path);
  if (!images)
    return images.error();
  auto labels = read_idx_labels(*labels_path);
  if (!labels)
    return labels.error();
  auto n_images = images->shape().dim(0);
  auto n_labels = labels->shape().dim(0);
  if (n_images != n_labels)
    return corrupt("idx files '" + *images_path + "' and '" + *labels_path + "' do not match: " +
                   std::to_string(n_images) + " images but " + std::to_string(n_labels) +
                   " labels");
  const auto* l = labels->data<std::int64_t>();
  for (std::int64_t i = 0; i < n_labels; ++i)
    if (l[i] > 9)
      return corrupt(file_context(*labels_path) + ": label " + std::to_string(l[i]) +
                     " of example " + std::to_string(i) + " is not a Fashion-MNIST class (0..9)");
  return dataset{std::move(*images), std::move(*labels)};
}

// --- batch_iterator ---------------------------------------------------------------------------

namespace {

/// How many batches' buffers the iterator keeps for reuse.
constexpr std::size_t max_pooled_slots = 4;

/// A uniform integer in [0, n) from `rng`, without modulo bias and without the standard
/// library's distributions, whose algorithms differ between implementations.
std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t n) {
  // Rejecting the lowest 2^64 mod n values leaves a multiple of n equally likely values.
  std::uint64_t threshold = (0 - n) % n;
  std::uint64_t x = rng();
  while (x < threshold)
    x = rng();
  return x % n;
}

} // namespace

bool batch_iterator::slot::free() const {
  // Only the pool holds these buffers: no batch handed out still refers to them.
  return images.use_count() == 1 && one_hot.use_count() == 1 && labels.use_count() == 1;
}

result<batch_iterator> batch_iterator::create(dataset data, batch_options options) {
  auto invalid = [](std::string message) {
    return make_error(errc::invalid_argument, "batch_iterator: " + std::move(message));
  };
  if (options.batch_size < 1)
    return invalid("batch size " + std::to_string(options.batch_size) + " is not positive");
  if (options.num_classes < 1)
    return invalid("num_classes " + std::to_string(options.num_classes) + " is not positive");
  auto& images = data.images;
  auto& labels = data.labels;
  if (!images.is_initialized() || !labels.is_initialized())
    return invalid("the dataset has no images or no labels");
  if (images.type() != dtype::float32 || images.shape().rank() != 2)
    return invalid("images must be float32 [n, features], not " + std::string{to_string(images.type())} +
                   images.shape().to_string());
  if ((labels.type() != dtype::int64 && labels.type() != dtype::int32) || labels.shape().rank() != 1)
    return invalid("labels must be int64 or int32 [n], not " + std::string{to_string(labels.type())} +
                   labels.shape().to_string());
  auto n = labels.shape().dim(0);
  if (images.shape().dim(0) != n)
    return invalid(std::to_string(images.shape().dim(0)) + " images but " + std::to_string(n) +
                   " labels");
  if (n == 0)
    return invalid("the dataset is empty");
  if (options.replicas < 1 || options.replica < 0 || options.replica >= options.replicas)
    return invalid("replica " + std::to_string(options.replica) + " of " +
                   std::to_string(options.replicas) + " replicas does not exist");
  auto global_batch = options.batch_size * options.replicas;
  if (options.drop_last && n < global_batch)
    return invalid("with drop_last, " + std::to_string(n) + " examples make no batch of " +
                   std::to_string(global_batch));
  auto values = labels.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0 || values[i] >= options.num_classes)
      return invalid("label " + std::to_string(values[i]) + " of example " + std::to_string(i) +
                     " is outside 0.." + std::to_string(options.num_classes - 1));
  return batch_iterator{std::move(data), options, std::move(values)};
}

batch_iterator::batch_iterator(dataset data, batch_options options, std::vector<std::int64_t> labels)
  : data_(std::move(data)), options_(options), labels_(std::move(labels)), rng_(options.seed) {
  order_.resize(labels_.size());
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  start_epoch();
}

std::int64_t batch_iterator::batches_per_epoch() const {
  auto n = data_.size();
  auto b = options_.batch_size * options_.replicas;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void batch_iterator::start_epoch() {
  position_ = 0;
  if (!options_.shuffle)
    return;
  // Fisher-Yates over the previous order: each epoch is a fresh uniform permutation.
  for (std::size_t i = order_.size(); i > 1; --i)
    std::swap(order_[i - 1], order_[uniform_below(rng_, i)]);
}

batch_iterator::slot& batch_iterator::acquire_slot() {
  for (auto& s : pool_)
    if (s.free())
      return s;
  auto b = static_cast<std::size_t>(options_.batch_size);
  auto* alloc = default_host_allocator();
  slot fresh{
    std::make_shared<buffer>(alloc, b * static_cast<std::size_t>(data_.features()) * sizeof(float)),
    std::make_shared<buffer>(alloc, b * static_cast<std::size_t>(options_.num_classes) * sizeof(float)),
    std::make_shared<buffer>(alloc, b * sizeof(std::int64_t))};
  if (pool_.size() < max_pooled_slots) {
    pool_.push_back(std::move(fresh));
    return pool_.back();
  }
  // Every pooled batch is still held by the caller: replace one; its old buffers live on in
  // the caller's tensors until those are dropped.
  auto& victim = pool_[static_cast<std::size_t>(yielded_) % max_pooled_slots];
  victim = std::move(fresh);
  return victim;
}

const batch& batch_iterator::next() {
  // Drop our own references first so that the previous batch's buffers can be reused when the
  // caller no longer holds them.
  current_ = batch{};
  auto& s = acquire_slot();
  auto n = data_.size();
  auto replicas = options_.replicas;
  // This replica's share of the global batch at position_: every replicas-th example from its
  // own offset (the last, smaller global batch of an epoch may give it fewer, or none).
  auto global_batch = std::min(options_.batch_size * replicas, n - position_);
  auto b = global_batch > options_.replica ? (global_batch - options_.replica + replicas - 1) / replicas
                                           : std::int64_t{0};
  auto features = data_.features();
  auto classes = options_.num_classes;

  tensor images{dtype::float32, tensor_shape{b, features}, s.images};
  tensor one_hot{dtype::float32, tensor_shape{b, classes}, s.one_hot};
  tensor labels{dtype::int64, tensor_shape{b}, s.labels};
  const auto* src = data_.images.data<float>();
  auto* image_rows = images.data<float>();
  auto* hot = one_hot.data<float>();
  auto* label_values = labels.data<std::int64_t>();
  auto row_bytes = static_cast<std::size_t>(features) * sizeof(float);
  std::fill(hot, hot + b * classes, 0.f);
  for (std::int64_t i = 0; i < b; ++i) {
    auto example = order_[static_cast<std::size_t>(position_ + options_.replica + i * replicas)];
    std::memcpy(image_rows + i * features, src + example * features, row_bytes);
    auto label = labels_[static_cast<std::size_t>(example)];
    label_values[i] = label;
    hot[i * classes + label] = 1.f;
  }
  current_ = batch{std::move(images), std::move(one_hot), std::move(labels), epoch_, b};
  move_past(global_batch);
  return current_;
}

void batch_iterator::move_past(std::int64_t global_batch) {
  position_ += global_batch;
  ++yielded_;
  // Move on eagerly, so that epoch() already names the epoch of the next batch.
  auto remaining = data_.size() - position_;
  if (remaining == 0 || (options_.drop_last && remaining < options_.batch_size * options_.replicas)) {
    ++epoch_;
    start_epoch();
  }
}

void batch_iterator::seek(std::int64_t index) {
  if (index < yielded_) {
    // Back: the sequence again from its seed (each epoch's order follows from the last).
    rng_.seed(options_.seed);
    std::iota(order_.begin(), order_.end(), std::int64_t{0});
    epoch_ = 0;
    yielded_ = 0;
    start_epoch();
  }
  auto n = data_.size();
  while (yielded_ < index)
    move_past(std::min(options_.batch_size * options_.replicas, n - position_));
}

} // namespace actorflow
