#include "serialization/checkpoint.hpp"

#include "serialization/file_io.hpp"

#include "serialization/capnp_codec.hpp"
#include "serialization/checkpoint.capnp.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace actorflow {

namespace {

using namespace file_io;

using namespace actorflow::serialization;

constexpr std::size_t header_bytes = 32;
constexpr std::array<std::uint8_t, 8> file_magic{0x89, 'A', 'F', 'C', 'K', 'P', 'T', '\n'};
constexpr const char* file_prefix = "ckpt-";
constexpr const char* file_suffix = ".afckpt";
constexpr const char* index_header = "actorflow checkpoint index 1";

status corrupt(std::string message) { return make_error(errc::data_loss, std::move(message)); }

std::string quoted_path(const std::string& path) { return "'" + path + "'"; }

std::string hex(std::uint64_t value, int digits) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return text;
}

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t size) {
  return static_cast<std::uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), size));
}

struct file_header {
  std::uint32_t version = checkpoint_format_version;
  std::uint32_t flags = 0;
  std::uint64_t payload_bytes = 0;
  std::uint32_t payload_crc = 0;
};

std::array<std::uint8_t, header_bytes> encode_header(const file_header& h) {
  std::array<std::uint8_t, header_bytes> out{};
  std::copy(file_magic.begin(), file_magic.end(), out.begin());
  put_le(out.data() + 8, h.version, 4);
  put_le(out.data() + 12, h.flags, 4);
  put_le(out.data() + 16, h.payload_bytes, 8);
  put_le(out.data() + 24, h.payload_crc, 4);
  put_le(out.data() + 28, crc32_update(0, out.data(), 28), 4);
  return out;
}

/// Checks the header in `bytes` (`available` of them, at most header_bytes needed) of a file of
/// `file_size` bytes. Errors carry no file name; callers add it.
result<file_header> decode_header(const std::uint8_t* bytes, std::size_t available,
                                  std::uint64_t file_size) {
  if (available < header_bytes || file_size < header_bytes)
    return corrupt("truncated: " + std::to_string(std::min<std::uint64_t>(available, file_size)) + " bytes, shorter than the " +
                   std::to_string(header_bytes) + "-byte header");
  if (!std::equal(file_magic.begin(), file_magic.end(), bytes))
    return corrupt("not an actorflow checkpoint: bad magic number " + hex(get_le(bytes, 8), 16) +
                   " (little-endian), expected " + hex(get_le(file_magic.data(), 8), 16));
  auto stored = static_cast<std::uint32_t>(get_le(bytes + 28, 4));
  auto computed = crc32_update(0, bytes, 28);
  if (stored != computed)
    return corrupt("header checksum mismatch (stored " + hex(stored, 8) + ", computed " +
                   hex(computed, 8) + "): the header is corrupted");
  file_header h;
  h.version = static_cast<std::uint32_t>(get_le(bytes + 8, 4));
  h.flags = static_cast<std::uint32_t>(get_le(bytes + 12, 4));
  h.payload_bytes = get_le(bytes + 16, 8);
  h.payload_crc = static_cast<std::uint32_t>(get_le(bytes + 24, 4));
  if (h.version == 0)
    return corrupt("format version 0 is not a checkpoint format");
  if (h.version > checkpoint_format_version)
    return make_error(errc::unimplemented,
                      "format version " + std::to_string(h.version) +
                        " was written by a newer actorflow; this build reads up to version " +
                        std::to_string(checkpoint_format_version));
  if (h.flags != 0)
    return make_error(errc::unimplemented, "unknown flags " + hex(h.flags, 8));
  auto after_header = file_size - header_bytes;
  if (after_header < h.payload_bytes)
    return corrupt("truncated: the header announces " + std::to_string(h.payload_bytes) +
                   " payload bytes, the file holds " + std::to_string(after_header));
  if (after_header > h.payload_bytes)
    return corrupt(std::to_string(after_header - h.payload_bytes) +
                   " unexpected bytes after the " + std::to_string(h.payload_bytes) +
                   " payload bytes the header announces");
  return h;
}

