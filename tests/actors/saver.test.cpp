#include "actors/saver.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/replica_device_setter.hpp"
#include "serialization/checkpoint.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

using namespace actorflow;
using actorflow::test::contains;
using actorflow::test::temp_dir;

namespace {

/// A small "model": float weights, an int32 counter and an int64 global step, with a
/// train-like update that changes all three.
struct model {
  variable weights, counter, global_step;
  output train;

  explicit model(graph& g) {
    weights = ops::variable(g, ops::constant(g, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}),
                            "layer/weights");
    counter = ops::variable(g, ops::constant(g, std::int32_t{0}), "counter", false);
    global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step", false);
    auto w = ops::assign_add(weights, ops::constant(g, std::vector<float>{0.5f, 0.5f, 0.5f, 1, 1, 1}, {2, 3}));
    auto c = ops::assign_add(counter, ops::constant(g, std::int32_t{3}));
    auto s = ops::assign_add(global_step, ops::constant(g, std::int64_t{1}));
    train = ops::group(g, {w, c, s}, "train");
  }
};

struct values {
  std::vector<float> weights;
  std::int32_t counter = 0;
  std::int64_t global_step = 0;
  friend bool operator==(const values& a, const values& b) {
    return a.weights == b.weights && a.counter == b.counter && a.global_step == b.global_step;
  }
};

values read_values(session& s, const model& m) {
  auto r = s.run({m.weights.ref, m.counter.ref, m.global_step.ref});
  REQUIRE(r.ok());
  return values{r->at(0).to_vector<float>(), r->at(1).scalar_value<std::int32_t>(),
                r->at(2).scalar_value<std::int64_t>()};
}

void train_steps(session& s, const model& m, int steps) {
  for (int i = 0; i < steps; ++i)
    REQUIRE(s.run_targets({m.train}).ok());
}

/// The model round robin over two ps tasks: weights and global_step on ps 0, counter on ps 1.
std::optional<model> model_on_two_ps(graph& g) {
  auto setter = replica_device_setter(2);
  REQUIRE(setter.ok());
  std::optional<model> m;
  auto d = g.device(*setter);
  m.emplace(g);
  return m;
}

} // namespace

TEST_CASE("a saver restores the values it saved after training changed them") {
  temp_dir dir;
  graph g;
  model m{g};
  auto init = ops::global_variables_initializer(g);
  saver save{g};
  REQUIRE(save.status().ok());
  CHECK(save.variables().size() == 3);
  checkpoint_manager manager{dir.path(), 3};

  session s{g};
  REQUIRE(s.run_targets({init}).ok());
  train_steps(s, m, 3);
  auto saved = read_values(s, m);
  CHECK(saved.weights == std::vector<float>{2.5f, 3.5f, 4.5f, 7, 8, 9});
  CHECK(saved.counter == 9);
  CHECK(saved.global_step == 3);
  REQUIRE(save.save(s, manager, saved.global_step).ok());

  train_steps(s, m, 2);
  CHECK_FALSE(read_values(s, m) == saved);

  auto latest = manager.latest();
  REQUIRE(latest.has_value());
  CHECK(*latest == dir.path() + "/ckpt-3.afckpt");
  REQUIRE(save.restore(s, *latest).ok());
  CHECK(read_values(s, m) == saved);
  // Training goes on from the restored values.
  train_steps(s, m, 1);
  CHECK(read_values(s, m).global_step == 4);

  auto data = read_checkpoint(*latest);
  REQUIRE(data.ok());
  CHECK(data->step == 3);
  CHECK(data->entries.count("layer/weights") == 1);
  CHECK(data->entries.at("counter").type() == dtype::int32);
}

TEST_CASE("a fresh session of the same graph restores without running the initializers") {
  temp_dir dir;
  graph g;
  model m{g};
  auto init = ops::global_variables_initializer(g);
  saver save{g};
  checkpoint_manager manager{dir.path(), 1};
  values saved;
  {
    session s{g};
    REQUIRE(s.run_targets({init}).ok());
    train_steps(s, m, 4);
    saved = read_values(s, m);
    REQUIRE(save.save(s, manager, 4).ok());
  }
  session fresh{g};
  REQUIRE(save.restore(fresh, *manager.latest()).ok());
  CHECK(read_values(fresh, m) == saved);
}

