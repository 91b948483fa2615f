// Small pushes to one parameter shard (actors/protocols/ps.hpp): 1 KiB gradients (256 float32)
// applied with gradient descent, from 2 pushing actors with 64 requests each in flight, counted
// as updates applied per second:
//   shard_updates_per_s_in_process: the ps task and both pushers in one actor system;
//   shard_updates_per_s_loopback:  the ps task an actorflow-worker process, each pusher in an
//                                  actor system of its own connected over loopback.
// The version the shard reports at the end checks that every push was applied exactly once.
// And large pushes (the MLP's 784x256 float32 gradient, 784 KiB), one at a time from one client
// over loopback:
//   shard_large_push_ms_bulk: over the ps task's bulk channel (shard_pusher); baseline: the same
//                             gradient inside the CAF message, same run.
#include "support/processes.hpp"
#include "bench_util.hpp"

#include "actors/master.hpp"
#include "actors/protocols/task.hpp"
#include "actors/protocols/wire.hpp"
#include "actors/session.hpp"
#include "actors/session_actor.hpp"
#include "actors/task_client.hpp"
#include "actors/task_service.hpp"
#include "graph/ops.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <vector>

using namespace actorflow;
using namespace actorflow::protocol;
using namespace std::chrono_literals;

namespace {

constexpr int pushes_per_pusher = 20000;
constexpr int in_flight = 64;
constexpr std::int64_t elements = 256; // 1 KiB of float32
constexpr std::int64_t big_elements = 784 * 256;
constexpr int large_pushes = 200;

/// Sends `total` gradient steps to `shard`, `in_flight` at a time; sets `done` at the end.
void pusher(caf::event_based_actor* self, shard_actor shard, std::shared_ptr<std::promise<status>> done) {
  auto gradient = tensor::from_vector<float>(std::vector<float>(elements, 1e-6f));
  auto sent = std::make_shared<int>(0);
  auto answered = std::make_shared<int>(0);
  auto send_one = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak = send_one;
  *send_one = [=] {
    auto again = weak.lock();
    ++*sent;
    self->request(shard, 60s, apply_gd_atom::value, 1.0, gradient)
      .then(
        [=](std::int64_t) {
          if (++*answered == pushes_per_pusher) {
            done->set_value({});
            self->quit();
          } else if (*sent < pushes_per_pusher) {
            (*again)();
          }
        },
        [=](caf::error& err) {
          done->set_value(make_error(errc::unavailable, self->system().render(err)));
          self->quit();
        });
  };
  for (int i = 0; i < in_flight; ++i)
    (*send_one)();
}

/// Updates/s of two pushers, one in each system (the same system twice for in-process).
result<double> push_rate(std::vector<std::pair<caf::actor_system*, shard_actor>> pushers) {
  std::vector<std::future<status>> finished;
  auto seconds = bench::time_seconds([&] {
    for (auto& [sys, shard] : pushers) {
      auto done = std::make_shared<std::promise<status>>();
      finished.push_back(done->get_future());
      sys->spawn(pusher, shard, done);
    }
    for (auto& f : finished)
      f.wait();
  });
  for (auto& f : finished)
    AF_RETURN_IF_ERROR(f.get());
  return static_cast<double>(pushers.size() * pushes_per_pusher) / seconds;
}

/// The graph that creates w on the ps and its initializer.
struct shard_graph {
  graph g;
  actorflow::variable w, big;
  output init;
  shard_graph() {
    auto on_ps = g.device("/job:ps/task:0");
    w = ops::variable(g, ops::constant(g, std::vector<float>(elements, 0.f), {elements}), "w");
    big = ops::variable(g, ops::constant(g, std::vector<float>(big_elements, 0.f), {big_elements}),
                        "big");
    init = ops::global_variables_initializer(g);
  }
};

result<shard_actor> shard_named(caf::actor_system& sys, const task_actor& task) {
  caf::scoped_actor self{sys};
  result<shard_actor> out = make_error(errc::internal, "no answer");
  self->request(task, 30s, shard_atom::value, std::string{"w"})
    .receive([&](shard_actor& s) { out = s; },
             [&](caf::error& e) { out = make_error(errc::unavailable, sys.render(e)); });
  return out;
}

std::int64_t version_of(caf::actor_system& sys, const shard_actor& shard) {
  caf::scoped_actor self{sys};
  std::int64_t version = -1;
  self->request(shard, 30s, version_atom::value).receive([&](std::int64_t v) { version = v; },
                                                         [](caf::error&) {});
  return version;
}

caf::actor_system_config& client_config(caf::actor_system_config& config) {
  config.load<caf::io::middleman>();
  add_actorflow_message_types(config);
  config.set("scheduler.policy", caf::atom("sharing"));
  config.set("middleman.workers", std::size_t{0});
  return config;
}

} // namespace

