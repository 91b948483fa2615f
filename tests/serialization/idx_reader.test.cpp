#include "serialization/idx_reader.hpp"

#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace actorflow;
using actorflow::test::contains;
using actorflow::test::temp_dir;
using actorflow::test::write_file_bytes;

namespace {

void put_big_endian(std::vector<std::uint8_t>& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(value >> shift));
}

/// An idx3 image file: n images of rows x cols, pixel (i, p) = pixel(i, p).
template <class F>
std::vector<std::uint8_t> idx_images(std::uint32_t n, std::uint32_t rows, std::uint32_t cols, F pixel) {
  std::vector<std::uint8_t> out;
  put_big_endian(out, idx_images_magic);
  put_big_endian(out, n);
  put_big_endian(out, rows);
  put_big_endian(out, cols);
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t p = 0; p < rows * cols; ++p)
      out.push_back(pixel(i, p));
  return out;
}

std::vector<std::uint8_t> idx_labels(const std::vector<std::uint8_t>& labels) {
  std::vector<std::uint8_t> out;
  put_big_endian(out, idx_labels_magic);
  put_big_endian(out, static_cast<std::uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

/// The gzip file `gzip` would make of `raw` (a real deflate stream with header and trailer).
std::vector<std::uint8_t> gzipped(const std::vector<std::uint8_t>& raw) {
  z_stream stream{};
  REQUIRE(deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<std::uint8_t> out(deflateBound(&stream, static_cast<uLong>(raw.size())) + 64);
  stream.next_in = const_cast<Bytef*>(raw.data());
  stream.avail_in = static_cast<uInt>(raw.size());
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&stream, Z_FINISH) == Z_STREAM_END);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

std::uint8_t sample_pixel(std::uint32_t image, std::uint32_t p) {
  return static_cast<std::uint8_t>((image * 37 + p * 11) % 256);
}

/// Writes a small Fashion-MNIST-like split: `n` 2x3 images and labels i % 10.
void write_split(const std::string& dir, const std::string& split, std::uint32_t n, bool gzip) {
  std::vector<std::uint8_t> labels(n);
  for (std::uint32_t i = 0; i < n; ++i)
    labels[i] = static_cast<std::uint8_t>(i % 10);
  auto images = idx_images(n, 2, 3, sample_pixel);
  auto label_bytes = idx_labels(labels);
  auto suffix = gzip ? ".gz" : "";
  write_file_bytes(dir + "/" + split + "-images-idx3-ubyte" + suffix, gzip ? gzipped(images) : images);
  write_file_bytes(dir + "/" + split + "-labels-idx1-ubyte" + suffix,
                   gzip ? gzipped(label_bytes) : label_bytes);
}

/// A dataset of n examples with one feature holding the example's index, and labels i % 10.
dataset indexed_dataset(std::int64_t n) {
  dataset d;
  d.images = tensor{dtype::float32, tensor_shape{n, 2}};
  d.labels = tensor{dtype::int64, tensor_shape{n}};
  for (std::int64_t i = 0; i < n; ++i) {
    d.images.data<float>()[2 * i] = static_cast<float>(i);
    d.images.data<float>()[2 * i + 1] = -static_cast<float>(i);
    d.labels.data<std::int64_t>()[i] = i % 10;
  }
  return d;
}

/// The example indices of a batch made from indexed_dataset.
std::vector<std::int64_t> example_ids(const batch& b) {
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < b.size; ++i)
    ids.push_back(static_cast<std::int64_t>(b.images.data<float>()[2 * i]));
  return ids;
}

} // namespace

