// Loading treats bytes as hostile: truncation, random corruption and crafted messages give
// errors that name what is wrong, never a crash, a hang or a giant allocation. These tests also
// run in serialization_asan_tests (AddressSanitizer + UBSan).

#include "serialization/capnp_codec.hpp"
#include "serialization/graph_io.hpp"

#include "graph_io_support.hpp"

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;
using actorflow::serialization::message_bytes;
using actorflow::test::build_sample_graph;
using actorflow::test::require_same_graph;

namespace {

std::vector<std::uint8_t> sample_bytes() {
  graph g;
  build_sample_graph(g);
  REQUIRE(g.status().ok());
  auto bytes = serialize_graph(g);
  REQUIRE(bytes.ok());
  return std::move(*bytes);
}

/// Copies a serialised graph into a builder, lets `change` edit it, and serialises it again.
template <class F>
std::vector<std::uint8_t> edited(const std::vector<std::uint8_t>& bytes, F&& change) {
  kj::ArrayPtr<const capnp::word> words{reinterpret_cast<const capnp::word*>(bytes.data()),
                                        bytes.size() / sizeof(capnp::word)};
  capnp::FlatArrayMessageReader reader{words};
  capnp::MallocMessageBuilder builder;
  builder.setRoot(reader.getRoot<schema::Graph>());
  change(builder.getRoot<schema::Graph>());
  return message_bytes(builder);
}

schema::Node::Builder node_named(schema::Graph::Builder g, const std::string& name) {
  for (auto n : g.getNodes())
    if (std::string{n.getName().cStr()} == name)
      return n;
  FAIL("no node named " << name);
  throw std::logic_error{"unreachable"};
}

schema::Attr::Builder attr_named(schema::Node::Builder n, const std::string& key) {
  for (auto a : n.getAttrs())
    if (std::string{a.getKey().cStr()} == key)
      return a;
  FAIL("no attr named " << key);
  throw std::logic_error{"unreachable"};
}

status load(const std::vector<std::uint8_t>& bytes) {
  graph g;
  auto s = deserialize_graph(bytes.data(), bytes.size(), g);
  if (!s.ok())
    CHECK_FALSE(g.status().ok()); // the half-built graph is marked unusable
  return s;
}

/// The iteration count of the random tests; ACTORFLOW_FUZZ_ITERATIONS overrides it for a
/// longer run by hand.
int fuzz_iterations(int fallback) {
  const char* env = std::getenv("ACTORFLOW_FUZZ_ITERATIONS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : fallback;
}

/// A graph that loaded must be whole: it serialises and loads back to the same nodes.
void check_usable(const graph& g) {
  auto again = serialize_graph(g);
  REQUIRE(again.ok());
  graph reloaded;
  auto s = deserialize_graph(again->data(), again->size(), reloaded);
  INFO(s.to_string());
  REQUIRE(s.ok());
  require_same_graph(g, reloaded);
}

} // namespace

TEST_CASE("every truncation of a graph's bytes is a data_loss error", "[serialization][corruption]") {
  auto bytes = sample_bytes();
  std::size_t stride = bytes.size() > 4096 ? bytes.size() / 2048 : 1;
  std::size_t tried = 0;
  for (std::size_t length = 0; length < bytes.size(); length += (length + 64 >= bytes.size() ? 1 : stride)) {
    // A copy of exactly `length` bytes, so that reading past the end is a sanitizer error.
    std::vector<std::uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length));
    graph g;
    auto s = deserialize_graph(prefix.data(), prefix.size(), g);
    INFO("length " << length << " of " << bytes.size() << ": " << s.to_string());
    REQUIRE(s.code() == errc::data_loss);
    ++tried;
  }
  CHECK(tried > 100);
}

TEST_CASE("odd sizes, empty input and trailing bytes are rejected", "[serialization][corruption]") {
  auto bytes = sample_bytes();
  graph g;
  auto s = deserialize_graph(nullptr, 0, g);
  CHECK(s.code() == errc::data_loss);
  CHECK_THAT(s.message(), Catch::Contains("empty"));

  auto longer = bytes;
  longer.push_back(0);
  graph g2;
  s = deserialize_graph(longer.data(), longer.size(), g2);
  CHECK(s.code() == errc::data_loss);
  // Every error of the decoder names the size; this one says what is wrong with it.
  CHECK_THAT(s.message(), Catch::Contains(std::to_string(longer.size()) + " bytes") &&
                            Catch::Contains("not a whole number of 8-byte words"));

  longer.resize(bytes.size() + 8, 0);
  graph g3;
  s = deserialize_graph(longer.data(), longer.size(), g3);
  CHECK(s.code() == errc::data_loss);
  CHECK_THAT(s.message(), Catch::Contains("8 trailing bytes"));
}