TEST_CASE("saving uninitialised variables names the variable") {
  temp_dir dir;
  graph g;
  model m{g};
  saver save{g};
  checkpoint_manager manager{dir.path(), 1};
  session s{g};
  auto status = save.save(s, manager, 0);
  INFO(status.to_string());
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == errc::failed_precondition);
  CHECK(contains(status.message(), "saver: cannot read the variables: variable 'layer/weights' is uninitialised"));
  CHECK_FALSE(manager.latest().has_value());
}

TEST_CASE("a mismatched checkpoint is refused and changes no variable") {
  temp_dir dir;
  graph g;
  model m{g};
  auto init = ops::global_variables_initializer(g);
  saver save{g};
  session s{g};
  REQUIRE(s.run_targets({init}).ok());
  train_steps(s, m, 2);
  auto before = read_values(s, m);
  // Valid values for two variables, so that only the checks keep them from being assigned.
  checkpoint_entries good{
    {"layer/weights", tensor::from_vector<float>({9, 9, 9, 9, 9, 9}, {2, 3})},
    {"counter", tensor::scalar<std::int32_t>(100)},
    {"global_step", tensor::scalar<std::int64_t>(100)}};
  auto path = dir.path() + "/bad.afckpt";

  SECTION("a missing variable is named") {
    auto entries = good;
    entries.erase("global_step");
    REQUIRE(write_checkpoint(path, 1, entries).ok());
    auto status = save.restore(s, path);
    REQUIRE_FALSE(status.ok());
    CHECK(status.code() == errc::not_found);
    CHECK(contains(status.message(), "checkpoint '" + path + "'"));
    CHECK(contains(status.message(), "no value for variable 'global_step'"));
  }
  SECTION("a shape mismatch names the variable and both shapes") {
    auto entries = good;
    entries["layer/weights"] = tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
    REQUIRE(write_checkpoint(path, 1, entries).ok());
    auto status = save.restore(s, path);
    REQUIRE_FALSE(status.ok());
    CHECK(status.code() == errc::invalid_argument);
    CHECK(contains(status.message(),
                   "variable 'layer/weights' is float32[2,3] but the checkpoint holds float32[3,2]"));
  }
  SECTION("a dtype mismatch names the variable and both dtypes") {
    auto entries = good;
    entries["global_step"] = tensor::scalar<std::int32_t>(5);
    REQUIRE(write_checkpoint(path, 1, entries).ok());
    auto status = save.restore(s, path);
    REQUIRE_FALSE(status.ok());
    CHECK(contains(status.message(), "variable 'global_step' is int64[] but the checkpoint holds int32[]"));
  }
  SECTION("a corrupted file is refused with its name") {
    REQUIRE(write_checkpoint(path, 1, good).ok());
    auto bytes = test::read_file_bytes(path);
    bytes[bytes.size() - 3] ^= 0x40;
    test::write_file_bytes(path, bytes);
    auto status = save.restore(s, path);
    REQUIRE_FALSE(status.ok());
    CHECK(status.code() == errc::data_loss);
    CHECK(contains(status.message(), "'" + path + "'"));
  }
  CHECK(read_values(s, m) == before);
}

TEST_CASE("a saver of some variables ignores the others and extra checkpoint entries") {
  temp_dir dir;
  graph g;
  model m{g};
  auto init = ops::global_variables_initializer(g);
  saver only_weights{g, {m.weights}};
  CHECK(only_weights.variables().size() == 1);
  session s{g};
  REQUIRE(s.run_targets({init}).ok());
  checkpoint_entries entries{
    {"layer/weights", tensor::from_vector<float>({6, 5, 4, 3, 2, 1}, {2, 3})},
    {"something/else", tensor::scalar(1.f)}};
  auto path = dir.path() + "/w.afckpt";
  REQUIRE(write_checkpoint(path, 1, entries).ok());
  REQUIRE(only_weights.restore(s, path).ok());
  auto now = read_values(s, m);
  CHECK(now.weights == std::vector<float>{6, 5, 4, 3, 2, 1});
  CHECK(now.counter == 0);
  CHECK(now.global_step == 0);
}