status check_payload_crc(const file_header& h, std::uint32_t computed) {
  if (computed != h.payload_crc)
    return corrupt("payload checksum mismatch (stored " + hex(h.payload_crc, 8) + ", computed " +
                   hex(computed, 8) + "): the file is corrupted");
  return {};
}

// --- files ------------------------------------------------------------------------------------

/// Reads up to `size` bytes; fewer only at the end of the file.
result<std::size_t> read_up_to(int fd, std::uint8_t* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    auto n = ::read(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_error("read failed", errno);
    }
    if (n == 0)
      break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

/// Opens a regular file for reading; directories, FIFOs and devices are refused.
result<int> open_regular(const std::string& path, std::uint64_t& size) {
  // O_NONBLOCK: opening a FIFO without a writer must not wait (it is refused below anyway).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return errno_error("cannot open", errno);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    auto s = errno_error("cannot stat", errno);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return make_error(errc::invalid_argument, "not a regular file");
  }
  size = static_cast<std::uint64_t>(info.st_size);
  return fd;
}

/// The header of the open checkpoint file `fd` (of `size` bytes, read from its start), checked.
result<file_header> read_header(int fd, std::uint64_t size) {
  std::array<std::uint8_t, header_bytes> bytes{};
  auto got = read_up_to(fd, bytes.data(), bytes.size());
  if (!got)
    return got.error();
  return decode_header(bytes.data(), *got, size);
}

