// libFuzzer: the checkpoint loader (serialization/checkpoint.hpp) on a file of untrusted bytes:
// checked data or an error, never a crash, a leak or undefined behaviour. The file lives in
// memory (memfd), read through /proc/self/fd like any path.
#include "serialization/checkpoint.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("checkpoint", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))
    return 0;
  static_cast<void>(actorflow::verify_checkpoint(path));
  static_cast<void>(actorflow::read_checkpoint(path));
  return 0;
}