TEST_CASE("idx images and labels read back from raw and gzip files") {
  temp_dir dir;
  auto images = idx_images(3, 2, 3, sample_pixel);
  images[16] = 255; // image 0, pixel 0
  images[17] = 0;
  auto labels = idx_labels({7, 0, 9});
  for (bool gzip : {false, true}) {
    CAPTURE(gzip);
    auto image_path = dir.path() + "/images" + (gzip ? ".gz" : "");
    auto label_path = dir.path() + "/labels" + (gzip ? ".gz" : "");
    write_file_bytes(image_path, gzip ? gzipped(images) : images);
    write_file_bytes(label_path, gzip ? gzipped(labels) : labels);

    auto x = read_idx_images(image_path);
    REQUIRE(x.ok());
    CHECK(x->type() == dtype::float32);
    CHECK(x->shape() == tensor_shape{3, 6});
    auto values = x->to_vector<float>();
    CHECK(values[0] == 1.f);
    CHECK(values[1] == 0.f);
    for (std::size_t i = 2; i < values.size(); ++i)
      CHECK(values[i] == static_cast<float>(images[16 + i]) / 255.f);

    auto y = read_idx_labels(label_path);
    REQUIRE(y.ok());
    CHECK(y->type() == dtype::int64);
    CHECK(y->to_vector<std::int64_t>() == std::vector<std::int64_t>{7, 0, 9});
  }
}

TEST_CASE("load_fashion_mnist reads gzip and uncompressed splits and checks them") {
  temp_dir dir;
  write_split(dir.path(), "train", 25, true);
  write_split(dir.path(), "t10k", 7, false);
  auto train = load_fashion_mnist(dir.path(), "train");
  REQUIRE(train.ok());
  CHECK(train->size() == 25);
  CHECK(train->features() == 6);
  CHECK(train->labels.to_vector<std::int64_t>()[13] == 3);
  CHECK(train->images.data<float>()[6 * 4 + 5] == sample_pixel(4, 5) / 255.f);
  auto test = load_fashion_mnist(dir.path(), "t10k");
  REQUIRE(test.ok());
  CHECK(test->size() == 7);

  auto bad_split = load_fashion_mnist(dir.path(), "validation");
  REQUIRE_FALSE(bad_split.ok());
  CHECK(bad_split.error().code() == errc::invalid_argument);
  CHECK(contains(bad_split.error().message(), "'validation'"));
}

TEST_CASE("each malformed idx file gives an error naming the file") {
  temp_dir dir;
  auto path = dir.path() + "/bad-idx3-ubyte";
  auto images = idx_images(3, 2, 3, sample_pixel);

  SECTION("a missing file is not_found") {
    auto r = read_idx_images(dir.path() + "/nothing-here");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::not_found);
    CHECK(contains(r.error().message(), "'" + dir.path() + "/nothing-here'"));
  }
  SECTION("a missing dataset names the file it looked for") {
    auto r = load_fashion_mnist(dir.path(), "train");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::not_found);
    CHECK(contains(r.error().message(), dir.path() + "/train-images-idx3-ubyte.gz"));
  }
  SECTION("a bad magic number is quoted in hex") {
    write_file_bytes(path, idx_labels({1, 2, 3}));
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::data_loss);
    CHECK(contains(r.error().message(), "'" + path + "'"));
    CHECK(contains(r.error().message(), "bad magic number 0x00000801"));
    CHECK(contains(r.error().message(), "0x00000803"));
    write_file_bytes(dir.path() + "/text", {'h', 'e', 'l', 'l', 'o'});
    auto text = read_idx_labels(dir.path() + "/text");
    REQUIRE_FALSE(text.ok());
    CHECK(contains(text.error().message(), "bad magic number 0x68656c6c"));
  }
  SECTION("truncated data says how many bytes were expected and found") {
    images.resize(images.size() - 8);
    write_file_bytes(path, images);
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::data_loss);
    CHECK(contains(r.error().message(), "'" + path + "'"));
    CHECK(contains(r.error().message(), "truncated"));
    CHECK(contains(r.error().message(), "need 18 bytes of data, found 10"));
  }
  SECTION("a truncated header is refused") {
    images.resize(9);
    write_file_bytes(path, images);
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "'" + path + "'"));
    CHECK(contains(r.error().message(), "expected 16 bytes of header, found 9"));
  }
  SECTION("bytes after the data are refused") {
    images.push_back(0);
    write_file_bytes(path, images);
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "'" + path + "'"));
    CHECK(contains(r.error().message(), "1 unexpected bytes"));
  }
  SECTION("images and labels of different counts name both files") {
    write_split(dir.path(), "train", 5, true);
    write_file_bytes(dir.path() + "/train-labels-idx1-ubyte.gz", gzipped(idx_labels({1, 2, 3, 4})));
    auto r = load_fashion_mnist(dir.path(), "train");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::data_loss);
    CHECK(contains(r.error().message(), "train-images-idx3-ubyte.gz"));
    CHECK(contains(r.error().message(), "train-labels-idx1-ubyte.gz"));
    CHECK(contains(r.error().message(), "5 images but 4 labels"));
  }
  SECTION("a label outside 0..9 is refused") {
    write_split(dir.path(), "t10k", 3, false);
    write_file_bytes(dir.path() + "/t10k-labels-idx1-ubyte", idx_labels({1, 12, 3}));
    auto r = load_fashion_mnist(dir.path(), "t10k");
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "t10k-labels-idx1-ubyte'"));
    CHECK(contains(r.error().message(), "label 12 of example 1"));
  }
  SECTION("a corrupted gzip stream is refused") {
    auto gz = gzipped(images);
    gz[gz.size() / 2] ^= 0x5a;
    write_file_bytes(path, gz);
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == errc::data_loss);
    CHECK(contains(r.error().message(), "'" + path + "'"));
    CHECK(contains(r.error().message(), "corrupt gzip data"));
  }
  SECTION("a gzip stream truncated anywhere is refused, never crashes") {
    auto gz = gzipped(images);
    for (std::size_t length = 2; length < gz.size(); ++length) {
      CAPTURE(length);
      write_file_bytes(path, std::vector<std::uint8_t>(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(length)));
      auto r = read_idx_images(path);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code() == errc::data_loss);
      CHECK(contains(r.error().message(), "'" + path + "'"));
    }
  }
  SECTION("garbage after a gzip stream is refused") {
    auto gz = gzipped(images);
    gz.push_back(0);
    gz.push_back(1);
    write_file_bytes(path, gz);
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "garbage after the compressed stream"));
  }
  SECTION("a directory is not an idx file") {
    auto r = read_idx_labels(dir.path());
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.error().message(), "'" + dir.path() + "'"));
  }
}

