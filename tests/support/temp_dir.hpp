#pragma once
/// Test helpers for code that writes files: a temporary directory removed at the end of the
/// test, and whole-file reads and writes.
///   temp_dir dir;
///   write_file_bytes(dir.path() + "/x", {1, 2, 3});
///   auto bytes = read_file_bytes(dir.path() + "/x");

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace actorflow::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents when destroyed.
class temp_dir {
public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string{base != nullptr ? base : "/tmp"} + "/actorflow-test-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    REQUIRE(::mkdtemp(buffer.data()) != nullptr);
    path_ = buffer.data();
  }
  ~temp_dir() {
    std::error_code ignored;
    // Tests may have taken permissions away; give them back so that removal works.
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

/// The names in `dir`, sorted.
inline std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  for (auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

inline std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

inline void write_file_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  REQUIRE(out.good());
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace actorflow::test