TEST_CASE("random byte flips give an error or a whole graph, never a crash",
          "[serialization][corruption]") {
  auto bytes = sample_bytes();
  std::mt19937_64 rng{20240611};
  const int iterations = fuzz_iterations(20000);
  int loaded = 0;
  for (int i = 0; i < iterations; ++i) {
    auto corrupted = bytes;
    auto flips = 1 + rng() % 4;
    for (std::uint64_t f = 0; f < flips; ++f)
      corrupted[rng() % corrupted.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    graph g;
    auto s = deserialize_graph(corrupted.data(), corrupted.size(), g);
    INFO("iteration " << i << " (seed 20240611): " << s.to_string());
    if (s.ok()) {
      ++loaded;
      check_usable(g);
    } else {
      // Corrupt data, or a format version from the future: never another kind of error.
      CHECK((s.code() == errc::data_loss || s.code() == errc::unimplemented));
      CHECK_FALSE(s.message().empty());
    }
  }
  // Flips in text and tensor bytes still load; flips in pointers and indices mostly do not.
  CHECK(loaded > 0);
  CHECK(loaded < iterations);
}

TEST_CASE("random byte flips in a tensor give an error or a tensor", "[serialization][corruption]") {
  auto bytes = serialize_tensor(tensor::from_vector<bool>({true, false, true}, {3, 1}));
  REQUIRE(bytes.ok());
  std::mt19937_64 rng{7};
  const int iterations = fuzz_iterations(5000);
  for (int i = 0; i < iterations; ++i) {
    auto corrupted = *bytes;
    corrupted[rng() % corrupted.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    auto t = deserialize_tensor(corrupted.data(), corrupted.size());
    if (t.ok() && t->is_initialized()) {
      CHECK(static_cast<std::size_t>(t->num_elements()) * size_of(t->type()) == t->bytes());
      if (t->type() == dtype::boolean)
        for (auto v : t->to_vector<int>())
          CHECK((v == 0 || v == 1));
    }
  }
  for (std::size_t length = 0; length < bytes->size(); ++length) {
    std::vector<std::uint8_t> prefix(bytes->begin(), bytes->begin() + static_cast<std::ptrdiff_t>(length));
    CHECK(deserialize_tensor(prefix.data(), prefix.size()).error().code() == errc::data_loss);
  }
}

TEST_CASE("crafted graphs are rejected with errors naming the node and field",
          "[serialization][corruption]") {
  auto bytes = sample_bytes();
  REQUIRE(load(bytes).ok());

  SECTION("a tensor claiming 2^40 elements") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      auto shape = attr_named(node_named(g, "f32"), "value").getValue().getTensor().initShape();
      shape.setRankKnown(true);
      shape.initDims(1).set(0, std::int64_t{1} << 40);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("node 0 ('f32')"));
    CHECK_THAT(s.message(), Catch::Contains("attr 'value'"));
    CHECK_THAT(s.message(), Catch::Contains("1099511627776"));
  }
  SECTION("a tensor whose dimensions overflow int64") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      auto shape = attr_named(node_named(g, "f32"), "value").getValue().getTensor().initShape();
      shape.setRankKnown(true);
      auto dims = shape.initDims(3);
      dims.set(0, std::int64_t{1} << 40);
      dims.set(1, std::int64_t{1} << 40);
      dims.set(2, 0);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("overflow"));
    CHECK_THAT(s.message(), Catch::Contains("'f32'"));
  }
  SECTION("a tensor with a negative dimension") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      attr_named(node_named(g, "f32"), "value").getValue().getTensor().getShape().getDims().set(0, -1);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("dimension 0 is -1"));
  }
  SECTION("a bool tensor with a byte that is not 0 or 1") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      attr_named(node_named(g, "flags"), "value").getValue().getTensor().getData()[1] = 2;
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("'flags'"));
    CHECK_THAT(s.message(), Catch::Contains("byte value 2"));
  }
  SECTION("an input index out of range") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      node_named(g, "layer/back").getInputs()[1].setNode(999);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("'layer/back'"));
    CHECK_THAT(s.message(), Catch::Contains("inputs[1]"));
    CHECK_THAT(s.message(), Catch::Contains("node 999"));
  }
  SECTION("a negative output index") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      node_named(g, "backprop").getInputs()[0].setIndex(-1);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("'backprop'"));
    CHECK_THAT(s.message(), Catch::Contains("inputs[0]"));
    CHECK_THAT(s.message(), Catch::Contains("output -1"));
  }
  SECTION("an output index past the producer's outputs") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      node_named(g, "backprop").getInputs()[0].setIndex(2);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("output 2"));
    CHECK_THAT(s.message(), Catch::Contains("has 2 outputs"));
  }
  SECTION("a negative input node") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      node_named(g, "backprop").getInputs()[0].setNode(-5);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("node -5"));
  }
  SECTION("a control input out of range") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      node_named(g, "after").getControlInputs().set(0, 12345);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("'after'"));
    CHECK_THAT(s.message(), Catch::Contains("control_inputs[0]"));
  }
  SECTION("duplicate names") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) { g.getNodes()[3].setName("f32"); }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("node 3 ('f32')"));
    CHECK_THAT(s.message(), Catch::Contains("duplicates the name of node 0"));
  }
  SECTION("an empty name") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) { g.getNodes()[2].setName(""); }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("node 2: field 'name' is empty"));
  }
  SECTION("an unknown dtype value in an output type") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      node_named(g, "x").getOutputTypes().set(0, static_cast<schema::DType>(17));
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("'x'"));
    CHECK_THAT(s.message(), Catch::Contains("output_types[0]"));
    CHECK_THAT(s.message(), Catch::Contains("unknown dtype value 17"));
  }
  SECTION("an unknown dtype value in a tensor and in an attr") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      attr_named(node_named(g, "i64"), "value").getValue().getTensor().setDtype(
        static_cast<schema::DType>(300));
    }));
    CHECK_THAT(s.message(), Catch::Contains("unknown dtype value 300"));
    s = load(edited(bytes, [](schema::Graph::Builder g) {
      attr_named(node_named(g, "x"), "dtype").getValue().setDtype(static_cast<schema::DType>(5));
    }));
    CHECK_THAT(s.message(), Catch::Contains("attr 'dtype'"));
    CHECK_THAT(s.message(), Catch::Contains("unknown dtype value 5"));
  }
  SECTION("a shape dimension below -1") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      attr_named(node_named(g, "x"), "shape").getValue().getShape().getDims().set(0, -2);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("attr 'shape'"));
    CHECK_THAT(s.message(), Catch::Contains("dimension 0 is -2"));
  }
  SECTION("output types and shapes of different lengths") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) { node_named(g, "x").initOutputShapes(3); }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("1 output_types but 3 output_shapes"));
  }
  SECTION("a variable referring to a missing node") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      g.getVariables()[1].getInitializer().setNode(100000);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("variable 1: initializer"));
  }
  SECTION("two variables on one node") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      auto vars = g.getVariables();
      vars[1].getRef().setNode(vars[0].getRef().getNode());
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("variable 1: ref names node"));
    CHECK_THAT(s.message(), Catch::Contains("like variable 0"));
  }
  SECTION("a duplicate attr key") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      auto attrs = node_named(g, "layer/back").getAttrs();
      attrs[1].setKey(attrs[0].getKey());
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("appears twice"));
  }
  SECTION("format versions 0 and from the future") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) { g.setFormatVersion(0); }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("not an actorflow graph"));
    s = load(edited(bytes, [](schema::Graph::Builder g) { g.setFormatVersion(99); }));
    CHECK(s.code() == errc::unimplemented);
    CHECK_THAT(s.message(), Catch::Contains("format version 99"));
  }
  SECTION("a list of 2^28 zero-sized inputs runs into the traversal limit") {
    auto s = load(edited(bytes, [](schema::Graph::Builder g) {
      // Node field 'inputs' is pointer 2; a List(Void) reads as a list of empty OutputRefs,
      // each {0, 0}, which would all be valid edges without the limit.
      capnp::AnyStruct::Builder any{node_named(g, "backprop")};
      any.getPointerSection()[2].initAs<capnp::List<capnp::Void>>(1u << 28);
    }));
    CHECK(s.code() == errc::data_loss);
    CHECK_THAT(s.message(), Catch::Contains("traversal limit"));
  }
  SECTION("a tensor message claiming 2^40 elements without data") {
    capnp::MallocMessageBuilder builder;
    auto t = builder.initRoot<schema::Tensor>();
    t.setDtype(schema::DType::FLOAT64);
    t.initShape().setRankKnown(true);
    t.getShape().initDims(2).set(0, std::int64_t{1} << 20);
    t.getShape().getDims().set(1, std::int64_t{1} << 20);
    auto raw = message_bytes(builder);
    auto decoded = deserialize_tensor(raw.data(), raw.size());
    CHECK(decoded.error().code() == errc::data_loss);
    CHECK_THAT(decoded.error().message(), Catch::Contains("1099511627776 elements"));
  }
}
