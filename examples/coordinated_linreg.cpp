// SPEC's linear regression (y = 0.1 x + 0.3) trained through a cluster_coordinator (TF2's
// ParameterServerStrategy) until it is told to stop:
//   coordinated_linreg --cluster '{"ps": ["127.0.0.1:2221"], "worker": ["127.0.0.1:2222", ...]}'
// with one actorflow-worker per task already running. W and b live on /job:ps/task:0; each
// closure trains one batch of its worker's own data (per_worker) on that worker and counts
// itself in a global step on the ps. Workers may be killed, frozen or cut off and come back
// meanwhile: their closures run again elsewhere. After SIGTERM or SIGINT (and at least
// --min-closures closures) it joins and prints "W w b b global step G closures N ...", and
// exits 0 only when W and b are within 0.01 of 0.1 and 0.3 and G == N: no closure was lost or
// counted twice. Every --report-every closures it prints "closures N W w b b workers A/T".
#include "actors/cluster_coordinator.hpp"
#include "actors/cluster_spec.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "support/flags.hpp"

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;

namespace {

std::atomic<bool> stop_requested{false};

extern "C" void request_stop(int) { stop_requested = true; }

/// One worker's own examples of y = 0.1 x + 0.3, x uniform in [0, 1).
struct worker_data {
  std::vector<float> x, y;
  std::size_t next = 0;

  static worker_data make(int worker, std::size_t examples) {
    std::mt19937_64 rng{static_cast<std::uint64_t>(1000 + worker)};
    std::uniform_real_distribution<float> uniform{0.f, 1.f};
    worker_data d;
    for (std::size_t i = 0; i < examples; ++i) {
      d.x.push_back(uniform(rng));
      d.y.push_back(d.x.back() * 0.1f + 0.3f);
    }
    return d;
  }

  /// The next `n` examples, wrapping around.
  std::pair<tensor, tensor> batch(std::size_t n) {
    std::vector<float> bx, by;
    for (std::size_t i = 0; i < n; ++i, next = (next + 1) % x.size()) {
      bx.push_back(x[next]);
      by.push_back(y[next]);
    }
    auto rows = static_cast<std::int64_t>(n);
    return {tensor::from_vector(bx, tensor_shape{{rows}}), tensor::from_vector(by, tensor_shape{{rows}})};
  }
};

int fail(const status& s) {
  std::cerr << "coordinated_linreg: " << s.message() << '\n';
  return 1;
}

} // namespace

