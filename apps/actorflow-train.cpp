// actorflow-train: the main job. Trains the classic linear regression or a 784-256-128-10 ReLU
// MLP on Fashion-MNIST with actorflow sessions, shows progress, writes metrics.csv and
// curve.svg, and ends with "examples/s: N" and "test accuracy: X" (mlp).
#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "serialization/checkpoint.hpp"
#include "serialization/idx_reader.hpp"
#include "train/metrics.hpp"
#include "train/models.hpp"
#include "train/options.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>

#include <unistd.h>

using namespace actorflow;
using train::train_options;

namespace {

using clock_type = std::chrono::steady_clock;

int fail(const status& s) {
  std::cerr << "actorflow-train: " << s.message() << '\n';
  return 1;
}

session_options make_session_options(const train_options& o) {
  session_options s;
  s.inter_op_parallelism_threads = o.threads;
  s.intra_op_parallelism_threads = o.threads;
  return s;
}

// --- linreg ---------------------------------------------------------------------------------

int run_linreg(const train_options& o) {
  graph g;
  auto opt = train::make_optimizer(o.optimizer, o.learning_rate);
  auto m = train::build_linreg(g, *opt, o.seed);
  auto& w = m.weights;
  auto& b = m.biases;
  auto& train = m.train;
  if (!g.status().ok())
    return fail(g.status());
  session s{g, make_session_options(o)};
  if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok())
    return fail(st);
  for (int step = 0; step < o.steps; ++step) {
    if (auto st = s.run_targets({train}); !st.ok())
      return fail(st);
    if (step % 20 == 0 || step == o.steps - 1) {
      auto values = s.run({w.read, b.read});
      if (!values)
        return fail(values.error());
      std::printf("%d %.6f %.6f\n", step, values->at(0).scalar_value<double>(),
                  values->at(1).scalar_value<double>());
      std::fflush(stdout);
    }
  }
  return 0;
}

// --- mlp ------------------------------------------------------------------------------------

/// Prints progress: a live status line on a terminal, plain lines when piped.
class progress_printer {
public:
  explicit progress_printer(int log_every) : live_(::isatty(STDOUT_FILENO) == 1), every_(log_every) {}

  void update(std::int64_t step, int epoch, int epochs, double loss, double examples_per_second) {
    char line[160];
    std::snprintf(line, sizeof line, "step %lld  epoch %d/%d  loss %.4f  examples/s %.0f",
                  static_cast<long long>(step), epoch, epochs, loss, examples_per_second);
    if (live_) {
      // About ten redraws a second: enough to watch, cheap for the terminal.
      auto now = clock_type::now();
      if (now - last_redraw_ < std::chrono::milliseconds(100))
        return;
      last_redraw_ = now;
      std::printf("\r%-78s", line);
      std::fflush(stdout);
      dirty_ = true;
    } else if (step % every_ == 0) {
      std::printf("%s\n", line);
      std::fflush(stdout);
    }
  }

  void line(const std::string& text) {
    if (dirty_)
      std::printf("\n");
    dirty_ = false;
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }

private:
  bool live_;
  int every_;
  bool dirty_ = false;
  clock_type::time_point last_redraw_{};
};

result<double> evaluate(session& s, const train::mlp_model& m, const dataset& test) {
  batch_options in_order;
  in_order.batch_size = 1000;
  in_order.shuffle = false;
  auto batches = batch_iterator::create(test, in_order);
  if (!batches)
    return batches.error();
  double correct = 0;
  for (std::int64_t i = 0; i < batches->batches_per_epoch(); ++i) {
    auto& b = batches->next();
    auto r = s.run({m.correct}, {{m.images, b.images}, {m.labels, b.one_hot}});
    if (!r)
      return r.error();
    correct += r->at(0).scalar_value<double>();
  }
  return correct / static_cast<double>(test.size());
}