TEST_CASE("concatenated gzip members read as one file") {
  temp_dir dir;
  auto raw = idx_images(4, 2, 3, sample_pixel);
  std::vector<std::uint8_t> first(raw.begin(), raw.begin() + 20), second(raw.begin() + 20, raw.end());
  auto gz = gzipped(first);
  auto tail = gzipped(second);
  gz.insert(gz.end(), tail.begin(), tail.end());
  write_file_bytes(dir.path() + "/x.gz", gz);
  auto r = read_idx_images(dir.path() + "/x.gz");
  REQUIRE(r.ok());
  CHECK(r->shape() == tensor_shape{4, 6});
}

TEST_CASE("the real Fashion-MNIST files have 60000 and 10000 examples with pixels in 0..1 and labels 0..9") {
  // `make test` installs the data; its absence is a broken set-up, not a reason to pass.
  struct stat info {};
  INFO(fashion_mnist_default_dir << " is missing: apt-get install dataset-fashion-mnist");
  REQUIRE(::stat(fashion_mnist_default_dir, &info) == 0);
  for (auto [split, n] : {std::pair<const char*, std::int64_t>{"train", 60000}, {"t10k", 10000}}) {
    CAPTURE(split);
    auto data = load_fashion_mnist(fashion_mnist_default_dir, split);
    REQUIRE(data.ok());
    CHECK(data->images.shape() == tensor_shape{n, 784});
    CHECK(data->labels.shape() == tensor_shape{n});
    auto* pixels = data->images.data<float>();
    auto [low, high] = std::minmax_element(pixels, pixels + data->images.num_elements());
    CHECK(*low == 0.f);
    CHECK(*high == 1.f);
    std::vector<std::int64_t> per_class(10, 0);
    for (auto label : data->labels.to_vector<std::int64_t>()) {
      REQUIRE(label >= 0);
      REQUIRE(label <= 9);
      ++per_class[static_cast<std::size_t>(label)];
    }
    // Fashion-MNIST is balanced: n / 10 examples of every class.
    for (auto count : per_class)
      CHECK(count == n / 10);
  }
}

