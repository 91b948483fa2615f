// Parameter shards served by a task: found through its manifest, sharing storage with the
// graph's ops, and counting every update from either side.
#include "actors/master.hpp"
#include "actors/session_actor.hpp"
#include "actors/shard_actor.hpp"
#include "actors/task_service.hpp"
#include "actors/testing.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include <optional>

using namespace actorflow;
using namespace actorflow::protocol;
using namespace std::chrono_literals;

TEST_CASE("a task's manifest lists a shard per variable, which reads and updates it in turn with training steps") {
  testing::deterministic_system sys;
  auto ps = spawn_task_service(sys.system(), "ps", 0, sys.task_options("ps"));
  master_options config;
  config.task_services = {ps};
  auto master = spawn_master(sys.system(), config);

  graph g;
  actorflow::variable w;
  {
    auto on_ps = g.device("/job:ps/task:0");
    w = ops::variable(g, ops::constant(g, std::vector<float>{1, 2}, {2}), "w");
  }
  auto loss = ops::reduce_sum(ops::square(w.read), {}, false, "loss");
  auto train = gradient_descent_optimizer{0.25}.minimize(loss);
  auto options = sys.session_options();
  options.master = existing_master(master);
  session s{sys.system(), g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  REQUIRE(s.run_targets({train}).ok()); // w -= 0.25 * 2w: {0.5, 1}

  caf::scoped_actor client{sys.system()};
  auto ask = [&](auto handle, auto... xs) {
    client->send(handle, xs...);
    sys.run_all();
  };
  ask(ps, manifest_atom::value);
  std::optional<task_manifest> manifest;
  client->receive([&](task_manifest& m) { manifest = std::move(m); }, caf::after(0s) >> [] {});
  REQUIRE(manifest.has_value());
  REQUIRE(manifest->shards.size() == 1);
  CHECK(manifest->shards[0].first == "w");
  CHECK(manifest->devices.devices.size() == 1);
  auto shard = manifest->shards[0].second;

  ask(shard, read_atom::value);
  std::optional<shard_value> read;
  client->receive([&](shard_value& v) { read = std::move(v); }, caf::after(0s) >> [] {});
  REQUIRE(read.has_value());
  CHECK(read->value.to_vector<float>() == std::vector<float>{0.5f, 1.f});
  CHECK(read->version == 2); // the initializer's assign and one training step

  // A push through the protocol is what the graph sees next.
  ask(shard, apply_gd_atom::value, 1.0, tensor::from_vector<float>({0.5f, 0.5f}));
  std::int64_t version = 0;
  client->receive([&](std::int64_t v) { version = v; }, caf::after(0s) >> [] {});
  CHECK(version == 3);
  auto after = s.run({w.read});
  REQUIRE(after.ok());
  CHECK(after->at(0).to_vector<float>() == std::vector<float>{0.f, 0.5f});

  // The same shard by name; a variable the task does not hold is an error naming it.
  ask(ps, shard_atom::value, std::string{"w"});
  client->receive([&](shard_actor& again) { CHECK(again == shard); }, caf::after(0s) >> [] {
    FAIL("no shard");
  });
  ask(ps, shard_atom::value, std::string{"nope"});
  std::string refused;
  client->receive([&](shard_actor&) {}, [&](caf::error& e) { refused = sys.system().render(e); },
                  caf::after(0s) >> [] {});
  CHECK(refused.find("holds no variable 'nope'") != std::string::npos);
  // A wrong gradient is refused naming the variable, and changes nothing.
  ask(shard, apply_gd_atom::value, 1.0, tensor::from_vector<float>({1.f}));
  std::string wrong;
  client->receive([&](std::int64_t) {}, [&](caf::error& e) { wrong = sys.system().render(e); },
                  caf::after(0s) >> [] {});
  CHECK(wrong.find("variable 'w'") != std::string::npos);
  protocol::send_stop(ps);
  protocol::send_stop(master);
  sys.run_all();
}

namespace {

/// The device's AssignAdd kernel for variable "w", as a graph partition would run it: through
/// compute_async, the way the executor runs every update.
struct graph_assign_add {
  node def;
  std::unique_ptr<op_kernel> kernel;

  graph_assign_add() {
    def.name = "w/AssignAdd";
    def.op = "AssignAdd";
    def.attrs = {{"variable", std::string{"w"}}};
    def.kernel_type = dtype::float32;
    def.output_types = {dtype::float32};
    def.output_shapes = {tensor_shape{{1}}};
    auto made = kernel_registry::global().create(def, "CPU");
    REQUIRE(made.ok());
    kernel = std::move(*made);
  }

  /// Starts the update; `finished` turns true (with the kernel's status) when it is done.
  std::shared_ptr<kernel_context> start(device& dev, float delta, std::optional<status>& finished,
                                        const update_fence& fence = {}) {
    auto ctx = std::make_shared<kernel_context>(
      def, dev, 1, std::vector<tensor>{tensor{}, tensor::from_vector<float>({delta})});
    ctx->set_fence(fence);
    kernel->compute_async(*ctx, [ctx, &finished] { finished = ctx->status(); });
    return ctx;
  }
};

float stored(device& dev) {
  auto state = dev.resources().find_variable("w");
  std::lock_guard<std::mutex> guard{state->mutex};
  return state->value.to_vector<float>().at(0);
}

} // namespace

TEST_CASE("the graph's updates of a served variable wait their turn in its shard's mailbox") {
  testing::deterministic_system sys;
  std::shared_ptr<device> dev = make_cpu_device(device_name::parse("/job:ps/replica:0/task:0/device:CPU:0").value(), nullptr);
  auto table = std::make_shared<shard_table>(sys.system());
  table->serve(dev);
  // Creating the variable spawns its shard; the shard orders updates once it started.
  dev->resources().variable("w")->value = tensor::from_vector<float>({1.f});
  auto shard = table->find("w");
  REQUIRE(shard);
  sys.run_all();
  graph_assign_add add;

  SECTION("queued behind the protocol's assign, applied only when the shard runs") {
    caf::scoped_actor client{sys.system()};
    client->send(shard, assign_atom::value, tensor::from_vector<float>({5.f}));
    std::optional<status> finished;
    auto ctx = add.start(*dev, 1.f, finished);
    CHECK_FALSE(finished.has_value()); // waiting in the mailbox, not applied on this thread
    CHECK(stored(*dev) == 1.f);
    sys.run_all();
    REQUIRE(finished.has_value());
    CHECK(finished->ok());
    // assign(5) first, then += 1: in the other order it would be 5.
    CHECK(stored(*dev) == 6.f);
    client->receive([](std::int64_t version) { CHECK(version == 1); }, // the assign's answer
                    caf::after(0s) >> [] { FAIL("the assign was not answered"); });
    client->send(shard, version_atom::value);
    sys.run_all();
    client->receive([](std::int64_t version) { CHECK(version == 2); },
                    caf::after(0s) >> [] { FAIL("no version"); });
  }

  SECTION("two attempts of a fenced update queued side by side: one applies, both succeed") {
    // A closure's attempt on a worker that was lost, and its rerun elsewhere, reach the shard
    // before it ran either.
    update_fence closure_7{42, 7, 0, 7};
    std::optional<status> first, second, other;
    auto a = add.start(*dev, 1.f, first, closure_7);
    auto b = add.start(*dev, 1.f, second, closure_7);
    auto c = add.start(*dev, 10.f, other, update_fence{42, 8, 0, 7});
    CHECK(stored(*dev) == 1.f);
    sys.run_all();
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    REQUIRE(other.has_value());
    CHECK(first->ok());
    CHECK(second->ok());
    CHECK(other->ok());
    CHECK(stored(*dev) == 12.f);
    // The refused repeat yields the variable as it was when its turn came.
    CHECK(b->outputs().at(0).to_vector<float>().at(0) == 2.f);
    // Closures 7 and 8 settled: a late attempt of 7 is refused although forgotten.
    std::optional<status> late, next;
    add.start(*dev, 1.f, next, update_fence{42, 9, 0, 9});
    add.start(*dev, 1.f, late, closure_7);
    sys.run_all();
    REQUIRE(late.has_value());
    CHECK(late->ok());
    CHECK(stored(*dev) == 13.f);
  }

  SECTION("an update still queued when the shard stops fails its step, naming the variable") {
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    std::optional<status> finished;
    auto ctx = add.start(*dev, 1.f, finished);
    sys.run_all();
    REQUIRE(finished.has_value());
    CHECK(finished->code() == errc::aborted);
    CHECK(finished->message().find("shard of variable 'w' stopped") != std::string::npos);
    CHECK(stored(*dev) == 1.f);
    // Without a shard, updates apply on the kernel's own thread again.
    table->stop();
    finished.reset();
    add.start(*dev, 2.f, finished);
    REQUIRE(finished.has_value());
    CHECK(finished->ok());
    CHECK(stored(*dev) == 3.f);
  }
  table->stop();
  sys.run_all();
}

/// A ps device whose variable "w" = [1, 1] is served by a shard, on the test scheduler.
struct served_w {
  testing::deterministic_system sys;
  std::shared_ptr<device> dev =
    make_cpu_device(device_name::parse("/job:ps/replica:0/task:0/device:CPU:0").value(), nullptr);
  std::shared_ptr<shard_table> table = std::make_shared<shard_table>(sys.system());
  shard_actor shard;

  served_w() {
    table->serve(dev);
    dev->resources().variable("w")->value = tensor::from_vector<float>({1.f, 1.f});
    shard = table->find("w");
    REQUIRE(shard);
    sys.run_all();
  }
  ~served_w() {
    table->stop();
    sys.run_all();
  }
};

TEST_CASE("a shard's synchronous rounds, message by message: K gradients applied once, stale ones "
          "dropped at once, backups never waited for") {
  served_w served;
  auto& sys = served.sys;
  auto& dev = served.dev;
  auto& shard = served.shard;
  // Three workers, rounds of two (replicas_to_aggregate 2, total 3: one backup).
  std::vector<std::unique_ptr<caf::scoped_actor>> workers;
  for (int k = 0; k < 3; ++k)
    workers.push_back(std::make_unique<caf::scoped_actor>(sys.system()));
  auto offer = [&](int k, std::int64_t step, float g) {
    (*workers[k])->send(shard, accumulate_atom::value,
                        make_sync_gradient(step, k, tensor::from_vector<float>({g, g}), 0.5, 2));
    sys.run_all();
  };
  auto answer = [&](int k) {
    std::optional<sync_outcome> got;
    (*workers[k])->receive([&](sync_outcome& o) { got = o; }, caf::after(0s) >> [] {});
    return got;
  };

  offer(0, 0, 2.f);
  CHECK_FALSE(answer(0).has_value()); // the round waits for a second gradient
  CHECK(stored(*dev) == 1.f);
  offer(1, 0, 4.f);
  // Applied once, the average: 1 - 0.5 * (2 + 4) / 2 = -0.5; both told, at global step 1.
  for (int k : {0, 1}) {
    auto got = answer(k);
    REQUIRE(got.has_value());
    CHECK(got->applied);
    CHECK(got->global_step == 1);
  }
  CHECK(stored(*dev) == -0.5f);

  // The backup's gradient for step 0 comes late: dropped at once, nothing applied.
  offer(2, 0, 100.f);
  auto late = answer(2);
  REQUIRE(late.has_value());
  CHECK_FALSE(late->applied);
  CHECK(late->global_step == 1);
  CHECK(stored(*dev) == -0.5f);

  // Round 2 closes with whichever two come first, the former backup among them.
  offer(2, 1, 1.f);
  offer(0, 1, 3.f);
  for (int k : {2, 0}) {
    auto got = answer(k);
    REQUIRE(got.has_value());
    CHECK(got->applied);
    CHECK(got->global_step == 2);
  }
  CHECK(stored(*dev) == -1.5f); // -0.5 - 0.5 * (1 + 3) / 2
  (*workers[0])->send(shard, version_atom::value);
  sys.run_all();
  (*workers[0])->receive([](std::int64_t v) { CHECK(v == 2); }, caf::after(0s) >> [] { FAIL("no version"); });
}

TEST_CASE("a synchronous round missing a lost worker closes after its bound with the others' gradients") {
  served_w served;
  auto& sys = served.sys;
  auto& dev = served.dev;
  auto& shard = served.shard;
  // Two workers, rounds of two, a bound of 5 s; worker 1 is lost.
  caf::scoped_actor worker{sys.system()};
  auto offer = [&](std::int64_t step, float g) {
    worker->send(shard, accumulate_atom::value,
                 make_sync_gradient(step, 0, tensor::from_vector<float>({g, g}), 0.5, 2, 5000));
    sys.run_all();
  };
  auto answer = [&] {
    std::optional<sync_outcome> got;
    worker->receive([&](sync_outcome& o) { got = o; }, caf::after(0s) >> [] {});
    return got;
  };
  offer(0, 2.f);
  CHECK_FALSE(answer().has_value()); // waiting for worker 1
  CHECK(stored(*dev) == 1.f);
  // The bound runs out: the round closes with worker 0's gradient alone.
  sys.scheduler().trigger_timeouts();
  sys.run_all();
  auto got = answer();
  REQUIRE(got.has_value());
  CHECK(got->applied);
  CHECK(got->global_step == 1);
  CHECK(got->short_rounds == 1);
  CHECK(stored(*dev) == 0.f); // 1 - 0.5 * 2
  // The next round's bound is its own: a round completed in time is not cut short by it.
  offer(1, 2.f);
  worker->send(shard, accumulate_atom::value,
               make_sync_gradient(1, 1, tensor::from_vector<float>({4.f, 4.f}), 0.5, 2, 5000));
  sys.run_all();
  for (int k = 0; k < 2; ++k) {
    auto full = answer();
    REQUIRE(full.has_value());
    CHECK(full->global_step == 2);
    CHECK(full->short_rounds == 1);
  }
  CHECK(stored(*dev) == -1.5f); // 0 - 0.5 * (2 + 4) / 2
  sys.scheduler().trigger_timeouts();
  sys.run_all();
  CHECK(stored(*dev) == -1.5f); // round 2's stale timer closed nothing
}

TEST_CASE("updates that name their worker's life: once the worker restarted, its earlier life changes nothing") {
  served_w served;
  auto& sys = served.sys;
  auto& dev = served.dev;
  auto& shard = served.shard;
  caf::scoped_actor client{sys.system()};
  auto push = [&](const std::string& worker, std::uint64_t life, float g) {
    client->send(shard, apply_gd_atom::value, 1.0, tensor::from_vector<float>({g, g}),
                 update_origin{worker, life});
    sys.run_all();
    std::optional<std::int64_t> version;
    std::optional<std::string> refused;
    client->receive([&](std::int64_t v) { version = v; },
                    [&](caf::error& err) { refused = sys.system().render(err); },
                    caf::after(0s) >> [] { FAIL("no answer"); });
    return std::make_pair(version, refused);
  };
  const std::uint64_t first_life = 11, second_life = 22;
  CHECK(push("worker1", first_life, 1.f).first.has_value()); // w = 0
  CHECK(push("worker1", second_life, 1.f).first.has_value()); // restarted: w = -1
  // The frozen first life resumes: refused, naming the worker.
  auto [version, refused] = push("worker1", first_life, 100.f);
  CHECK_FALSE(version.has_value());
  REQUIRE(refused.has_value());
  CHECK(refused->find("earlier life of worker 'worker1'") != std::string::npos);
  CHECK(stored(*dev) == -1.f);
  // The current life, another worker, and senders that name no life still count.
  CHECK(push("worker1", second_life, 1.f).first.has_value());
  CHECK(push("worker2", 33, 1.f).first.has_value()); // lives are drawn at random: unique
  CHECK(push("anyone", 0, 1.f).first.has_value());
  CHECK(stored(*dev) == -4.f);
  // Adds fenced the same way.
  client->send(shard, assign_add_atom::value, tensor::from_vector<float>({5.f, 5.f}),
               update_origin{"worker1", first_life});
  sys.run_all();
  client->receive([](std::int64_t) { FAIL("a retired life's add was applied"); },
                  [](caf::error&) {}, caf::after(0s) >> [] { FAIL("no answer"); });
  CHECK(stored(*dev) == -4.f);
}