int main() {
  // In one process.
  double in_process = 0;
  {
    auto& sys = default_actor_system();
    task_service_options options;
    options.threads = 1;
    auto ps = spawn_task_service(sys, "ps", 0, options);
    master_options config;
    config.task_services = {ps};
    auto master = spawn_master(sys, config);
    shard_graph m;
    session_options session_opts;
    session_opts.master = existing_master(master);
    {
      session s{m.g, session_opts};
      if (auto st = s.run_targets({m.init}); !st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
        return 1;
      }
    }
    auto shard = shard_named(sys, ps);
    if (!shard) {
      std::fprintf(stderr, "error: %s\n", shard.error().to_string().c_str());
      return 1;
    }
    auto rate = push_rate({{&sys, *shard}, {&sys, *shard}});
    if (!rate) {
      std::fprintf(stderr, "error: in-process: %s\n", rate.error().to_string().c_str());
      return 1;
    }
    in_process = *rate;
    std::fprintf(stderr, "in-process: version %lld after %d pushes\n",
                 static_cast<long long>(version_of(sys, *shard)), 2 * pushes_per_pusher);
    protocol::send_stop(ps);
    protocol::send_stop(master);
  }
  bench::emit({"shard_updates_per_s_in_process", in_process, "updates/s", std::nullopt,
               std::nullopt, "1 KiB gradient steps on one shard from 2 actors, 64 in flight each"});

  // Over loopback: a ps process, two client systems.
  auto port = actorflow::testing::free_loopback_port();
  auto address = "127.0.0.1:" + std::to_string(port);
  actorflow::testing::child_process ps{
    ACTORFLOW_WORKER_BINARY, {"--cluster", "ps=" + address, "--job", "ps", "--threads", "1"}};
  if (!ps.wait_for_line("serving on", 20s)) {
    std::fprintf(stderr, "error: the ps did not start\n");
    return 1;
  }
  {
    shard_graph m;
    session_options session_opts;
    session_opts.target = "caf://" + address;
    session s{m.g, session_opts};
    if (auto st = s.run_targets({m.init}); !st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  caf::actor_system_config first_config, second_config;
  caf::actor_system first{client_config(first_config)};
  caf::actor_system second{client_config(second_config)};
  std::vector<std::pair<caf::actor_system*, shard_actor>> pushers;
  for (auto* sys : {&first, &second}) {
    auto task = sys->middleman().remote_actor<task_actor>("127.0.0.1", port);
    if (!task) {
      std::fprintf(stderr, "error: %s\n", sys->render(task.error()).c_str());
      return 1;
    }
    auto shard = shard_named(*sys, *task);
    if (!shard) {
      std::fprintf(stderr, "error: %s\n", shard.error().to_string().c_str());
      return 1;
    }
    pushers.emplace_back(sys, *shard);
  }
  auto loopback = push_rate(pushers);
  if (!loopback) {
    std::fprintf(stderr, "error: loopback: %s\n", loopback.error().to_string().c_str());
    return 1;
  }
  std::fprintf(stderr, "loopback: version %lld after %d pushes\n",
               static_cast<long long>(version_of(first, pushers[0].second)), 2 * pushes_per_pusher);
  bench::figure f{"shard_updates_per_s_loopback", *loopback, "updates/s"};
  f.baseline = in_process;
  f.ratio = *loopback / in_process;
  f.note = "the same from 2 client processes' worth of actor systems over loopback; baseline: "
           "in one process, same run";
  bench::emit(f);

  // Large pushes, one at a time: in the message, then over the bulk channel.
  auto cluster = cluster_spec::parse("ps=" + address);
  auto shards = cluster ? find_shards(first, *cluster, "ps", 30) : result<std::map<std::string, shard_location>>{cluster.error()};
  if (!shards || shards->count("big") == 0) {
    std::fprintf(stderr, "error: no shard 'big': %s\n", shards.error().to_string().c_str());
    return 1;
  }
  auto big = shards->at("big");
  auto gradient = tensor::from_vector<float>(std::vector<float>(big_elements, 1e-6f));
  caf::scoped_actor self{first};
  status failed;
  auto fail = [&](caf::error& e) { failed = make_error(errc::unavailable, first.render(e)); };
  auto in_message = bench::time_seconds([&] {
    for (int i = 0; i < large_pushes && failed.ok(); ++i)
      self->request(big.shard, 60s, apply_gd_atom::value, 1.0, gradient)
        .receive([](std::int64_t) {}, fail);
  });
  shard_pusher pusher;
  auto over_bulk = bench::time_seconds([&] {
    for (int i = 0; i < large_pushes && failed.ok(); ++i) {
      auto ticket = pusher.ship(big, "big", gradient);
      if (!ticket) {
        failed = make_error(errc::unavailable, "the ps task has no bulk endpoint");
        break;
      }
      if (auto st = pusher.flush(); !st.ok()) {
        failed = st;
        break;
      }
      self->request(big.shard, 60s, apply_gd_atom::value, 1.0, *ticket)
        .receive([](std::int64_t) {}, fail);
    }
  });
  if (!failed.ok()) {
    std::fprintf(stderr, "error: large pushes: %s\n", failed.to_string().c_str());
    return 1;
  }
  std::fprintf(stderr, "large pushes: version %lld after %d\n",
               static_cast<long long>(version_of(first, big.shard)), 2 * large_pushes);
  bench::figure large{"shard_large_push_ms_bulk", 1000.0 * over_bulk / large_pushes, "ms/push"};
  large.baseline = 1000.0 * in_message / large_pushes;
  large.ratio = large.value / *large.baseline;
  large.note = "784 KiB gradient steps, one at a time from one client over loopback, over the "
               "bulk channel; baseline: inside the CAF message, same run";
  bench::emit(large);
  ps.signal(SIGTERM);
  ps.wait_exit(10s);
  return 0;
}
