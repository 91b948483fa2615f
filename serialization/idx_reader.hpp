#pragma once
/// MNIST-style idx files (Fashion-MNIST) as tensors, and a shuffling mini-batch iterator.
///   auto train = load_fashion_mnist("/usr/share/datasets/fashion-mnist", "train");
///   batch_options options;  options.batch_size = 100;  options.seed = 42;
///   auto it = batch_iterator::create(*train, options);
///   const batch& b = it->next();   // b.images [100,784] float32, b.one_hot [100,10] float32
///
/// The idx format (http://yann.lecun.com/exdb/mnist/): a big-endian magic number 0x000008NN
/// (0x08: unsigned bytes; NN: the number of dimensions), NN big-endian uint32 dimensions, then
/// the bytes row-major. Files may be gzip-compressed (recognised by their first two bytes, not by
/// their name) or raw. Readers treat the bytes as untrusted: every error is a value whose
/// message names the file (errc::not_found for a missing file, errc::data_loss for a bad magic
/// number, truncated or trailing data, a corrupt gzip stream, or labels that do not match the
/// images). All functions are reentrant.

#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace actorflow {

/// Magic number of an idx file of unsigned-byte images: [n, rows, cols].
inline constexpr std::uint32_t idx_images_magic = 0x00000803;
/// Magic number of an idx file of unsigned-byte labels: [n].
inline constexpr std::uint32_t idx_labels_magic = 0x00000801;

/// Reads an idx3 unsigned-byte image file as float32 [n, rows*cols], each pixel divided by 255
/// (so values lie in [0, 1]).
result<tensor> read_idx_images(const std::string& path);

/// Reads an idx1 unsigned-byte label file as int64 [n] (the dtype ArgMax produces, so labels
/// compare directly with predictions).
result<tensor> read_idx_labels(const std::string& path);

/// Examples and their labels: images float32 [n, features], labels int64 [n]. The tensors are
/// shared, not copied, when a dataset is copied.
struct dataset {
  tensor images;
  tensor labels;

  /// Number of examples (n); 0 for an empty dataset.
  std::int64_t size() const { return labels.is_initialized() ? labels.shape().dim(0) : 0; }
  /// Features per example (rows*cols: 784 for Fashion-MNIST).
  std::int64_t features() const { return images.is_initialized() ? images.shape().dim(1) : 0; }
};

/// The directory where Debian's dataset-fashion-mnist package installs the files.
inline constexpr const char* fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";

/// Loads split "train" (60000 examples) or "t10k" (10000) of Fashion-MNIST from `dir`:
/// `<split>-images-idx3-ubyte.gz` and `<split>-labels-idx1-ubyte.gz`, or the same names without
/// ".gz" (uncompressed). Checks that both files hold the same number of examples and that every
/// label is in 0..9.
result<dataset> load_fashion_mnist(const std::string& dir, const std::string& split);

/// How a batch_iterator walks a dataset.
struct batch_options {
  /// Examples per batch; at least 1.
  std::int64_t batch_size = 32;
  /// Seed of the std::mt19937_64 that shuffles; equal seeds give equal batch sequences on every
  /// platform (the shuffle does not use the library's distributions).
  std::uint64_t seed = 0;
  /// Visit the examples in a new random order every epoch; false keeps the file order.
  bool shuffle = true;
  /// Skip the last, smaller batch of an epoch instead of yielding it.
  bool drop_last = false;
  /// Length of the one-hot label vectors; every label must lie in 0..num_classes-1.
  std::int64_t num_classes = 10;
  /// Data parallel over `replicas` iterators that share one order (the same seed): each walks
  /// the order in global batches of batch_size * replicas and takes its share of each, the
  /// examples at positions replica, replica + replicas, ... So replica k of N at batch B sees
  /// exactly the rows one iterator at batch N * B puts in the same batch. 1: the whole order.
  std::int64_t replicas = 1;
  /// This iterator's share, 0 .. replicas - 1.
  std::int64_t replica = 0;
};

/// One mini-batch. The tensors' buffers belong to the iterator's pool: the iterator reuses a
/// buffer for a later batch only when nobody else holds a tensor on it any more, so a batch
/// (or a tensor copied out of it) stays valid for as long as it is held.
struct batch {
  /// float32 [b, features].
  tensor images;
  /// float32 [b, num_classes]: 1 at each example's label, 0 elsewhere.
  tensor one_hot;
  /// int64 [b].
  tensor labels;
  /// The epoch this batch belongs to (0 for the first pass over the data).
  std::int64_t epoch = 0;
  /// Number of examples b (batch_size, or fewer for the last batch of an epoch).
  std::int64_t size = 0;
};

/// An endless stream of mini-batches over a dataset, epoch after epoch. Each epoch visits every
/// example exactly once (the last batch may be smaller unless drop_last). Rows are copied into
/// a small pool of batch buffers that are reused, so steady-state batches allocate nothing.
/// Not thread-safe: one thread calls next() at a time. The dataset's tensors are shared, not
/// copied, and must not be modified while the iterator lives.
class batch_iterator {
public:
  /// Checks the dataset (images rank 2, labels int64 or int32 rank 1 with as many rows, labels
  /// in 0..num_classes-1) and the options (batch_size >= 1, num_classes >= 1; with drop_last
  /// the dataset must hold at least one full global batch, batch_size * replicas; replica in
  /// 0..replicas-1); invalid_argument otherwise.
  static result<batch_iterator> create(dataset data, batch_options options);

  /// The next batch; the reference stays valid until the next call of next(). Crossing an
  /// epoch boundary reshuffles (when shuffling) and increments epoch().
  const batch& next();

  /// Positions the iterator so that next() yields batch `index` of its sequence (counted from
  /// the first, over every epoch), the batch a fresh iterator with the same options yields after
  /// `index` calls: a resumed or restored run takes the batches an uninterrupted one takes. Going
  /// forward copies no rows; going back starts the sequence again from the seed.
  void seek(std::int64_t index);

  /// The epoch the next batch will come from (0 before the first epoch is finished).
  std::int64_t epoch() const { return epoch_; }
  /// Batches yielded per epoch.
  std::int64_t batches_per_epoch() const;
  /// Batches yielded so far, over all epochs.
  std::int64_t batches_yielded() const { return yielded_; }
  const batch_options& options() const { return options_; }
  const dataset& data() const { return data_; }

private:
  batch_iterator(dataset data, batch_options options, std::vector<std::int64_t> labels);

  /// Buffers for one batch of batch_size examples.
  struct slot {
    std::shared_ptr<buffer> images, one_hot, labels;
    bool free() const;
  };
  slot& acquire_slot();
  void start_epoch();
  /// Moves position_ past a global batch of `global_batch` examples, starting the next epoch
  /// when the current one is done.
  void move_past(std::int64_t global_batch);

  dataset data_;
  batch_options options_;
  /// The labels as int64, validated once.
  std::vector<std::int64_t> labels_;
  std::mt19937_64 rng_;
  /// The order of the current epoch.
  std::vector<std::int64_t> order_;
  /// Position of the next example in order_.
  std::int64_t position_ = 0;
  std::int64_t epoch_ = 0;
  std::int64_t yielded_ = 0;
  std::vector<slot> pool_;
  batch current_;
};

} // namespace actorflow
