#include "serialization/file_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <dirent.h>
#include <filesystem>
#include <unistd.h>
#include <fcntl.h>
#include <memory>
#include <signal.h>
#include <string>
#include <vector>
#include <unistd.h>

namespace actorflow::file_io {

errc errno_code(int error) {
  switch (error) {
    case ENOENT:
    case ENOTDIR: return errc::not_found;
    case EACCES:
    case EPERM:
    case EROFS:
    case EISDIR:
    case EEXIST: return errc::failed_precondition;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EFBIG: return errc::resource_exhausted;
    case EIO: return errc::data_loss;
    default: return errc::unavailable;
  }
}

status errno_error(const std::string& what, int error) {
  return make_error(errno_code(error), what + ": " + std::strerror(error));
}

fd_guard::~fd_guard() {
  if (fd_ >= 0)
    ::close(fd_);
}

int fd_guard::close() {
  int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

status write_all(int fd, const std::uint8_t* data, std::size_t size, const std::string& name) {
  while (size > 0) {
    auto n = ::write(fd, data, std::min<std::size_t>(size, std::size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_error("write to " + name + " failed", errno);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

status pwrite_all(int fd, const std::uint8_t* data, std::size_t size, off_t offset,
                  const std::string& name) {
  while (size > 0) {
    auto n = ::pwrite(fd, data, size, offset);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_error("write to " + name + " failed", errno);
    }
    data += n;
    size -= static_cast<std::size_t>(n);
    offset += n;
  }
  return {};
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

status sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno_error("cannot open directory '" + dir + "' to fsync it", errno);
  fd_guard guard{fd};
  if (::fsync(fd) != 0 && errno != EINVAL)
    return errno_error("fsync of directory '" + dir + "' failed", errno);
  return {};
}

namespace {

/// A temporary's name: the target's, this marker, the writer's pid, "." and an attempt number.
constexpr const char* temporary_marker = ".tmp.";

} // namespace

std::size_t remove_stale_temporaries(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> listing{::opendir(dir.c_str()), ::closedir};
  if (!listing)
    return 0;
  std::vector<std::string> stale;
  while (auto* entry = ::readdir(listing.get())) {
    std::string name = entry->d_name;
    auto marker = name.rfind(temporary_marker);
    if (marker == std::string::npos)
      continue;
    auto rest = name.substr(marker + std::strlen(temporary_marker));
    auto dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 ||
        rest.find_first_not_of("0123456789.") != std::string::npos)
      continue;
    auto pid = static_cast<pid_t>(std::stol(rest.substr(0, dot)));
    // A live writer (or this process) may still rename it; ESRCH: nobody will.
    if (pid == ::getpid() || pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    stale.push_back(dir + "/" + name);
  }
  std::size_t removed = 0;
  for (auto& path : stale)
    removed += ::unlink(path.c_str()) == 0 ? 1 : 0;
  return removed;
}

status write_file_atomically(const std::string& path,
                             const std::function<status(int fd, const std::string& name)>& write_contents) {
  // Rename is only atomic within one file system: the temporary lives next to the target.
  std::string temp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temp = path + temporary_marker + std::to_string(::getpid()) + "." + std::to_string(attempt);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno != EEXIST)
      return errno_error("cannot create temporary file '" + temp + "'", errno);
  }
  if (fd < 0)
    return make_error(errc::already_exists, "cannot create a temporary file next to it");
  fd_guard file{fd};
  auto fail = [&](status s) {
    if (file.get() >= 0)
      file.close();
    ::unlink(temp.c_str());
    return s;
  };
  status s = write_contents(file.get(), "'" + temp + "'");
  if (!s.ok())
    return fail(s);
  if (::fsync(file.get()) != 0)
    return fail(errno_error("fsync of '" + temp + "' failed", errno));
  if (file.close() != 0)
    return fail(errno_error("close of '" + temp + "' failed", errno));
  if (::rename(temp.c_str(), path.c_str()) != 0)
    return fail(errno_error("rename of '" + temp + "' failed", errno));
  return sync_directory(directory_of(path));
}

status ensure_writable_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return make_error(errc::invalid_argument,
                      "cannot create directory '" + dir + "': " +
                        (ec ? ec.message() : std::string{"a file is in the way"}));
  if (::access(dir.c_str(), W_OK) != 0)
    return make_error(errc::invalid_argument, "directory '" + dir + "' is not writable");
  return {};
}

void put_le(std::uint8_t* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint64_t get_le(const std::uint8_t* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = (value << 8) | in[i];
  return value;
}

} // namespace actorflow::file_io
