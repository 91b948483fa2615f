// The data-parallel MLP of actorflow-train: towers on workers, gradients averaged on the ps.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "train/models.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace actorflow;

namespace {

/// A batch of `rows` random images and one-hot labels, from `seed`.
std::pair<tensor, tensor> random_batch(std::int64_t rows, unsigned seed) {
  std::mt19937 rng{seed};
  std::uniform_real_distribution<float> pixel{0.f, 1.f};
  std::uniform_int_distribution<int> label{0, 9};
  tensor images{dtype::float32, tensor_shape{{rows, 784}}};
  tensor labels{dtype::float32, tensor_shape{{rows, 10}}};
  auto* x = static_cast<float*>(images.raw_data());
  auto* y = static_cast<float*>(labels.raw_data());
  for (std::int64_t i = 0; i < rows * 784; ++i)
    x[i] = pixel(rng);
  for (std::int64_t r = 0; r < rows; ++r)
    for (int c = 0, hot = label(rng); c < 10; ++c)
      y[r * 10 + c] = c == hot ? 1.f : 0.f;
  return {images, labels};
}

} // namespace

TEST_CASE("two towers with averaged gradients make the same update as one model on the whole batch") {
  auto [images, labels] = random_batch(16, 7);

  // Data parallel on an in-process cluster: 2 ps tasks (variables round robin), 2 workers.
  graph parallel;
  parallel.seed = 3;
  gradient_descent_optimizer sgd{0.5};
  train::replica_layout layout;
  layout.ps_tasks = 2;
  auto dp = train::build_data_parallel_mlp(parallel, sgd, layout);
  REQUIRE(dp.ok());
  REQUIRE(parallel.status().ok());
  std::vector<output> dp_weights;
  for (auto& v : dp->weights)
    dp_weights.push_back(v.read);
  session_options cluster;
  cluster.in_process_cluster = {{"ps", 2}, {"worker", 2}};
  session s{parallel, cluster};
  REQUIRE(s.run_targets({ops::global_variables_initializer(parallel)}).ok());
  auto before = s.run(dp_weights);
  REQUIRE(before.ok());
  feed_list shares{{dp->towers[0].images, *images.sliced(0, 0, 8)},
                   {dp->towers[0].labels, *labels.sliced(0, 0, 8)},
                   {dp->towers[1].images, *images.sliced(0, 8, 8)},
                   {dp->towers[1].labels, *labels.sliced(0, 8, 8)}};
  auto dp_loss = s.run({dp->loss}, shares, {dp->train});
  REQUIRE(dp_loss.ok());
  auto after = s.run(dp_weights);
  REQUIRE(after.ok());
  // Variables on the ps tasks, alternately; each tower's ops on its worker.
  CHECK(parallel.at(dp->weights[0].ref.node_id).assigned_device == "/job:ps/replica:0/task:0/device:CPU:0");
  CHECK(parallel.at(dp->weights[1].ref.node_id).assigned_device == "/job:ps/replica:0/task:1/device:CPU:0");
  CHECK(parallel.at(dp->towers[1].loss.node_id).assigned_device == "/job:worker/replica:0/task:1/device:CPU:0");

  // One model in one process, started from the same values, trained on the whole batch.
  graph single;
  gradient_descent_optimizer sgd_single{0.5};
  auto m = train::build_mlp(single, sgd_single);
  std::vector<output> assigns, weights;
  for (std::size_t k = 0; k < m.weights.size(); ++k) {
    assigns.push_back(ops::assign(m.weights[k], ops::constant(single, before->at(k))));
    weights.push_back(m.weights[k].read);
  }
  session local{single};
  REQUIRE(local.run_targets(assigns).ok());
  auto loss = local.run({m.loss}, {{m.images, images}, {m.labels, labels}}, {m.train});
  REQUIRE(loss.ok());
  auto expected = local.run(weights);
  REQUIRE(expected.ok());

  CHECK(dp_loss->at(0).scalar_value<float>() == Approx(loss->at(0).scalar_value<float>()).epsilon(1e-5));
  for (std::size_t k = 0; k < weights.size(); ++k) {
    auto got = after->at(k).to_vector<float>();
    auto want = expected->at(k).to_vector<float>();
    auto start = before->at(k).to_vector<float>();
    REQUIRE(got.size() == want.size());
    float largest_error = 0, largest_step = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      largest_error = std::max(largest_error, std::abs(got[i] - want[i]));
      largest_step = std::max(largest_step, std::abs(want[i] - start[i]));
    }
    INFO("variable " << k);
    CHECK(largest_step > 1e-4f); // the step moved the variable, so the comparison means something
    CHECK(largest_error < 1e-5f);
  }
}
