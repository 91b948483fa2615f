#include "serialization/graph_io.hpp"

#include "graph_io_support.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using namespace actorflow;
using actorflow::test::build_sample_graph;
using actorflow::test::require_same_graph;
using actorflow::test::same_tensor;

namespace {

/// A fresh directory under $TMPDIR (or /tmp), removed with its files at the end of the test.
class temp_dir {
public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string{base != nullptr ? base : "/tmp"} + "/actorflow-graph-io-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    REQUIRE(::mkdtemp(buffer.data()) != nullptr);
    path_ = buffer.data();
  }
  ~temp_dir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  auto* pipe = ::popen(("ls -A '" + dir + "'").c_str(), "r");
  char line[4096];
  while (pipe != nullptr && std::fgets(line, sizeof line, pipe) != nullptr) {
    std::string name = line;
    if (!name.empty() && name.back() == '\n')
      name.pop_back();
    names.push_back(name);
  }
  if (pipe != nullptr)
    ::pclose(pipe);
  return names;
}

} // namespace

TEST_CASE("a graph built with ops round-trips through bytes with every node intact",
          "[serialization]") {
  graph g;
  build_sample_graph(g);
  REQUIRE(g.status().ok());
  auto bytes = serialize_graph(g);
  REQUIRE(bytes.ok());
  REQUIRE(bytes->size() % 8 == 0);

  graph loaded;
  auto s = deserialize_graph(bytes->data(), bytes->size(), loaded);
  INFO(s.to_string());
  REQUIRE(s.ok());
  REQUIRE(loaded.status().ok());
  require_same_graph(g, loaded);

  SECTION("scoped names, devices, transposes, axes and constants survive") {
    auto matmul = loaded.find("layer/back");
    REQUIRE(matmul >= 0);
    CHECK(loaded.at(matmul).attr_or("transpose_b", false));
    CHECK_FALSE(loaded.at(matmul).attr_or("transpose_a", true));
    CHECK(loaded.at(matmul).requested_device == g.at(g.find("layer/back")).requested_device);
    CHECK_FALSE(loaded.at(matmul).requested_device.empty());
    auto mean = loaded.find("layer/Mean");
    REQUIRE(mean >= 0);
    REQUIRE(loaded.at(mean).attr<std::vector<std::int64_t>>("axes") != nullptr);
    CHECK(*loaded.at(mean).attr<std::vector<std::int64_t>>("axes") == std::vector<std::int64_t>{-1, 0});
    auto flags = loaded.at(loaded.find("flags")).attr<tensor>("value");
    REQUIRE(flags != nullptr);
    CHECK(flags->type() == dtype::boolean);
    CHECK(flags->to_vector<int>() == std::vector<int>{1, 0, 1, 1});
    auto x = loaded.at(loaded.find("x")).attr<tensor_shape>("shape");
    REQUIRE(x != nullptr);
    CHECK(x->to_string() == "[?,3]");
    auto anything = loaded.at(loaded.find("anything")).attr<tensor_shape>("shape");
    REQUIRE(anything != nullptr);
    CHECK_FALSE(anything->rank_known());
    CHECK(loaded.seed == std::optional<std::int64_t>{1234});
  }
  SECTION("the loaded graph serialises to the same bytes") {
    auto again = serialize_graph(loaded);
    REQUIRE(again.ok());
    CHECK(*again == *bytes);
  }
  SECTION("the loaded graph can be extended without name clashes") {
    // The sample graph already has an add with the default name; the new one must get another.
    auto before = static_cast<int>(loaded.size());
    auto added = ops::add(loaded.find_output("f64"), loaded.find_output("f64"));
    CHECK(loaded.status().ok());
    CHECK(loaded.find(added.name()) == added.node_id);
    for (int i = 0; i < before; ++i)
      CHECK(loaded.at(i).name != added.name());
    auto variable = ops::variable(loaded, 1.f, "v");
    CHECK(variable.name() != "v");
  }
}

TEST_CASE("an empty graph and a graph without a seed round-trip", "[serialization]") {
  graph empty;
  auto bytes = serialize_graph(empty);
  REQUIRE(bytes.ok());
  graph loaded;
  REQUIRE(deserialize_graph(bytes->data(), bytes->size(), loaded).ok());
  CHECK(loaded.size() == 0);
  CHECK_FALSE(loaded.seed.has_value());

  graph one;
  ops::constant(one, 1.f);
  bytes = serialize_graph(one);
  REQUIRE(bytes.ok());
  graph loaded_one;
  REQUIRE(deserialize_graph(bytes->data(), bytes->size(), loaded_one).ok());
  require_same_graph(one, loaded_one);
}

TEST_CASE("bytes at an unaligned address load like aligned ones", "[serialization]") {
  graph g;
  build_sample_graph(g);
  auto bytes = serialize_graph(g);
  REQUIRE(bytes.ok());
  std::vector<std::uint8_t> shifted(bytes->size() + 3);
  std::copy(bytes->begin(), bytes->end(), shifted.begin() + 3);
  graph loaded;
  auto s = deserialize_graph(shifted.data() + 3, bytes->size(), loaded);
  INFO(s.to_string());
  REQUIRE(s.ok());
  require_same_graph(g, loaded);
}

