#pragma once
/// File helpers every writer and reader in serialization/ shares: errno as error values, an
/// fd guard, whole writes, and atomic replacement of a file.
///   AF_RETURN_IF_ERROR(write_file_atomically(path, [&](int fd, const std::string& name) {
///     return write_all(fd, bytes.data(), bytes.size(), name);
///   }));
/// Internal to serialization/ (not installed as an API promise).

#include "graph/status.hpp"

#include <cstdint>
#include <functional>
#include <string>

#include <sys/types.h>

namespace actorflow::file_io {

/// The project error code for an errno value (ENOENT -> not_found, ENOSPC -> resource_exhausted...).
errc errno_code(int error);
/// "<what>: <strerror(error)>" with errno_code(error).
status errno_error(const std::string& what, int error);

/// Closes a file descriptor when it goes out of scope (unless closed before).
class fd_guard {
public:
  explicit fd_guard(int fd) : fd_(fd) {}
  ~fd_guard();
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const { return fd_; }
  /// Closes now and reports the error close() gives (deferred write errors show up here).
  int close();

private:
  int fd_;
};

/// Writes all of `data` (retrying short writes and EINTR); errors name `name`.
status write_all(int fd, const std::uint8_t* data, std::size_t size, const std::string& name);
/// The same at `offset`, without moving the file position.
status pwrite_all(int fd, const std::uint8_t* data, std::size_t size, off_t offset,
                  const std::string& name);

/// Creates `dir` (and its parents) or checks it is a writable directory; an error names it.
status ensure_writable_directory(const std::string& dir);

/// `bytes` (at most 8) of `value`, little-endian, at `out`; and back. The on-disk integers of
/// checkpoints and event files.
void put_le(std::uint8_t* out, std::uint64_t value, int bytes);
std::uint64_t get_le(const std::uint8_t* in, int bytes);

/// "dir" of "dir/file"; "." for a bare name.
std::string directory_of(const std::string& path);

/// Makes a directory's entries (a rename, a new or deleted file) durable. File systems that
/// cannot fsync a directory (EINVAL) are not an error.
status sync_directory(const std::string& dir);

/// Creates a temporary file next to `path`, lets `write_contents(fd, quoted_temp_name)` fill
/// it, fsyncs it, renames it over `path` and fsyncs the directory, so a crash leaves the old
/// file or the new one, never half of one. On any error before the rename the temporary is
/// removed.
status write_file_atomically(const std::string& path,
                             const std::function<status(int fd, const std::string& name)>& write_contents);

/// Deletes the temporaries write_file_atomically left in `dir` when its process was killed
/// (their names carry the writer's process id; a temporary of a live process, this one
/// included, stays). Returns how many it deleted; a directory it cannot read deletes nothing.
std::size_t remove_stale_temporaries(const std::string& dir);

} // namespace actorflow::file_io
