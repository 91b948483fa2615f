#include "serialization/graph_picture.hpp"

#include "serialization/file_io.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace actorflow {

using file_io::errno_error;
using file_io::write_all;
using file_io::write_file_atomically;

namespace {

/// The file name's extension without the dot, lower case ("" when none).
std::string extension_of(const std::string& path) {
  auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    return "";
  std::string ext = path.substr(dot + 1);
  for (auto& c : ext)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

status write_text(int fd, const std::string& text, const std::string& name) {
  return write_all(fd, reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), name);
}

/// Runs `dot -T<format> -o <out> <in>`; ok when it exited 0.
status run_dot(const std::string& format, const std::string& in, const std::string& out,
               const std::string& path) {
  std::vector<std::string> args{"dot", "-T" + format, "-o", out, in};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int rc = ::posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ); rc != 0)
    return make_error(errc::failed_precondition,
                      "cannot draw " + path + ": graphviz's dot cannot be started (" +
                        errno_error("posix_spawnp", rc).message() +
                        "); install the graphviz package, or write a .dot file");
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0)
    if (errno != EINTR)
      return errno_error("cannot draw " + path + ": waiting for dot", errno);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
    return make_error(errc::internal, "cannot draw " + path + ": dot -T" + format + " failed" +
                                        (WIFEXITED(wstatus) ? " with exit code " +
                                                                std::to_string(WEXITSTATUS(wstatus))
                                                            : std::string{" on a signal"}) +
                                        (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127
                                           ? " (is graphviz installed?)"
                                           : ""));
  return {};
}

} // namespace

status write_graph_picture(const graph& g, const std::string& path,
                           const graph_dot_options& options) {
  auto ext = extension_of(path);
  auto text = graph_to_dot(g, options);
  if (ext == "dot" || ext == "gv")
    return write_file_atomically(path, [&](int fd, const std::string& name) {
      return write_text(fd, text, name);
    });
  if (ext != "svg" && ext != "png" && ext != "pdf")
    return make_error(errc::invalid_argument,
                      "graph picture " + path + ": give it a .dot, .svg, .png or .pdf name");
  // dot draws into a temporary beside the file; the rename makes it appear whole.
  auto drawn = path + ".drawing." + std::to_string(::getpid());
  auto source = drawn + ".dot";
  AF_RETURN_IF_ERROR(write_file_atomically(source, [&](int fd, const std::string& name) {
    return write_text(fd, text, name);
  }));
  auto outcome = run_dot(ext, source, drawn, path);
  std::remove(source.c_str());
  if (outcome.ok() && std::rename(drawn.c_str(), path.c_str()) != 0)
    outcome = errno_error("renaming the drawing to " + path, errno);
  if (!outcome.ok())
    std::remove(drawn.c_str());
  return outcome;
}

} // namespace actorflow
