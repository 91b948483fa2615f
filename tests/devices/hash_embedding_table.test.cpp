// The hash embedding table as a plain class (devices/hash_embedding_table.hpp): admission,
// eviction and its sweep, slots added to live rows, and the checks of an import.
#include "devices/hash_embedding_table.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace actorflow;

namespace {

hash_embedding_table::config config_of(std::int64_t dim, std::int64_t admit_after, std::int64_t evict_after) {
  hash_embedding_table::config c;
  c.dim = dim;
  c.initializer = hash_initializer::normal(1.0, 0.5);
  c.admit_after = admit_after;
  c.evict_after = evict_after;
  c.seed = 3;
  return c;
}

} // namespace

TEST_CASE("a hash table's rows come from its initializer per id, and its slots join every live row", "[hash_embedding]") {
  hash_embedding_table t{config_of(4, 0, 0)};
  std::vector<std::int64_t> ids{12, -7, 12};
  std::vector<float> out(12);
  t.lookup(ids.data(), 3, -1, out.data());
  CHECK(t.size() == 2);
  CHECK(t.step() == 1);
  for (std::int64_t c = 0; c < 4; ++c) {
    CHECK(out[static_cast<std::size_t>(c)] == hash_embedding_table::initial_value(hash_initializer::normal(1.0, 0.5), 3, 12, c));
    CHECK(out[static_cast<std::size_t>(8 + c)] == out[static_cast<std::size_t>(c)]);
  }
  // Normal draws around their mean: 400 of them within 5 standard deviations, mean near 1.
  double sum = 0;
  for (std::int64_t id = 0; id < 100; ++id)
    for (std::int64_t c = 0; c < 4; ++c) {
      auto v = hash_embedding_table::initial_value(hash_initializer::normal(1.0, 0.5), 3, id, c);
      CHECK(std::abs(v - 1.0) < 2.5);
      sum += v;
    }
  CHECK(sum / 400 == Approx(1.0).margin(0.1));
  CHECK(t.width() == 4);
  auto accum = t.slot_offset("Adagrad", 0.1f);
  CHECK(accum == 4);
  CHECK(t.slot_offset("Adagrad", 0.7f) == 4);  // known: the first initial value stays
  CHECK(t.width() == 8);
  auto* row = t.row_for_update(-7);
  REQUIRE(row != nullptr);
  CHECK(row[accum] == 0.1f);
  CHECK(t.row_for_update(99) == nullptr);
}

TEST_CASE("a hash table admits an id at its Nth lookup and forgets ids untouched for more than T steps", "[hash_embedding]") {
  hash_embedding_table t{config_of(1, 2, 4)};
  std::int64_t id = 5, other = 6;
  float out = -1;
  t.lookup(&id, 1, 10, &out);
  CHECK(out == 0.0f);
  CHECK(t.row_for_update(5) == nullptr);
  t.lookup(&id, 1, 11, &out);
  CHECK(out != 0.0f);
  REQUIRE(t.row_for_update(5) != nullptr);
  *t.row_for_update(5) = 42;
  t.lookup(&other, 1, 15, &out);  // id 5 last seen at 11: 4 steps, kept
  REQUIRE(t.row_for_update(5) != nullptr);
  CHECK(*t.row_for_update(5) == 42.0f);
  t.lookup(&other, 1, 16, &out);  // 5 steps: gone, and its count with it
  CHECK(t.row_for_update(5) == nullptr);
  CHECK(t.export_contents().keys == std::vector<std::int64_t>{6});
  CHECK(t.size() == 1);
  t.lookup(&id, 1, 17, &out);
  CHECK(out == 0.0f);  // seen once again: not admitted yet
  auto c = t.export_contents();
  CHECK(c.candidates == std::vector<std::int64_t>{5});
  CHECK(c.counts == std::vector<std::int64_t>{1});
}

TEST_CASE("a hash table refuses an import that does not fit it, naming what is wrong, and keeps its rows", "[hash_embedding]") {
  hash_embedding_table t{config_of(2, 0, 0)};
  std::int64_t id = 1;
  std::vector<float> out(2);
  t.lookup(&id, 1, 0, out.data());
  hash_embedding_table::contents wide{{3}, {1, 2, 3}, {0}, {}, {}};
  auto s = t.import_contents(wide, "table 't'");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("table 't': 1 keys need 2 row values") != std::string::npos);
  hash_embedding_table::contents twice{{3, 3}, {1, 2, 3, 4}, {0, 0}, {}, {}};
  s = t.import_contents(twice, "table 't'");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("id 3 is listed twice") != std::string::npos);
  hash_embedding_table::contents counts{{}, {}, {}, {4}, {}};
  CHECK_FALSE(t.import_contents(counts, "table 't'").ok());
  CHECK(t.export_contents().keys == std::vector<std::int64_t>{1});
  hash_embedding_table::contents good{{8, 9}, {1, 2, 3, 4}, {7, 3}, {10}, {1}};
  REQUIRE(t.import_contents(good, "table 't'").ok());
  CHECK(t.step() == 7);
  auto back = t.export_contents();
  CHECK(back.keys == good.keys);
  CHECK(back.rows == good.rows);
  CHECK(back.last_steps == good.last_steps);
  CHECK(back.candidates == good.candidates);
  CHECK(back.counts == good.counts);
}