int run_mlp(const train_options& o) {
  if (auto st = train::ensure_writable_directory(o.output_dir); !st.ok())
    return fail(st);
  if (!o.checkpoint_dir.empty())
    if (auto st = train::ensure_writable_directory(o.checkpoint_dir); !st.ok())
      return fail(st);
  auto train_set = load_fashion_mnist(o.data_dir, "train");
  if (!train_set)
    return fail(train_set.error());
  auto test_set = load_fashion_mnist(o.data_dir, "t10k");
  if (!test_set)
    return fail(test_set.error());

  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  auto m = train::build_mlp(g, *train::make_optimizer(o.optimizer, o.learning_rate));
  saver checkpoints_saver{g};
  if (!g.status().ok())
    return fail(g.status());
  if (!checkpoints_saver.status().ok())
    return fail(checkpoints_saver.status());
  session s{g, make_session_options(o)};
  if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok())
    return fail(st);

  std::unique_ptr<checkpoint_manager> checkpoints;
  std::int64_t step = 0;
  if (!o.checkpoint_dir.empty()) {
    checkpoints = std::make_unique<checkpoint_manager>(o.checkpoint_dir, o.keep_checkpoints);
    if (o.resume) {
      auto latest = checkpoints->latest();
      if (!latest)
        return fail(make_error(errc::not_found, "--resume: no checkpoint in '" + o.checkpoint_dir + "'"));
      auto data = read_checkpoint(*latest);
      if (!data)
        return fail(data.error());
      if (auto st = checkpoints_saver.restore(s, *data, *latest); !st.ok())
        return fail(st);
      step = data->step;
      std::cout << "resumed from " << *latest << " at step " << step << '\n';
    }
  }

  train::metrics_log metrics;
  if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
    return fail(st);
  batch_options shuffled;
  shuffled.batch_size = o.batch_size;
  shuffled.seed = o.seed;
  shuffled.drop_last = true;
  auto batches = batch_iterator::create(*train_set, shuffled);
  if (!batches)
    return fail(batches.error());
  auto steps_per_epoch = batches->batches_per_epoch();
  // The batch order is a function of the seed: replaying it puts a resumed run exactly where
  // the interrupted one stopped.
  for (std::int64_t skipped = 0; skipped < step; ++skipped)
    batches->next();
  progress_printer progress{o.log_every};
  double train_seconds = 0;
  std::int64_t trained_examples = 0;
  auto window_start = clock_type::now();
  std::int64_t window_examples = 0;
  double examples_per_second = 0;
  bool first_window_closed = false;
  auto total_steps = steps_per_epoch * o.epochs;
  while (step < total_steps) {
    auto& batch = batches->next();
    auto started = clock_type::now();
    auto r = s.run({m.loss, m.correct}, {{m.images, batch.images}, {m.labels, batch.one_hot}}, {m.train});
    if (!r)
      return fail(r.error());
    auto finished = clock_type::now();
    train_seconds += std::chrono::duration<double>(finished - started).count();
    trained_examples += batch.size;
    window_examples += batch.size;
    ++step;
    auto window = std::chrono::duration<double>(finished - window_start).count();
    if (window > 0.5) {
      examples_per_second = static_cast<double>(window_examples) / window;
      window_start = finished;
      window_examples = 0;
      first_window_closed = true;
    } else if (!first_window_closed && train_seconds > 0) {
      // Before the first window closes, show the mean so far rather than 0.
      examples_per_second = static_cast<double>(trained_examples) / train_seconds;
    }
    auto loss = r->at(0).scalar_value<double>();
    auto epoch = static_cast<int>((step - 1) / steps_per_epoch) + 1;
    if (!std::isfinite(loss))
      return fail(make_error(errc::internal, "the loss is " + std::to_string(loss) + " at step " +
                                               std::to_string(step) + "; lower --learning-rate"));
    if (step == 1 || step % o.log_every == 0 || step == total_steps)
      metrics.add({step, epoch, loss, r->at(1).scalar_value<double>() / batch.size, examples_per_second});
    progress.update(step, epoch, o.epochs, loss, examples_per_second);
    if (step % steps_per_epoch == 0 && checkpoints) {
      if (auto st = checkpoints_saver.save(s, *checkpoints, step); !st.ok())
        return fail(st);
    }
  }
  auto accuracy = evaluate(s, m, *test_set);
  if (!accuracy)
    return fail(accuracy.error());
  if (auto st = train::write_curve_svg(o.output_dir + "/curve.svg", metrics.rows(),
                                       "actorflow: MLP on Fashion-MNIST (" + o.optimizer + ")");
      !st.ok())
    return fail(st);
  progress.line("metrics: " + o.output_dir + "/metrics.csv, curve: " + o.output_dir + "/curve.svg");
  char line[64];
  std::snprintf(line, sizeof line, "examples/s: %.0f",
                train_seconds > 0 ? static_cast<double>(trained_examples) / train_seconds : 0.0);
  progress.line(line);
  std::snprintf(line, sizeof line, "test accuracy: %.4f", *accuracy);
  progress.line(line);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  auto parsed = train::parse_train_options(argc, argv);
  if (!parsed) {
    std::cerr << "actorflow-train: " << parsed.error().message() << '\n';
    return 2;
  }
  auto& o = *parsed;
  if (o.help) {
    std::cout << train::train_usage();
    return 0;
  }
  if (o.threads > 0)
    set_default_scheduler_threads(o.threads);
  return o.model == "linreg" ? run_linreg(o) : run_mlp(o);
}