/// Streams a message into a file, counting its bytes and their CRC-32. kj::OutputStream cannot
/// return an error, so the first one is kept and later writes are skipped.
class checksum_output_stream final : public kj::OutputStream {
public:
  checksum_output_stream(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
  void write(const void* buffer, size_t size) override {
    if (!error_.ok())
      return;
    crc_ = crc32_update(crc_, buffer, size);
    bytes_ += size;
    error_ = write_all(fd_, static_cast<const std::uint8_t*>(buffer), size, name_);
  }
  const status& error() const { return error_; }
  std::uint32_t crc() const { return crc_; }
  std::uint64_t bytes() const { return bytes_; }

private:
  int fd_;
  std::string name_;
  status error_;
  std::uint32_t crc_ = 0;
  std::uint64_t bytes_ = 0;
};

capnp::Text::Reader text(const std::string& s) { return capnp::Text::Reader{s.data(), s.size()}; }

/// A name for an error message: quoted and cut short.
std::string quoted_name(const std::string& s) {
  constexpr std::size_t max_shown = 80;
  if (s.size() <= max_shown)
    return "'" + s + "'";
  return "'" + s.substr(0, max_shown) + "...' (" + std::to_string(s.size()) + " bytes)";
}

status check_entries(const checkpoint_entries& entries) {
  for (auto& [name, value] : entries) {
    if (name.empty())
      return make_error(errc::invalid_argument, "an entry has an empty name");
    if (!value.is_initialized())
      return make_error(errc::invalid_argument, "entry " + quoted_name(name) + " has no value");
    if (value.bytes() > max_blob_bytes)
      return make_error(errc::invalid_argument,
                        "entry " + quoted_name(name) + " (" + to_string(value.type()) +
                          value.shape().to_string() + ") has " + std::to_string(value.bytes()) +
                          " bytes; one tensor holds at most " + std::to_string(max_blob_bytes));
  }
  return {};
}

status encode_checkpoint(std::int64_t step, const checkpoint_entries& entries,
                         schema::Checkpoint::Builder out, capnp::Orphanage orphanage) {
  out.setGlobalStep(step);
  auto list = out.initEntries(static_cast<unsigned>(entries.size()));
  unsigned k = 0;
  for (auto& [name, value] : entries) {
    auto entry = list[k++];
    entry.setName(text(name));
    // Large values are written from their own buffers: saving a shard of gigabytes copies
    // nothing.
    AF_RETURN_IF_ERROR(encode_tensor_in_place(value, entry.initTensor(), orphanage)
                         .with_context("entry " + quoted_name(name)));
  }
  return {};
}

/// A first segment that holds the whole message, so that it is written as one block.
unsigned first_segment_words(const checkpoint_entries& entries) {
  std::uint64_t bytes = 1024;
  for (auto& [name, value] : entries)
    bytes += 128 + name.size() + 8 * value.shape().dims().size() +
             (encodes_in_place(value) ? 0 : value.bytes());
  constexpr std::uint64_t max_segment_words = (std::uint64_t{1} << 29) - 1;
  return static_cast<unsigned>(std::min(bytes / sizeof(capnp::word) + 1, max_segment_words));
}

status decode_checkpoint(schema::Checkpoint::Reader in, checkpoint_data& out) {
  out.step = in.getGlobalStep();
  auto list = in.getEntries();
  for (unsigned i = 0; i < list.size(); ++i) {
    auto entry = list[i];
    auto name_reader = entry.getName();
    std::string name{name_reader.cStr(), name_reader.size()};
    auto context = "entry " + std::to_string(i);
    if (name.empty())
      return corrupt(context + " has an empty name");
    context += " (" + quoted_name(name) + ")";
    auto value = decode_tensor(entry.getTensor());
    if (!value)
      return value.error().with_context(context);
    if (!value->is_initialized())
      return corrupt(context + " has no value");
    if (!out.entries.emplace(std::move(name), std::move(*value)).second)
      return corrupt(context + ": the name appears twice");
  }
  return {};
}

// --- the manager's files ------------------------------------------------------------------------

/// The step in a name "ckpt-<step>.afckpt"; nullopt for any other name.
std::optional<std::int64_t> step_of(const std::string& name) {
  std::string prefix = file_prefix, suffix = file_suffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size() - suffix.size();
  std::int64_t step = 0;
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  auto [end, error] = std::from_chars(first, last, step);
  if (error != std::errc{} || end != last)
    return std::nullopt;
  return step;
}

std::string name_for_step(std::int64_t step) {
  return file_prefix + std::to_string(step) + file_suffix;
}

/// The names listed by the index file in `dir`, or nullopt when it is missing or malformed.
std::optional<std::vector<std::string>> read_index(const std::string& dir) {
  auto path = dir + "/" + checkpoint_manager::index_file_name;
  std::uint64_t size = 0;
  auto fd = open_regular(path, size);
  if (!fd)
    return std::nullopt;
  fd_guard guard{*fd};
  // An index lists a handful of names; anything large is not an index.
  if (size > (std::uint64_t{1} << 24))
    return std::nullopt;
  std::string contents(static_cast<std::size_t>(size), '\0');
  auto n = read_up_to(*fd, reinterpret_cast<std::uint8_t*>(contents.data()), contents.size());
  if (!n || *n != contents.size())
    return std::nullopt;
  std::vector<std::string> names;
  std::size_t pos = 0;
  bool header_seen = false;
  while (pos < contents.size()) {
    auto end = contents.find('\n', pos);
    // Every line, the last one included, ends with a newline: a missing one means truncation.
    if (end == std::string::npos)
      return std::nullopt;
    auto line = contents.substr(pos, end - pos);
    pos = end + 1;
    if (!header_seen) {
      if (line != index_header)
        return std::nullopt;
      header_seen = true;
      continue;
    }
    if (!step_of(line))
      return std::nullopt;
    names.push_back(std::move(line));
  }
  if (!header_seen)
    return std::nullopt;
  return names;
}

/// Checkpoint file names in `dir`, by step (oldest first); empty when it cannot be read.
std::vector<std::string> scan_directory(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (auto* entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (auto step = step_of(name))
        found.emplace_back(*step, std::move(name));
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (auto& f : found)
    names.push_back(std::move(f.second));
  return names;
}

/// mkdir -p.
status make_directories(const std::string& dir) {
  for (std::size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/')
      continue;
    auto prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return errno_error("cannot create '" + prefix + "'", errno);
  }
  struct stat info {};
  if (::stat(dir.c_str(), &info) != 0)
    return errno_error("cannot stat", errno);
  if (!S_ISDIR(info.st_mode))
    return make_error(errc::failed_precondition, "not a directory");
  return {};
}

} // namespace

status write_checkpoint(const std::string& path, std::int64_t step,
                        const checkpoint_entries& entries) {
  auto context = "cannot write checkpoint " + quoted_path(path);
  AF_RETURN_IF_ERROR(check_entries(entries).with_context(context));
  try {
    capnp::MallocMessageBuilder message{first_segment_words(entries)};
    AF_RETURN_IF_ERROR(
      encode_checkpoint(step, entries, message.initRoot<schema::Checkpoint>(), message.getOrphanage())
        .with_context(context));
    auto s = write_file_atomically(path, [&](int fd, const std::string& name) -> status {
      // The header goes in last, once the payload's length and checksum are known.
      std::array<std::uint8_t, header_bytes> placeholder{};
      AF_RETURN_IF_ERROR(write_all(fd, placeholder.data(), placeholder.size(), name));
      checksum_output_stream out{fd, name};
      capnp::writeMessage(out, message);
      AF_RETURN_IF_ERROR(out.error());
      file_header h;
      h.payload_bytes = out.bytes();
      h.payload_crc = out.crc();
      auto header = encode_header(h);
      return pwrite_all(fd, header.data(), header.size(), 0, name);
    });
    return s.with_context(context);
  } catch (const kj::Exception& e) {
    return make_error(errc::invalid_argument, context + ": " + e.getDescription().cStr());
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, context + ": out of memory while encoding");
  }
}