TEST_CASE("a batch iterator covers every example once per epoch and counts epochs") {
  auto data = indexed_dataset(10);
  batch_options options;
  options.batch_size = 3;
  options.seed = 7;
  auto it = batch_iterator::create(data, options);
  REQUIRE(it.ok());
  CHECK(it->batches_per_epoch() == 4);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    CHECK(it->epoch() == epoch);
    std::vector<std::int64_t> seen;
    std::vector<std::int64_t> sizes;
    for (int k = 0; k < 4; ++k) {
      auto& b = it->next();
      CHECK(b.epoch == epoch);
      sizes.push_back(b.size);
      CHECK(b.images.shape() == tensor_shape{b.size, 2});
      CHECK(b.one_hot.shape() == tensor_shape{b.size, 10});
      CHECK(b.labels.shape() == tensor_shape{b.size});
      for (auto id : example_ids(b))
        seen.push_back(id);
      // Labels and one-hot rows belong to the copied rows.
      for (std::int64_t i = 0; i < b.size; ++i) {
        auto id = static_cast<std::int64_t>(b.images.data<float>()[2 * i]);
        CHECK(b.images.data<float>()[2 * i + 1] == -static_cast<float>(id));
        CHECK(b.labels.data<std::int64_t>()[i] == id % 10);
        for (std::int64_t c = 0; c < 10; ++c)
          CHECK(b.one_hot.data<float>()[i * 10 + c] == (c == id % 10 ? 1.f : 0.f));
      }
    }
    CHECK(sizes == std::vector<std::int64_t>{3, 3, 3, 1});
    std::sort(seen.begin(), seen.end());
    std::vector<std::int64_t> all(10);
    std::iota(all.begin(), all.end(), 0);
    CHECK(seen == all);
  }
  CHECK(it->epoch() == 3);
  CHECK(it->batches_yielded() == 12);
}

TEST_CASE("a batch iterator shuffles reproducibly with its seed and differently each epoch") {
  auto data = indexed_dataset(50);
  auto sequence = [&](std::uint64_t seed, bool shuffle) {
    batch_options options;
    options.batch_size = 10;
    options.seed = seed;
    options.shuffle = shuffle;
    auto it = batch_iterator::create(data, options);
    REQUIRE(it.ok());
    std::vector<std::vector<std::int64_t>> epochs(2);
    for (auto& epoch : epochs)
      for (int k = 0; k < 5; ++k)
        for (auto id : example_ids(it->next()))
          epoch.push_back(id);
    return epochs;
  };
  auto a = sequence(42, true);
  auto b = sequence(42, true);
  auto c = sequence(43, true);
  auto ordered = sequence(42, false);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a[0] != a[1]);
  std::vector<std::int64_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  CHECK(ordered[0] == all);
  CHECK(ordered[1] == all);
  CHECK(a[0] != all);
}

TEST_CASE("with drop_last a batch iterator yields only full batches") {
  auto data = indexed_dataset(10);
  batch_options options;
  options.batch_size = 4;
  options.drop_last = true;
  auto it = batch_iterator::create(data, options);
  REQUIRE(it.ok());
  CHECK(it->batches_per_epoch() == 2);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::int64_t> seen;
    for (int k = 0; k < 2; ++k) {
      auto& b = it->next();
      CHECK(b.size == 4);
      CHECK(b.epoch == epoch);
      for (auto id : example_ids(b))
        CHECK(seen.insert(id).second);
    }
    CHECK(seen.size() == 8);
    CHECK(it->epoch() == epoch + 1);
  }
}

TEST_CASE("replicas of a batch iterator share out each global batch of one process at replicas x batch_size") {
  auto data = indexed_dataset(50);
  batch_options whole;
  whole.batch_size = 12;
  whole.seed = 5;
  whole.drop_last = true;
  auto one = batch_iterator::create(data, whole);
  REQUIRE(one.ok());
  std::vector<batch_iterator> replicas;
  for (std::int64_t k = 0; k < 3; ++k) {
    auto share = whole;
    share.batch_size = 4;
    share.replicas = 3;
    share.replica = k;
    auto it = batch_iterator::create(data, share);
    REQUIRE(it.ok());
    CHECK(it->batches_per_epoch() == one->batches_per_epoch());
    replicas.push_back(std::move(*it));
  }
  CHECK(one->batches_per_epoch() == 4);
  // Two epochs, the second reshuffled alike: replica k takes positions k, k + 3, ... of each.
  for (int step = 0; step < 8; ++step) {
    auto global = example_ids(one->next());
    for (std::size_t k = 0; k < replicas.size(); ++k) {
      auto& b = replicas[k].next();
      CHECK(b.size == 4);
      std::vector<std::int64_t> expected;
      for (std::size_t i = k; i < global.size(); i += 3)
        expected.push_back(global[i]);
      CHECK(example_ids(b) == expected);
    }
  }
  CHECK(replicas[2].epoch() == 2);
  // A replica that does not exist, or too few examples for one global batch, are refused.
  auto missing = whole;
  missing.replicas = 3;
  missing.replica = 3;
  CHECK_FALSE(batch_iterator::create(data, missing).ok());
  auto too_few = whole;
  too_few.batch_size = 20;
  too_few.replicas = 3;
  CHECK_FALSE(batch_iterator::create(data, too_few).ok());
}

