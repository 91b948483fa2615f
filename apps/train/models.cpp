#include "train/models.hpp"

#include "graph/ops.hpp"

#include <cmath>
#include <random>

namespace actorflow::train {

std::unique_ptr<optimizer> make_optimizer(const std::string& name, double learning_rate) {
  if (name == "momentum")
    return std::make_unique<momentum_optimizer>(learning_rate, 0.9);
  if (name == "adam")
    return std::make_unique<adam_optimizer>(learning_rate);
  return std::make_unique<gradient_descent_optimizer>(learning_rate);
}

mlp_model build_mlp(graph& g, optimizer& opt) {
  mlp_model m;
  m.images = ops::placeholder(g, dtype::float32, {-1, 784}, "images");
  m.labels = ops::placeholder(g, dtype::float32, {-1, 10}, "labels");
  auto layer = [&](output in, std::int64_t fan_in, std::int64_t fan_out, const std::string& name,
                   bool relu) {
    auto scope = g.name_scope(name);
    auto limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    auto w = ops::variable(g, ops::random_uniform(g, {fan_in, fan_out}, -limit, limit), "weights");
    auto b = ops::variable(g, ops::zeros(g, {fan_out}), "biases");
    m.weights.push_back(w);
    m.weights.push_back(b);
    auto z = ops::matmul(in, w) + b;
    return relu ? ops::relu(z) : z;
  };
  auto h1 = layer(m.images, 784, 256, "hidden1", true);
  auto h2 = layer(h1, 256, 128, "hidden2", true);
  m.logits = layer(h2, 128, 10, "logits", false);
  m.loss = ops::reduce_mean(ops::softmax_cross_entropy_with_logits(m.logits, m.labels), {}, false,
                            "loss");
  auto hits = ops::equal(ops::argmax(m.logits, 1), ops::argmax(m.labels, 1));
  m.correct = ops::reduce_sum(ops::cast(hits, dtype::float32), {}, false, "correct");
  m.train = opt.minimize(m.loss);
  return m;
}

linreg_model build_linreg(graph& g, optimizer& opt, std::uint64_t seed,
                          const linreg_devices& devices) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> uniform{0.f, 1.f};
  std::vector<float> x_data(100), y_data(100);
  for (std::size_t i = 0; i < x_data.size(); ++i) {
    x_data[i] = uniform(rng);
    y_data[i] = x_data[i] * 0.1f + 0.3f;
  }
  g.seed = static_cast<std::int64_t>(seed);
  linreg_model m;
  {
    auto d = g.device(devices.weights);
    m.weights = ops::variable(g, ops::random_uniform(g, {1}, -1.0, 1.0), "Weights");
  }
  {
    auto d = g.device(devices.biases);
    m.biases = ops::variable(g, ops::zeros(g, {1}), "biases");
  }
  {
    auto d = g.device(devices.model);
    m.prediction = m.weights * ops::constant(g, x_data, {100}, "x_data") + m.biases;
    m.loss = ops::reduce_mean(ops::square(m.prediction - ops::constant(g, y_data, {100}, "y_data")),
                              {}, false, "loss");
  }
  {
    auto d = g.device(devices.optimizer);
    m.train = opt.minimize(m.loss);
  }
  return m;
}

linreg_devices classic_in_graph_devices() {
  return {"/job:canshu/task:0", "/job:canshu/task:1", "/job:gongzuo/task:0", "/job:gongzuo/task:1"};
}

} // namespace actorflow::train