result<checkpoint_data> read_checkpoint(const std::string& path) {
  auto context = "checkpoint " + quoted_path(path);
  std::uint64_t size = 0;
  auto fd = open_regular(path, size);
  if (!fd)
    return fd.error().with_context(context);
  fd_guard guard{*fd};
  auto header = read_header(*fd, size);
  if (!header)
    return header.error().with_context(context);
  checkpoint_data data;
  data.format_version = header->version;
  try {
    // The length was checked against the file size, so this allocation is backed by real bytes.
    // Words, so that Cap'n Proto can read the message in place.
    auto words = (header->payload_bytes + sizeof(capnp::word) - 1) / sizeof(capnp::word);
    std::vector<capnp::word> payload(static_cast<std::size_t>(words));
    auto* bytes = reinterpret_cast<std::uint8_t*>(payload.data());
    auto payload_size = static_cast<std::size_t>(header->payload_bytes);
    auto n = read_up_to(*fd, bytes, payload_size);
    if (!n)
      return n.error().with_context(context);
    if (*n != payload_size)
      return corrupt(context + ": the file shrank while being read");
    AF_RETURN_IF_ERROR(check_payload_crc(*header, crc32_update(0, bytes, payload_size)).with_context(context));
    auto s = read_message<schema::Checkpoint>(bytes, payload_size, "payload",
                                              [&](schema::Checkpoint::Reader root) {
                                                return decode_checkpoint(root, data);
                                              });
    AF_RETURN_IF_ERROR(s.with_context(context));
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, context + ": out of memory while reading");
  }
  return data;
}

status verify_checkpoint(const std::string& path) {
  auto context = "checkpoint " + quoted_path(path);
  std::uint64_t size = 0;
  auto fd = open_regular(path, size);
  if (!fd)
    return fd.error().with_context(context);
  fd_guard guard{*fd};
  auto header = read_header(*fd, size);
  if (!header)
    return header.error().with_context(context);
  std::vector<std::uint8_t> block(std::size_t{1} << 20);
  std::uint32_t crc = 0;
  std::uint64_t remaining = header->payload_bytes;
  while (remaining > 0) {
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(remaining, block.size()));
    auto n = read_up_to(*fd, block.data(), want);
    if (!n)
      return n.error().with_context(context);
    if (*n != want)
      return corrupt(context + ": the file shrank while being read");
    crc = crc32_update(crc, block.data(), want);
    remaining -= want;
  }
  return check_payload_crc(*header, crc).with_context(context);
}