TEST_CASE("deserialising into a graph that already has nodes is refused", "[serialization]") {
  graph g;
  ops::constant(g, 1.f);
  auto bytes = serialize_graph(g);
  REQUIRE(bytes.ok());
  auto s = deserialize_graph(bytes->data(), bytes->size(), g);
  CHECK(s.code() == errc::invalid_argument);
  CHECK(g.size() == 1);
  CHECK(g.status().ok());
}

TEST_CASE("a graph saved to a file loads back in another graph", "[serialization]") {
  temp_dir dir;
  auto path = dir.path() + "/model.graph";
  graph g;
  build_sample_graph(g);
  REQUIRE(save_graph(g, path).ok());
  CHECK(directory_entries(dir.path()) == std::vector<std::string>{"model.graph"});

  graph loaded;
  auto s = load_graph(path, loaded);
  INFO(s.to_string());
  REQUIRE(s.ok());
  require_same_graph(g, loaded);

  SECTION("saving again replaces the file atomically and leaves no temporary behind") {
    graph small;
    ops::constant(small, 5.f, "five");
    REQUIRE(save_graph(small, path).ok());
    CHECK(directory_entries(dir.path()) == std::vector<std::string>{"model.graph"});
    graph reloaded;
    REQUIRE(load_graph(path, reloaded).ok());
    require_same_graph(small, reloaded);
  }
}

TEST_CASE("file errors name the file", "[serialization]") {
  temp_dir dir;
  graph g;
  ops::constant(g, 1.f);

  SECTION("a missing file is not_found") {
    graph loaded;
    auto s = load_graph(dir.path() + "/missing.graph", loaded);
    CHECK(s.code() == errc::not_found);
    CHECK_THAT(s.message(), Catch::Contains("missing.graph"));
  }
  SECTION("a directory that does not exist cannot be saved into") {
    auto s = save_graph(g, dir.path() + "/no/such/dir/model.graph");
    CHECK_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains("no/such/dir/model.graph"));
  }
  SECTION("a directory is not a graph file") {
    graph loaded;
    auto s = load_graph(dir.path(), loaded);
    CHECK_FALSE(s.ok());
    CHECK_THAT(s.message(), Catch::Contains(dir.path()));
  }
  SECTION("a FIFO is refused at once instead of waiting for a writer") {
    auto path = dir.path() + "/fifo.graph";
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    graph loaded;
    auto s = load_graph(path, loaded);
    CHECK(s.code() == errc::invalid_argument);
    CHECK_THAT(s.message(), Catch::Contains("fifo.graph"));
    CHECK_THAT(s.message(), Catch::Contains("not a regular file"));
  }
  SECTION("a file of garbage is data_loss naming the file") {
    auto path = dir.path() + "/garbage.graph";
    std::ofstream{path} << "this is not a graph at all, not at all!!";
    graph loaded;
    auto s = load_graph(path, loaded);
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("garbage.graph"));
  }
  SECTION("an empty file is data_loss") {
    auto path = dir.path() + "/empty.graph";
    std::ofstream{path};
    graph loaded;
    auto s = load_graph(path, loaded);
    CHECK(s.code() == errc::data_loss);
    // Not just the file's name, "empty.graph": the reason.
    CHECK_THAT(s.message(), Catch::Contains("graph (0 bytes) is empty"));
  }
}

TEST_CASE("tensors of every dtype round-trip through bytes", "[serialization]") {
  std::vector<tensor> tensors{
    tensor::from_vector<float>({1.f, -2.5f, 3e38f, -0.f, 1e-45f, 7.f}, {3, 2}),
    tensor::from_vector<double>({3.141592653589793, -1e308}),
    tensor::from_vector<std::int32_t>({-2147483647 - 1, 0, 2147483647}),
    tensor::from_vector<std::int64_t>({std::int64_t{1} << 62, -5}, {1, 2, 1}),
    tensor::from_vector<bool>({true, false, false}),
    tensor::scalar(42.f),
    tensor{dtype::float64, tensor_shape{0, 5}},
    tensor{dtype::int64, tensor_shape{3}, std::shared_ptr<buffer>{}},
  };
  for (auto& t : tensors) {
    INFO(t.debug_string());
    auto bytes = serialize_tensor(t);
    REQUIRE(bytes.ok());
    auto back = deserialize_tensor(bytes->data(), bytes->size());
    INFO(back.error().to_string());
    REQUIRE(back.ok());
    CHECK(same_tensor(t, *back));
  }
}

TEST_CASE("a tensor's bytes hold the raw little-endian elements", "[serialization]") {
  auto t = tensor::from_vector<std::int32_t>({0x01020304, 0x0a0b0c0d});
  auto bytes = serialize_tensor(t);
  REQUIRE(bytes.ok());
  const std::vector<std::uint8_t> raw{0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a};
  auto at = std::search(bytes->begin(), bytes->end(), raw.begin(), raw.end());
  CHECK(at != bytes->end());
}
