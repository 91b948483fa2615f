#pragma once
/// Checkpoints: variable values by name plus the global step, in files that are written
/// atomically and refused when damaged.
///   checkpoint_manager manager{"/tmp/run1", 3};           // keeps the 3 newest
///   auto path = manager.save(step, {{"w", w_value}});     // "/tmp/run1/ckpt-<step>.afckpt"
///   if (auto p = manager.latest()) { auto data = read_checkpoint(*p); ... }
/// This header carries no Cap'n Proto or zlib types.
///
/// File format (version 1), all integers little-endian:
///   bytes  0..7   magic "\x89AFCKPT\n"
///   bytes  8..11  format version (uint32)
///   bytes 12..15  flags, 0 (uint32)
///   bytes 16..23  payload length in bytes (uint64)
///   bytes 24..27  CRC-32 of the payload (uint32)
///   bytes 28..31  CRC-32 of bytes 0..27 (uint32)
///   bytes 32..    payload: one unpacked Cap'n Proto message, schema::Checkpoint
///                 (serialization/checkpoint.capnp)
/// The checksums catch truncation and any bit flip in the header or in tensor bytes before
/// anything is decoded; the decoder still checks every field (errc::data_loss). One tensor
/// holds at most 2^29 - 1 bytes (a Cap'n Proto blob).
///
/// Free functions are reentrant. A checkpoint_manager is used from one thread at a time, and
/// one manager at a time writes to a directory.

#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace actorflow {

/// The checkpoint format version this build writes; it reads 1..this.
inline constexpr std::uint32_t checkpoint_format_version = 1;

/// Variable name -> value. Sorted, so files are written in a deterministic order.
using checkpoint_entries = std::map<std::string, tensor>;

/// The contents of one checkpoint file.
struct checkpoint_data {
  /// The version the file was written with.
  std::uint32_t format_version = checkpoint_format_version;
  /// The training step the values belong to.
  std::int64_t step = 0;
  /// Fresh tensors (from the default host allocator) owned by this struct.
  checkpoint_entries entries;
};

/// Writes a checkpoint to `path` atomically and durably: a temporary file in the same
/// directory is written, fsynced and renamed over `path`, then the directory is fsynced, so
/// that after a crash `path` holds the old file or the new one, never a torn one; on error the
/// temporary is removed. Names must be non-empty; tensors must have a buffer and fit one blob
/// (invalid_argument otherwise). Errors name the file.
status write_checkpoint(const std::string& path, std::int64_t step,
                        const checkpoint_entries& entries);

/// Reads and fully checks a checkpoint file. A missing file is not_found; a truncated,
/// extended or corrupted file (bad magic, bad checksum, bad fields) is data_loss; a file from a
/// newer format is unimplemented. Errors name the file. Never crashes on hostile bytes.
result<checkpoint_data> read_checkpoint(const std::string& path);

/// Checks a checkpoint file's header, length and payload checksum without decoding it, reading
/// it in small blocks (memory use independent of the file size). Same errors as
/// read_checkpoint for the same damage.
status verify_checkpoint(const std::string& path);

// --- sharded checkpoints ---------------------------------------------------------------------
// A model too big for one process is saved where its variables live (TF's Saver(sharded=True)):
// each device holding variables writes its own shard file, and the program that saves writes
// the checkpoint_manager's file of the step last, holding only checkpoint_shards_entry: so the
// checkpoint is committed (listed by the index) only once every shard is durable, and restoring
// checks each shard against the checksum recorded for it.

/// The entry of a sharded checkpoint's own file: int64 [n], shard k's payload CRC-32 at k.
inline constexpr const char* checkpoint_shards_entry = "_shards";

/// Shard `shard` of the checkpoint of `step` in `directory`, beside the manager's file:
/// "dir/ckpt-<step>.afckpt.shard-<shard>".
std::string checkpoint_shard_path(const std::string& directory, std::int64_t step, int shard);

/// Writes shard `shard` of `step` atomically and durably (write_checkpoint), making
/// `directory` first; its payload CRC-32, for the checkpoint's own file.
result<std::uint32_t> write_checkpoint_shard(const std::string& directory, std::int64_t step,
                                             int shard, const checkpoint_entries& entries);

/// Reads shard `shard` of `step` (read_checkpoint's checks), refusing one whose payload CRC-32
/// is not `expected_crc` (a shard of another save, left by a crash) with data_loss naming it.
result<checkpoint_data> read_checkpoint_shard(const std::string& directory, std::int64_t step,
                                              int shard, std::uint32_t expected_crc);

/// Keeps the checkpoints of one training run in one directory: `ckpt-<step>.afckpt` files and
/// an index file `checkpoint_index` that lists the committed checkpoints, oldest first.
/// A checkpoint is committed when the index that lists it has been durably replaced; files the
/// index does not list (left by a crash between the two writes) are ignored while the index is
/// readable. Without a readable index the directory's checkpoint files are used, by step.
class checkpoint_manager {
public:
  /// The index file's name inside the directory.
  static constexpr const char* index_file_name = "checkpoint_index";

  /// Nothing is touched on construction; the directory (and missing parents) is created by the
  /// first save. `keep_last_n` of 0 keeps every checkpoint.
  explicit checkpoint_manager(std::string directory, int keep_last_n = 5);

  /// Writes `dir/ckpt-<step>.afckpt` durably, then the index that lists it last, then deletes
  /// the checkpoints beyond the newest keep_last_n (a crash in between leaves at worst
  /// extra files, never fewer than keep_last_n committed checkpoints). Saving a step again
  /// replaces its file. Returns the new file's path. Errors (a negative step, a directory
  /// that cannot be created or written) name the directory or file; on error the previously
  /// committed checkpoints are unchanged.
  result<std::string> save(std::int64_t step, const checkpoint_entries& entries);

  /// The path of the newest committed checkpoint whose header and checksum verify (a sharded
  /// one's shards too, against the checksums it records), falling back to older ones when
  /// newer ones are damaged or missing; nullopt when there is none. Expired checkpoints go with
  /// their shards.
  std::optional<std::string> latest() const;

  /// What latest() looked at: the newest checkpoint that verifies (if any), and why each newer
  /// one was passed over (each status names its file), newest first. Callers say what was
  /// skipped rather than restoring an older step silently.
  struct search {
    std::optional<std::string> path;
    std::vector<status> skipped;
  };
  search find_latest() const;

  /// The committed checkpoints' paths, oldest first (unverified).
  std::vector<std::string> checkpoints() const;

  /// The path save(step) writes.
  std::string path_for_step(std::int64_t step) const;

  const std::string& directory() const { return directory_; }
  int keep_last_n() const { return keep_last_n_; }

  /// Ok for an ordinary checkpoint; for a sharded one, whether every shard it records is there,
  /// verifies and is the one recorded. Errors name the file.
  static status verify_shards(const std::string& path);

private:
  /// The file names (not paths) listed by the index, oldest first; from a directory scan when
  /// there is no readable index.
  std::vector<std::string> committed_names() const;

  std::string directory_;
  int keep_last_n_;
};

} // namespace actorflow