TEST_CASE("a batch iterator sought to batch k yields what a fresh one yields after k batches, forward and back") {
  auto data = indexed_dataset(50);
  batch_options options;
  options.batch_size = 4;
  options.seed = 9;
  options.drop_last = true;
  options.replicas = 2;
  options.replica = 1;
  // 6 batches an epoch: 20 reaches into the fourth epoch, each shuffled anew.
  std::vector<std::vector<std::int64_t>> sequence;
  auto fresh = batch_iterator::create(data, options);
  REQUIRE(fresh.ok());
  for (int k = 0; k < 24; ++k)
    sequence.push_back(example_ids(fresh->next()));
  auto it = batch_iterator::create(data, options);
  REQUIRE(it.ok());
  for (std::int64_t k : {20, 3, 3, 0, 17, 23}) {
    it->seek(k);
    CHECK(it->batches_yielded() == k);
    CHECK(it->epoch() == k / 6);
    CHECK(example_ids(it->next()) == sequence[static_cast<std::size_t>(k)]);
  }
}

TEST_CASE("a batch iterator reuses its buffers unless a batch is still held") {
  auto data = indexed_dataset(12);
  batch_options options;
  options.batch_size = 4;
  options.shuffle = false;
  auto it = batch_iterator::create(data, options);
  REQUIRE(it.ok());
  auto* first = it->next().images.raw_data();
  // Nobody holds the first batch any more: the second lands in the same memory.
  CHECK(it->next().images.raw_data() == first);
  batch held = it->next();
  auto held_ids = example_ids(held);
  CHECK(held_ids == std::vector<std::int64_t>{8, 9, 10, 11});
  auto& next = it->next();
  CHECK(next.images.raw_data() != held.images.raw_data());
  CHECK(example_ids(next) == std::vector<std::int64_t>{0, 1, 2, 3});
  // The held batch was not overwritten.
  CHECK(example_ids(held) == held_ids);
}

TEST_CASE("a batch iterator refuses bad options and bad datasets") {
  auto data = indexed_dataset(5);
  batch_options options;
  options.batch_size = 0;
  auto zero = batch_iterator::create(data, options);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.error().code() == errc::invalid_argument);
  CHECK(contains(zero.error().message(), "batch size 0"));

  options.batch_size = 6;
  options.drop_last = true;
  auto too_few = batch_iterator::create(data, options);
  REQUIRE_FALSE(too_few.ok());
  CHECK(contains(too_few.error().message(), "5 examples make no batch of 6"));

  options = batch_options{};
  options.num_classes = 4;
  auto label_range = batch_iterator::create(data, options);
  REQUIRE_FALSE(label_range.ok());
  CHECK(contains(label_range.error().message(), "label 4 of example 4 is outside 0..3"));

  dataset mismatched = data;
  mismatched.labels = tensor::from_vector<std::int64_t>({1, 2});
  auto counts = batch_iterator::create(mismatched, batch_options{});
  REQUIRE_FALSE(counts.ok());
  CHECK(contains(counts.error().message(), "5 images but 2 labels"));
}

TEST_CASE("a batch iterator accepts int32 labels") {
  auto data = indexed_dataset(6);
  data.labels = tensor::from_vector<std::int32_t>({0, 1, 2, 3, 4, 5});
  batch_options options;
  options.batch_size = 6;
  options.shuffle = false;
  auto it = batch_iterator::create(data, options);
  REQUIRE(it.ok());
  CHECK(it->next().labels.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5});
}
