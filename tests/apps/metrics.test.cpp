#include "train/metrics.hpp"

#include "serialization/file_io.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

using namespace actorflow;
using namespace actorflow::train;

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string temp_dir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("af-metrics-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  return dir.string();
}
} // namespace

TEST_CASE("the metrics CSV holds a header and one row per step logged") {
  auto dir = temp_dir();
  metrics_log log;
  REQUIRE(log.open(dir + "/metrics.csv").ok());
  log.add({50, 1, 0.75, 0.5, 1000});
  log.add({100, 1, 0.5, 0.625, 1200});
  auto text = read_file(dir + "/metrics.csv");
  CHECK(text == "step,epoch,loss,accuracy,examples_per_second\n50,1,0.75,0.5,1000\n100,1,0.5,0.625,1200\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("the curve is an SVG with a loss line and an accuracy line") {
  auto dir = temp_dir();
  std::vector<metrics_row> rows{{10, 1, 2.0, 0.1, 0}, {20, 1, 1.0, 0.5, 0}, {30, 1, 0.5, 0.8, 0}};
  REQUIRE(write_curve_svg(dir + "/curve.svg", rows, "test curve").ok());
  auto svg = read_file(dir + "/curve.svg");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("test curve") != std::string::npos);
  // Two polylines of three points each.
  std::size_t lines = 0, pos = 0;
  while ((pos = svg.find("<polyline", pos)) != std::string::npos) {
    ++lines;
    ++pos;
  }
  CHECK(lines == 2);
  CHECK_FALSE(std::filesystem::exists(dir + "/curve.svg.tmp"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("an unwritable output directory is refused with its name") {
  auto s = file_io::ensure_writable_directory("/proc/actorflow-cannot-be-here");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("/proc/actorflow-cannot-be-here") != std::string::npos);
  auto blocked = file_io::ensure_writable_directory("/etc/hostname/sub");
  CHECK_FALSE(blocked.ok());
}
