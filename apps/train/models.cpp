#include "train/models.hpp"

#include "graph/control_flow.hpp"
#include "graph/ops.hpp"
#include "graph/replica_device_setter.hpp"

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

namespace {

constexpr std::int64_t rnn_steps = 28;
constexpr std::int64_t rnn_input = 28;
constexpr std::int64_t rnn_units = 128;

/// The MLP's weights and biases, layer by layer, in name scopes hidden1, hidden2, logits.
std::vector<variable> make_mlp_variables(graph& g) {
  std::vector<variable> vars;
  auto layer = [&](std::int64_t fan_in, std::int64_t fan_out, const std::string& name) {
    auto scope = g.name_scope(name);
    auto limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    vars.push_back(ops::variable(g, ops::random_uniform(g, {fan_in, fan_out}, -limit, limit), "weights"));
    vars.push_back(ops::variable(g, ops::zeros(g, {fan_out}), "biases"));
  };
  layer(784, 256, "hidden1");
  layer(256, 128, "hidden2");
  layer(128, 10, "logits");
  return vars;
}

output mlp_logits(const std::vector<variable>& vars, output images) {
  auto h1 = ops::relu(ops::matmul(images, vars[0]) + vars[1]);
  auto h2 = ops::relu(ops::matmul(h1, vars[2]) + vars[3]);
  return ops::matmul(h2, vars[4]) + vars[5];
}

/// The CNN's filters, weights and biases: conv1, conv2 (5x5, 16 and 32 filters), hidden, logits.
std::vector<variable> make_cnn_variables(graph& g) {
  std::vector<variable> vars;
  auto glorot = [&](std::vector<std::int64_t> shape, std::int64_t fan_in, std::int64_t fan_out) {
    auto limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    return ops::random_uniform(g, std::move(shape), -limit, limit);
  };
  auto layer = [&](std::vector<std::int64_t> shape, std::int64_t fan_in, std::int64_t fan_out,
                   const std::string& name, const char* weights_name) {
    auto scope = g.name_scope(name);
    auto outputs = shape.back();
    vars.push_back(ops::variable(g, glorot(std::move(shape), fan_in, fan_out), weights_name));
    vars.push_back(ops::variable(g, ops::zeros(g, {outputs}), "biases"));
  };
  layer({5, 5, 1, 16}, 25 * 1, 25 * 16, "conv1", "filter");
  layer({5, 5, 16, 32}, 25 * 16, 25 * 32, "conv2", "filter");
  layer({512, 128}, 512, 128, "hidden", "weights");
  layer({128, 10}, 128, 10, "logits", "weights");
  return vars;
}

output cnn_logits(const std::vector<variable>& vars, output images) {
  // 28x28x1 -> conv 24x24x16 -> pool 12x12x16 -> conv 8x8x32 -> pool 4x4x32 -> 512.
  auto conv = [](output x, const variable& filter, const variable& biases) {
    auto y = ops::relu(ops::conv2d(x, filter, {1, 1}, "VALID") + biases);
    return ops::max_pool(y, {2, 2}, {2, 2}, "VALID");
  };
  auto x = ops::reshape(images, {-1, 28, 28, 1});
  auto pool2 = conv(conv(x, vars[0], vars[1]), vars[2], vars[3]);
  auto flat = ops::reshape(pool2, {-1, 4 * 4 * 32});
  auto hidden = ops::relu(ops::matmul(flat, vars[4]) + vars[5]);
  return ops::matmul(hidden, vars[6]) + vars[7];
}

/// The RNN's input and recurrent weights, bias (scope cell) and output layer (scope logits).
std::vector<variable> make_rnn_variables(graph& g) {
  std::vector<variable> vars;
  auto glorot = [&](std::int64_t fan_in, std::int64_t fan_out) {
    auto limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    return ops::random_uniform(g, {fan_in, fan_out}, -limit, limit);
  };
  {
    auto scope = g.name_scope("cell");
    vars.push_back(ops::variable(g, glorot(rnn_input, rnn_units), "input_weights"));
    vars.push_back(ops::variable(g, glorot(rnn_units, rnn_units), "recurrent_weights"));
    vars.push_back(ops::variable(g, ops::zeros(g, {rnn_units}), "biases"));
  }
  auto scope = g.name_scope("logits");
  vars.push_back(ops::variable(g, glorot(rnn_units, 10), "weights"));
  vars.push_back(ops::variable(g, ops::zeros(g, {10}), "biases"));
  return vars;
}

output rnn_logits(const std::vector<variable>& vars, output images) {
  auto& g = *images.owner;
  auto rows = ops::reshape(images, {-1, rnn_steps, rnn_input}, "rows");
  // h starts at zeros of [batch, units]: a zero row of the images' batch times a zero matrix.
  auto zero_state = ops::matmul(ops::gather(rows, ops::constant(g, std::int32_t{0}), 1, "first_row"),
                                ops::zeros(g, {rnn_input, rnn_units}), false, false, "zero_state");
  ops::while_options options;
  options.name = "rnn";
  options.shape_invariants = {tensor_shape{}, tensor_shape{-1, rnn_units}};
  auto out = ops::while_loop(
    [](const std::vector<output>& v) { return ops::less(v[0], static_cast<double>(rnn_steps)); },
    [&](const std::vector<output>& v) {
      auto x = ops::gather(rows, v[0], 1, "row");
      auto h = ops::tanh(ops::matmul(x, vars[0]) + ops::matmul(v[1], vars[1]) + vars[2]);
      return std::vector<output>{v[0] + 1.0, h};
    },
    {ops::constant(g, std::int32_t{0}, "t"), zero_state}, options);
  return ops::matmul(out[1], vars[3]) + vars[4];
}

std::vector<variable> make_variables(graph& g, classifier kind) {
  switch (kind) {
    case classifier::cnn:
      return make_cnn_variables(g);
    case classifier::rnn:
      return make_rnn_variables(g);
    default:
      return make_mlp_variables(g);
  }
}

output logits_of(classifier kind, const std::vector<variable>& vars, output images) {
  switch (kind) {
    case classifier::cnn:
      return cnn_logits(vars, images);
    case classifier::rnn:
      return rnn_logits(vars, images);
    default:
      return mlp_logits(vars, images);
  }
}

output mean_loss(output logits, output labels) {
  return ops::reduce_mean(ops::softmax_cross_entropy_with_logits(logits, labels), {}, false, "loss");
}

output count_correct(output logits, output labels) {
  auto hits = ops::equal(ops::argmax(logits, 1), ops::argmax(labels, 1));
  return ops::reduce_sum(ops::cast(hits, dtype::float32), {}, false, "correct");
}

} // namespace