// --- sharded checkpoints ----------------------------------------------------------------------

std::string checkpoint_shard_path(const std::string& directory, std::int64_t step, int shard) {
  return directory + "/" + name_for_step(step) + ".shard-" + std::to_string(shard);
}

namespace {

/// The payload CRC a checkpoint file's header records, the header checked.
result<std::uint32_t> recorded_payload_crc(const std::string& path) {
  auto context = "checkpoint " + quoted_path(path);
  std::uint64_t size = 0;
  auto fd = open_regular(path, size);
  if (!fd)
    return fd.error().with_context(context);
  fd_guard guard{*fd};
  auto header = read_header(*fd, size);
  if (!header)
    return header.error().with_context(context);
  return header->payload_crc;
}

/// A sharded checkpoint's shard CRCs from its own file at `path`; nothing when the file holds
/// none (an ordinary checkpoint). Only read when a shard file is there: an ordinary one holds
/// the whole model.
result<std::optional<std::vector<std::uint32_t>>> shard_crcs_of(const std::string& path) {
  if (::access((path + ".shard-0").c_str(), F_OK) != 0)
    return std::optional<std::vector<std::uint32_t>>{};
  auto data = read_checkpoint(path);
  if (!data)
    return data.error();
  auto entry = data->entries.find(checkpoint_shards_entry);
  if (entry == data->entries.end())
    return std::optional<std::vector<std::uint32_t>>{};
  auto& crcs = entry->second;
  if (crcs.type() != dtype::int64 || crcs.shape().rank() != 1)
    return corrupt("checkpoint " + quoted_path(path) + ": its " + checkpoint_shards_entry +
                   " entry is not an int64 vector");
  std::vector<std::uint32_t> out;
  for (std::int64_t k = 0; k < crcs.num_elements(); ++k)
    out.push_back(static_cast<std::uint32_t>(crcs.data<std::int64_t>()[k]));
  return std::optional<std::vector<std::uint32_t>>{std::move(out)};
}

} // namespace

result<std::uint32_t> write_checkpoint_shard(const std::string& directory, std::int64_t step,
                                             int shard, const checkpoint_entries& entries) {
  AF_RETURN_IF_ERROR(make_directories(directory).with_context(
    "cannot use checkpoint directory " + quoted_path(directory)));
  auto path = checkpoint_shard_path(directory, step, shard);
  AF_RETURN_IF_ERROR(write_checkpoint(path, step, entries));
  return recorded_payload_crc(path);
}

result<checkpoint_data> read_checkpoint_shard(const std::string& directory, std::int64_t step,
                                              int shard, std::uint32_t expected_crc) {
  auto path = checkpoint_shard_path(directory, step, shard);
  auto recorded = recorded_payload_crc(path);
  if (!recorded)
    return recorded.error();
  if (*recorded != expected_crc)
    return corrupt("checkpoint shard " + quoted_path(path) + " is not the one its checkpoint " +
                   "recorded (payload checksum " + hex(*recorded, 8) + ", recorded " +
                   hex(expected_crc, 8) + ")");
  return read_checkpoint(path);
}

// --- checkpoint_manager -----------------------------------------------------------------------

checkpoint_manager::checkpoint_manager(std::string directory, int keep_last_n)
  : directory_(std::move(directory)), keep_last_n_(std::max(keep_last_n, 0)) {
  // "dir/" and "dir" name the same directory; keep paths free of "//".
  while (directory_.size() > 1 && directory_.back() == '/')
    directory_.pop_back();
  if (directory_.empty())
    directory_ = ".";
}

std::string checkpoint_manager::path_for_step(std::int64_t step) const {
  return directory_ + "/" + name_for_step(step);
}

