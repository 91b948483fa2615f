// What metrics and TensorBoard event files cost SPEC's classic example (Weights on
// /job:canshu/task:0, biases on /job:canshu/task:1, the model on /job:gongzuo/task:0, the SGD
// update on /job:gongzuo/task:1), on four actorflow-worker processes on loopback, this process
// the client and master. Two clusters of the same four tasks run side by side:
//   off: workers without --metrics-port (they count nothing), the client's registry disabled,
//        no event file;
//   on:  workers with --metrics-port, the client serving its metrics too, every endpoint
//        scraped once a second (Prometheus's default is 15 s) by a thread of this process, and
//        the client writing an event record of scalars after every step (actorflow-train writes
//        one every --log-every steps, 50 by default).
// Rounds alternate off, on, off, on, ... so that the machine's noise falls on both; the figure
// is the median steps/s of each and their ratio (target: on at least 0.97 of off).
#include "support/metrics_http.hpp"
#include "support/processes.hpp"
#include "bench_util.hpp"
#include "train/models.hpp"

#include "actors/cluster_spec.hpp"
#include "actors/session.hpp"
#include "graph/metrics.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "serialization/event_file.hpp"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

using namespace actorflow;

namespace {

constexpr int rounds = 10;
constexpr int steps_per_round = 2000;
constexpr int warmup_steps = 50;

/// The classic graph in its own session on one cluster.
struct classic_run {
  graph g;
  output train;
  output loss;
  std::unique_ptr<session> s;

  explicit classic_run(const std::string& spec_json) {
    gradient_descent_optimizer sgd{0.5};
    auto m = train::build_linreg(g, sgd, 1, train::classic_in_graph_devices());
    train = m.train;
    loss = m.loss;
    session_options options;
    options.cluster = std::make_shared<cluster_spec>(*cluster_spec::parse(spec_json));
    options.timeout_seconds = 30;
    s = std::make_unique<session>(g, options);
  }
};

/// Fetches every endpoint once a second while running.
class scraper {
public:
  explicit scraper(std::vector<std::uint16_t> ports) : ports_(std::move(ports)) {}
  void start() {
    running_ = true;
    thread_ = std::thread{[this] {
      while (running_) {
        for (auto port : ports_) {
          httplib::Client client{"127.0.0.1", port};
          if (auto r = client.Get("/metrics"); r && r->status == 200)
            ++scrapes;
        }
        for (int i = 0; i < 10 && running_; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }};
  }
  void stop() {
    running_ = false;
    if (thread_.joinable())
      thread_.join();
  }
  std::atomic<int> scrapes{0};

private:
  std::vector<std::uint16_t> ports_;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

} // namespace

int main() {
  using actorflow::testing::cluster_processes;
  using actorflow::testing::free_loopback_port;
  const std::vector<std::pair<std::string, int>> jobs{{"canshu", 2}, {"gongzuo", 2}};
  cluster_processes quiet{ACTORFLOW_WORKER_BINARY, jobs, 1};
  std::vector<std::uint16_t> endpoints;
  cluster_processes observed{ACTORFLOW_WORKER_BINARY, jobs, 1,
                             [&](const std::string&, int) -> std::vector<std::string> {
                               endpoints.push_back(free_loopback_port());
                               return {"--metrics-port", std::to_string(endpoints.back())};
                             }};
  if (!quiet.ready() || !observed.ready()) {
    std::fprintf(stderr, "error: the clusters did not start\n");
    return 1;
  }
  apps::metrics_endpoint::options on_loopback;
  on_loopback.host = "127.0.0.1";
  auto own = apps::metrics_endpoint::start(on_loopback);
  if (!own) {
    std::fprintf(stderr, "error: %s\n", own.error().to_string().c_str());
    return 1;
  }
  endpoints.push_back((*own)->port());
  char logs[] = "/tmp/af-observability-XXXXXX";
  if (::mkdtemp(logs) == nullptr)
    return 1;
  auto events = event_file_writer::open(logs);
  if (!events) {
    std::fprintf(stderr, "error: %s\n", events.error().to_string().c_str());
    return 1;
  }

  classic_run off{quiet.spec_json()}, on{observed.spec_json()};
  for (auto* run : {&off, &on}) {
    if (!run->g.status().ok() || !run->s->run_targets({ops::global_variables_initializer(run->g)}).ok()) {
      std::fprintf(stderr, "error: initialising the classic example failed\n");
      return 1;
    }
    for (int i = 0; i < warmup_steps; ++i)
      if (!run->s->run_targets({run->train}).ok())
        return 1;
  }

  scraper scrapes{endpoints};
  std::vector<double> off_rates, on_rates;
  for (int round = 0; round < 2 * rounds; ++round) {
    bool observing = round % 2 == 1;
    auto& run = observing ? on : off;
    default_metrics().set_enabled(observing);
    if (observing)
      scrapes.start();
    status failure;
    auto seconds = bench::time_seconds([&] {
      for (int step = 1; step <= steps_per_round && failure.ok(); ++step) {
        auto loss = run.s->run({run.loss}, {}, {run.train});
        if (!loss) {
          failure = loss.error();
          break;
        }
        if (observing)
          failure = (*events)->add_scalars(step, {{"loss", loss->at(0).scalar_value<double>()},
                                                  {"step_time_seconds", 0.001}});
      }
    });
    scrapes.stop();
    if (!failure.ok()) {
      std::fprintf(stderr, "error: %s\n", failure.to_string().c_str());
      return 1;
    }
    (observing ? on_rates : off_rates).push_back(steps_per_round / seconds);
    std::fprintf(stderr, "round %d (%s): %.0f steps/s\n", round + 1, observing ? "on" : "off",
                 steps_per_round / seconds);
  }
  auto off_rate = bench::median(off_rates), on_rate = bench::median(on_rates);
  std::fprintf(stderr, "%d scrapes of %zu endpoints during the 'on' rounds\n", scrapes.scrapes.load(),
               endpoints.size());
  bench::figure f{"observability_steps_per_s_on", on_rate, "steps/s"};
  f.baseline = off_rate;
  f.ratio = on_rate / off_rate;
  f.note = "classic example on 4 actorflow-worker processes: metrics served, scraped every 1 s, "
           "and an event record per step (on) against none (off), median of " +
           std::to_string(rounds) + " alternating rounds of " + std::to_string(steps_per_round) +
           " steps each; target ratio >= 0.97";
  bench::emit(f);
  auto events_path = (*events)->path();
  events->reset();
  std::remove(events_path.c_str());
  ::rmdir(logs);
  return 0;
}