result<classifier> classifier_named(const std::string& name) {
  if (name == "mlp")
    return classifier::mlp;
  if (name == "cnn")
    return classifier::cnn;
  if (name == "rnn")
    return classifier::rnn;
  return make_error(errc::invalid_argument, "no classifier '" + name + "' (mlp, cnn, rnn)");
}

classifier_model build_classifier(graph& g, optimizer& opt, classifier kind) {
  classifier_model m;
  m.images = ops::placeholder(g, dtype::float32, {-1, 784}, "images");
  m.labels = ops::placeholder(g, dtype::float32, {-1, 10}, "labels");
  m.weights = make_variables(g, kind);
  m.logits = logits_of(kind, m.weights, m.images);
  m.loss = mean_loss(m.logits, m.labels);
  m.correct = count_correct(m.logits, m.labels);
  m.train = opt.minimize(m.loss);
  return m;
}

classifier_model build_mlp(graph& g, optimizer& opt) {
  return build_classifier(g, opt, classifier::mlp);
}

classifier_model build_cnn(graph& g, optimizer& opt) {
  return build_classifier(g, opt, classifier::cnn);
}

namespace {

/// The value a variable's initializer assigns (input 1 of its Assign).
output initial_value_of(graph& g, const variable& v) {
  auto& source = g.at(v.initializer.node_id).inputs.at(1);
  return output{&g, source.node_id, source.index};
}

/// build_data_parallel_mlp with replica_layout::mirrored.
result<data_parallel_mlp> build_mirrored(graph& g, optimizer& opt, const replica_layout& layout,
                                         classifier kind) {
  data_parallel_mlp m;
  auto towers = layout.tower_devices.size();
  std::vector<std::vector<variable>> copies(towers);
  std::vector<std::vector<gradient_and_variable>> tower_gradients;
  for (std::size_t t = 0; t < towers; ++t) {
    auto on_tower = g.device(layout.tower_devices[t]);
    auto scope = g.name_scope("tower_" + std::to_string(t));
    if (t == 0) {
      copies[0] = make_variables(g, kind);
    } else {
      // Every copy starts from the first copy's initial values, drawn once.
      for (auto& first : copies[0]) {
        auto local_name = first.name().substr(first.name().rfind('/') + 1);
        copies[t].push_back(ops::variable(g, initial_value_of(g, first), local_name));
      }
    }
    mlp_tower tower;
    tower.images = ops::placeholder(g, dtype::float32, {-1, 784}, "images");
    tower.labels = ops::placeholder(g, dtype::float32, {-1, 10}, "labels");
    auto logits = logits_of(kind, copies[t], tower.images);
    tower.loss = mean_loss(logits, tower.labels);
    tower.correct = count_correct(logits, tower.labels);
    tower_gradients.push_back(opt.compute_gradients(tower.loss, copies[t]));
    m.towers.push_back(tower);
  }
  std::vector<gradient_and_variable> updates;
  for (std::size_t k = 0; k < copies[0].size(); ++k) {
    std::vector<output> per_tower;
    for (std::size_t t = 0; t < towers; ++t)
      per_tower.push_back(tower_gradients[t][k].first);
    auto reduced = ops::all_reduce(per_tower, "mean", "all_reduce_" + std::to_string(k));
    for (std::size_t t = 0; t < reduced.size(); ++t)
      updates.emplace_back(reduced[t], copies[t][k]);
  }
  m.train = opt.apply_gradients(updates);
  m.weights = copies[0];
  auto on_host = g.device(layout.variable_device);
  auto loss = m.towers[0].loss;
  auto correct = m.towers[0].correct;
  for (std::size_t t = 1; t < towers; ++t) {
    loss = loss + m.towers[t].loss;
    correct = correct + m.towers[t].correct;
  }
  m.loss = loss * ops::scalar_like(g, loss.type(), 1.0 / static_cast<double>(towers));
  m.correct = correct;
  return m;
}

} // namespace