std::vector<std::string> checkpoint_manager::committed_names() const {
  if (auto names = read_index(directory_))
    return std::move(*names);
  return scan_directory(directory_);
}

std::vector<std::string> checkpoint_manager::checkpoints() const {
  std::vector<std::string> paths;
  for (auto& name : committed_names())
    paths.push_back(directory_ + "/" + name);
  return paths;
}

result<std::string> checkpoint_manager::save(std::int64_t step, const checkpoint_entries& entries) {
  if (step < 0)
    return make_error(errc::invalid_argument, "checkpoint directory " + quoted_path(directory_) +
                                                ": step " + std::to_string(step) + " is negative");
  AF_RETURN_IF_ERROR(make_directories(directory_).with_context(
    "cannot use checkpoint directory " + quoted_path(directory_)));
  // A saver killed mid-write left its temporary behind; nothing will ever rename it.
  remove_stale_temporaries(directory_);
  auto names = committed_names();
  auto name = name_for_step(step);
  auto path = directory_ + "/" + name;
  bool was_committed = std::find(names.begin(), names.end(), name) != names.end();
  AF_RETURN_IF_ERROR(write_checkpoint(path, step, entries));

  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  names.push_back(name);
  std::vector<std::string> expired;
  if (keep_last_n_ > 0 && names.size() > static_cast<std::size_t>(keep_last_n_)) {
    auto cut = names.size() - static_cast<std::size_t>(keep_last_n_);
    expired.assign(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(cut));
    names.erase(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(cut));
  }
  std::string index = std::string{index_header} + "\n";
  for (auto& n : names)
    index += n + "\n";
  auto index_path = directory_ + "/" + index_file_name;
  auto s = write_file_atomically(index_path, [&](int fd, const std::string& temp) {
    return write_all(fd, reinterpret_cast<const std::uint8_t*>(index.data()), index.size(), temp);
  });
  if (!s.ok()) {
    // The new file is not committed; do not leave it behind unless it replaced a committed one.
    if (!was_committed)
      ::unlink(path.c_str());
    return s.with_context("cannot write checkpoint index " + quoted_path(index_path));
  }
  // Only now, with the new checkpoint and the index that lists it durable, may old ones go.
  // A file that cannot be deleted is merely left behind: the index no longer lists it.
  for (auto& old : expired) {
    auto expired_path = directory_ + "/" + old;
    ::unlink(expired_path.c_str());
    for (int shard = 0; ::unlink((expired_path + ".shard-" + std::to_string(shard)).c_str()) == 0; ++shard) {
    }
  }
  if (!expired.empty())
    (void)sync_directory(directory_);
  return path;
}

std::optional<std::string> checkpoint_manager::latest() const { return find_latest().path; }

status checkpoint_manager::verify_shards(const std::string& path) {
  auto crcs = shard_crcs_of(path);
  if (!crcs)
    return crcs.error();
  if (!*crcs)
    return {};
  for (std::size_t k = 0; k < (*crcs)->size(); ++k) {
    auto shard = path + ".shard-" + std::to_string(k);
    AF_RETURN_IF_ERROR(verify_checkpoint(shard));
    auto recorded = recorded_payload_crc(shard);
    if (!recorded)
      return recorded.error();
    if (*recorded != (**crcs)[k])
      return corrupt("checkpoint shard " + quoted_path(shard) + " is not the one " +
                     quoted_path(path) + " recorded");
  }
  return {};
}

checkpoint_manager::search checkpoint_manager::find_latest() const {
  search found;
  auto names = committed_names();
  for (auto i = names.rbegin(); i != names.rend(); ++i) {
    auto path = directory_ + "/" + *i;
    auto verified = verify_checkpoint(path);
    if (verified.ok())
      verified = verify_shards(path);
    if (verified.ok()) {
      found.path = path;
      break;
    }
    found.skipped.push_back(std::move(verified));
  }
  return found;
}

} // namespace actorflow