TEST_CASE("a saver refuses a variable listed twice") {
  graph g;
  model m{g};
  saver twice{g, {m.counter, m.counter}};
  REQUIRE_FALSE(twice.status().ok());
  CHECK(contains(twice.status().message(), "variable 'counter' is listed twice"));
  session s{g};
  auto status = twice.restore(s, "/nonexistent");
  REQUIRE_FALSE(status.ok());
  CHECK(contains(status.message(), "listed twice"));
}

TEST_CASE("a cluster-wide checkpoint pulls variables from every ps task and pushes them back") {
  temp_dir dir;
  graph g;
  auto m = model_on_two_ps(g);
  auto init = ops::global_variables_initializer(g);
  saver save{g};
  checkpoint_manager manager{dir.path(), 1};
  session_options cluster;
  cluster.in_process_cluster = {{"ps", 2}, {"worker", 1}};
  values saved;
  {
    session s{g, cluster};
    REQUIRE(s.run_targets({init}).ok());
    train_steps(s, *m, 3);
    saved = read_values(s, *m);
    REQUIRE(save.save(s, manager, 3).ok());
    CHECK(g.at(m->weights.ref.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
    CHECK(g.at(m->counter.ref.node_id).assigned_device == "/job:ps/replica:0/task:1/device:CPU:0");
  }
  // A new cluster, whose variables hold nothing until the restore pushes the saved values.
  session fresh{g, cluster};
  REQUIRE(save.restore(fresh, *manager.latest()).ok());
  CHECK(read_values(fresh, *m) == saved);
  train_steps(fresh, *m, 1);
  CHECK(read_values(fresh, *m).global_step == 4);
}

TEST_CASE("a background saver holds training up for the snapshot only, and writes what the snapshot saw") {
  temp_dir dir;
  graph g;
  model m{g};
  auto init = ops::global_variables_initializer(g);
  saver save{g};
  checkpoint_manager manager{dir.path(), 3};
  session s{g};
  REQUIRE(s.run_targets({init}).ok());
  train_steps(s, m, 3);
  auto saved = read_values(s, m);

  // The writer is held before writing until training has gone on.
  std::mutex gate_mutex;
  std::condition_variable gate_changed;
  bool open = false;
  background_saver writer{save, manager};
  writer.before_each_write([&] {
    std::unique_lock<std::mutex> lock{gate_mutex};
    gate_changed.wait(lock, [&] { return open; });
  });
  REQUIRE(writer.save(s, saved.global_step).ok());
  // save() returned with the file not yet written, and training goes on meanwhile.
  CHECK_FALSE(manager.latest().has_value());
  train_steps(s, m, 2);
  CHECK(read_values(s, m).global_step == 5);
  {
    std::lock_guard<std::mutex> lock{gate_mutex};
    open = true;
  }
  gate_changed.notify_all();
  REQUIRE(writer.wait().ok());
  // The checkpoint holds the values at the snapshot, not those written meanwhile.
  auto latest = manager.latest();
  REQUIRE(latest.has_value());
  CHECK(*latest == dir.path() + "/ckpt-3.afckpt");
  REQUIRE(save.restore(s, *latest).ok());
  CHECK(read_values(s, m) == saved);
}

TEST_CASE("a background saver reports a failed write once, at the next save or wait") {
  temp_dir dir;
  graph g;
  model m{g};
  saver save{g};
  // A file where the manager wants its directory: every write fails.
  auto blocked = dir.path() + "/not-a-directory";
  { std::ofstream{blocked} << "x"; }
  checkpoint_manager manager{blocked, 3};
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  background_saver writer{save, manager};
  REQUIRE(writer.save(s, 1).ok());
  auto failed = writer.wait();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.message().find("saver: step 1") != std::string::npos);
  CHECK(failed.message().find("not-a-directory") != std::string::npos);
  CHECK(writer.wait().ok());
  // The next save reports the failure of the one before it and starts nothing.
  REQUIRE(writer.save(s, 2).ok());
  CHECK_FALSE(writer.save(s, 3).ok());
  CHECK(writer.wait().ok());
}

TEST_CASE("a sharded saver writes each ps task's variables on that task and restores them all or none") {
  temp_dir dir;
  graph g;
  auto m = model_on_two_ps(g);
  auto init = ops::global_variables_initializer(g);
  saver save{g, {}, dir.path()};
  REQUIRE(save.status().ok());
  checkpoint_manager manager{dir.path(), 1};
  session_options cluster;
  cluster.in_process_cluster = {{"ps", 2}, {"worker", 1}};
  values saved;
  {
    session s{g, cluster};
    REQUIRE(s.run_targets({init}).ok());
    train_steps(s, *m, 3);
    saved = read_values(s, *m);
    REQUIRE(save.save(s, manager, 3).ok());
    // The shards were written where the variables live, and the step's own file holds only
    // their checksums.
    auto own = read_checkpoint(manager.path_for_step(3));
    REQUIRE(own.ok());
    CHECK(own->entries.size() == 1);
    CHECK(own->entries.count(checkpoint_shards_entry) == 1);
    auto shard0 = read_checkpoint(checkpoint_shard_path(dir.path(), 3, 0));
    auto shard1 = read_checkpoint(checkpoint_shard_path(dir.path(), 3, 1));
    REQUIRE(shard0.ok());
    REQUIRE(shard1.ok());
    CHECK(shard0->entries.count("layer/weights") == 1);
    CHECK(shard0->entries.count("global_step") == 1);
    CHECK(shard1->entries.size() == 1);
    CHECK(shard1->entries.at("counter").scalar_value<std::int32_t>() == 9);
    // A later save expires step 3 (keep 1) with its shards.
    train_steps(s, *m, 1);
    REQUIRE(save.save(s, manager, 4).ok());
    CHECK_FALSE(std::ifstream{checkpoint_shard_path(dir.path(), 3, 0)}.good());
    CHECK_FALSE(std::ifstream{checkpoint_shard_path(dir.path(), 3, 1)}.good());
  }
  REQUIRE(manager.latest() == manager.path_for_step(4));
  session fresh{g, cluster};
  REQUIRE(fresh.run_targets({init}).ok());
  auto initial = read_values(fresh, *m);
  // A shard that is not the one its checkpoint recorded (another save's, or damaged) is refused,
  // and no variable on either ps changes.
  auto shard1 = checkpoint_shard_path(dir.path(), 4, 1);
  {
    auto other = read_checkpoint(shard1);
    REQUIRE(other.ok());
    other->entries.at("counter") = tensor::from_vector<std::int32_t>({77}, tensor_shape{});
    REQUIRE(write_checkpoint(shard1 + ".other", 4, other->entries).ok());
    std::rename(shard1.c_str(), (shard1 + ".kept").c_str());
    std::rename((shard1 + ".other").c_str(), shard1.c_str());
  }
  CHECK_FALSE(manager.latest().has_value());
  auto refused = save.restore(fresh, manager.path_for_step(4));
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.message(), "is not the one its checkpoint recorded"));
  CHECK(contains(refused.message(), shard1));
  CHECK(read_values(fresh, *m) == initial);
  std::rename((shard1 + ".kept").c_str(), shard1.c_str());
  REQUIRE(manager.latest() == manager.path_for_step(4));
  REQUIRE(save.restore(fresh, *manager.latest()).ok());
  saved.weights = std::vector<float>{3, 4, 5, 8, 9, 10};
  CHECK(read_values(fresh, *m).weights == saved.weights);
  CHECK(read_values(fresh, *m).counter == 12);
  CHECK(read_values(fresh, *m).global_step == 4);
  // An unsharded saver does not take a sharded checkpoint for an empty one.
  saver plain{g};
  auto wrong = plain.restore(fresh, manager.path_for_step(4));
  REQUIRE_FALSE(wrong.ok());
  CHECK(contains(wrong.message(), "restore it with a sharded saver"));
}