result<data_parallel_mlp> build_data_parallel_mlp(graph& g, optimizer& opt,
                                                  const replica_layout& layout, classifier kind) {
  data_parallel_mlp m;
  auto local_towers = !layout.tower_devices.empty();
  auto tower_count = local_towers ? static_cast<int>(layout.tower_devices.size()) : layout.worker_tasks;
  auto worker = [&](int task) {
    return local_towers ? layout.tower_devices[static_cast<std::size_t>(task)]
                        : "/job:" + layout.worker_job + "/task:" + std::to_string(task);
  };
  if (layout.mirrored && local_towers)
    return build_mirrored(g, opt, layout, kind);
  if (local_towers) {
    auto on_host = g.device(layout.variable_device);
    m.weights = make_variables(g, kind);
  } else {
    replica_device_setter_options placement;
    placement.ps_tasks = layout.ps_tasks;
    placement.ps_device = "/job:" + layout.ps_job;
    placement.worker_device = worker(0);
    auto setter = replica_device_setter(placement);
    if (!setter)
      return setter.error();
    auto on_ps = g.device(*setter);
    m.weights = make_variables(g, kind);
  }
  std::vector<std::vector<gradient_and_variable>> tower_gradients;
  for (int task = 0; task < tower_count; ++task) {
    auto on_worker = g.device(worker(task));
    auto scope = g.name_scope("tower_" + std::to_string(task));
    mlp_tower t;
    t.images = ops::placeholder(g, dtype::float32, {-1, 784}, "images");
    t.labels = ops::placeholder(g, dtype::float32, {-1, 10}, "labels");
    auto logits = logits_of(kind, m.weights, t.images);
    t.loss = mean_loss(logits, t.labels);
    t.correct = count_correct(logits, t.labels);
    tower_gradients.push_back(opt.compute_gradients(t.loss, m.weights));
    m.towers.push_back(t);
  }
  auto share = 1.0 / static_cast<double>(tower_count);
  std::vector<gradient_and_variable> averaged;
  for (std::size_t k = 0; k < m.weights.size(); ++k) {
    // Each tower's gradient crosses to the ps once; the average is made there, beside the
    // variable the optimizer updates.
    auto beside_variable = g.colocate_with(m.weights[k].ref);
    auto sum = tower_gradients[0][k].first;
    for (std::size_t t = 1; t < tower_gradients.size(); ++t)
      sum = sum + tower_gradients[t][k].first;
    averaged.emplace_back(sum * ops::scalar_like(g, sum.type(), share), m.weights[k]);
  }
  m.train = opt.apply_gradients(averaged);
  // The towers' losses and counts are summed where the variables live (the CPU, locally).
  auto on_chief = g.device(local_towers ? layout.variable_device : worker(0));
  auto loss = m.towers[0].loss;
  auto correct = m.towers[0].correct;
  for (std::size_t t = 1; t < m.towers.size(); ++t) {
    loss = loss + m.towers[t].loss;
    correct = correct + m.towers[t].correct;
  }
  m.loss = loss * ops::scalar_like(g, loss.type(), share);
  m.correct = correct;
  return m;
}

linreg_model build_linreg(graph& g, optimizer& opt, std::uint64_t seed,
                          const linreg_devices& devices, const gradient_options& gradients) {
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
    m.train = opt.minimize(m.loss, {}, gradients);
  }
  return m;
}

linreg_devices classic_in_graph_devices() {
  return {"/job:canshu/task:0", "/job:canshu/task:1", "/job:gongzuo/task:0", "/job:gongzuo/task:1"};
}

} // namespace actorflow::train