int main(int argc, char** argv) {
  // A peer or pipe reader that goes away fails a write (EPIPE) instead of killing the program.
  std::signal(SIGPIPE, SIG_IGN);
  std::string cluster_text;
  int min_closures = 1000, report_every = 200;
  double timeout_seconds = 5;
  apps::flag_set flags;
  flags.values = {
    {"--cluster", [&](const std::string& v) { cluster_text = v; return status{}; }},
    {"--min-closures",
     [&](const std::string& v) { return apps::parse_int_flag("--min-closures", v, 1, min_closures); }},
    {"--report-every",
     [&](const std::string& v) { return apps::parse_int_flag("--report-every", v, 1, report_every); }},
    {"--timeout",
     [&](const std::string& v) {
       int seconds = 5;
       auto st = apps::parse_int_flag("--timeout", v, 1, seconds);
       timeout_seconds = seconds;
       return st;
     }},
  };
  if (auto bad = apps::parse_flags(argc, argv, flags); !bad.ok() || cluster_text.empty()) {
    std::cerr << "coordinated_linreg: " << (bad.ok() ? "--cluster is required" : bad.message())
              << "\nusage: coordinated_linreg --cluster SPEC [--min-closures N] "
                 "[--report-every N] [--timeout SECONDS]\n";
    return 2;
  }
  auto spec = cluster_spec::parse(cluster_text);
  if (!spec)
    return fail(spec.error());
  std::signal(SIGTERM, request_stop);
  std::signal(SIGINT, request_stop);

  graph g;
  actorflow::variable w, b, global_step;
  {
    auto ps = g.device("/job:ps/task:0");
    w = ops::variable(g, ops::constant(g, 0.f), "W");
    b = ops::variable(g, ops::constant(g, 0.f), "b");
    global_step = ops::variable(g, ops::constant(g, std::int64_t{0}), "global_step");
  }
  // The model names no task: it runs on whichever worker runs the closure.
  auto x = ops::placeholder(g, dtype::float32, tensor_shape{{-1}}, "x");
  auto y = ops::placeholder(g, dtype::float32, tensor_shape{{-1}}, "y");
  auto loss = ops::reduce_mean(ops::square(w.read * x + b.read - y));
  // 0.1, not the in-graph example's 0.5: asynchronous workers apply gradients computed at the
  // same values side by side, which with 0.5 adds up to a step that diverges.
  auto train = ops::group(g, {gradient_descent_optimizer{0.1}.minimize(loss),
                              ops::assign_add(global_step, ops::constant(g, std::int64_t{1}))});
  if (!g.status().ok())
    return fail(g.status());

  session_options on_ps;
  on_ps.cluster = std::make_shared<cluster_spec>(*spec);
  on_ps.timeout_seconds = timeout_seconds;
  on_ps.device_filters = {"/job:ps"};
  on_ps.default_task = "/job:ps/task:0";
  session ps_session{g, on_ps};
  if (auto st = ps_session.run_targets({ops::global_variables_initializer(g)}); !st.ok())
    return fail(st);

  coordinator_options options;
  options.session.timeout_seconds = timeout_seconds;
  options.probe_interval_seconds = 0.5;
  cluster_coordinator coordinator{*spec, options};
  auto data = coordinator.create_per_worker([](int worker) { return worker_data::make(worker, 1000); });
  auto read_model = [&]() -> result<std::vector<tensor>> {
    return ps_session.run({w.read, b.read, global_step.read});
  };

  std::int64_t closures = 0;
  while (!stop_requested || closures < min_closures) {
    for (int i = 0; i < report_every; ++i)
      coordinator.schedule([&](worker_context& on) -> result<bool> {
        auto [bx, by] = data.on(on).batch(100);
        AF_RETURN_IF_ERROR(on.run_targets(g, {train}, {{x, bx}, {y, by}}));
        return true;
      });
    if (auto st = coordinator.join(); !st.ok())
      return fail(st);
    closures += report_every;
    auto model = read_model();
    if (!model)
      return fail(model.error());
    std::printf("closures %lld W %.4f b %.4f workers %d/%d\n", static_cast<long long>(closures),
                model->at(0).scalar_value<double>(), model->at(1).scalar_value<double>(),
                coordinator.available_workers(), coordinator.num_workers());
    std::fflush(stdout);
  }
  auto model = read_model();
  if (!model)
    return fail(model.error());
  auto w_value = model->at(0).scalar_value<double>();
  auto b_value = model->at(1).scalar_value<double>();
  auto steps = model->at(2).scalar_value<std::int64_t>();
  auto stats = coordinator.stats();
  std::printf("W %.4f b %.4f global step %lld closures %lld rescheduled %lld workers lost %lld\n",
              w_value, b_value, static_cast<long long>(steps), static_cast<long long>(closures),
              static_cast<long long>(stats.rescheduled), static_cast<long long>(stats.workers_lost));
  std::fflush(stdout);
  if (steps != closures)
    return fail(make_error(errc::internal, "the global step is " + std::to_string(steps) + ", not " +
                                             std::to_string(closures)));
  if (!(std::abs(w_value - 0.1) < 0.01 && std::abs(b_value - 0.3) < 0.01))
    return fail(make_error(errc::internal, "W and b did not reach 0.1 and 0.3"));
  return 0;
}
