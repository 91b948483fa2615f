// Optimizers through real sessions: each update matches a hand-computed reference over several
// steps (float32 and float64), Adam's bias correction, momentum with and without Nesterov,
// minimize on a linear regression, slot placement, and the kernels' errors and copy-on-write.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

using namespace actorflow;
using Catch::Matchers::Contains;

namespace {

const std::vector<double> initial_w{1.0, -2.0, 0.5};
/// The gradient fed at step 0, 1, 2.
const std::vector<std::vector<double>> step_grads{
  {0.1, -0.2, 0.3}, {0.5, 0.05, -0.4}, {-0.3, 0.2, 1.0}};

template <class T>
tensor tensor_of(const std::vector<double>& values) {
  std::vector<T> converted(values.begin(), values.end());
  return tensor::from_vector<T>(converted, tensor_shape{static_cast<std::int64_t>(values.size())});
}

/// A graph with a variable w (initial_w) and a gradient placeholder of the same shape.
template <class T>
struct fed_gradient_model {
  graph g;
  variable w;
  output grad;
  fed_gradient_model() {
    w = ops::variable(g, ops::constant(g, tensor_of<T>(initial_w)), "w");
    grad = ops::placeholder(g, dtype_of<T>(), {3}, "grad");
  }
};

/// Runs `train` once per step_grads entry, feeding the gradient, and returns w after each step.
template <class T>
std::vector<std::vector<double>> run_steps(fed_gradient_model<T>& m, output train) {
  REQUIRE(m.g.status().ok());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  std::vector<std::vector<double>> after;
  for (auto& grad : step_grads) {
    auto st = s.run_targets({train}, {{m.grad, tensor_of<T>(grad)}});
    INFO(st.message());
    REQUIRE(st.ok());
    auto r = s.run({m.w.read});
    REQUIRE(r.ok());
    after.push_back(r->at(0).template to_vector<double>());
  }
  return after;
}

template <class T>
double tolerance() {
  return std::is_same<T, float>::value ? 1e-5 : 1e-12;
}

void check_close(const std::vector<double>& actual, const std::vector<double>& expected,
                 double tol) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i << ": " << actual[i] << " vs " << expected[i]);
    CHECK(std::abs(actual[i] - expected[i]) <= tol * std::max(1.0, std::abs(expected[i])));
  }
}

std::string placed_on(const session& s, const std::string& name) {
  for (auto& line : s.placement_log())
    if (line.rfind(name + ": ", 0) == 0)
      return line.substr(name.size() + 2);
  return {};
}

} // namespace

TEMPLATE_TEST_CASE("gradient descent subtracts learning_rate * gradient each step", "", float,
                   double) {
  fed_gradient_model<TestType> m;
  gradient_descent_optimizer sgd{0.5};
  auto train = sgd.apply_gradients({{m.grad, m.w}});
  auto after = run_steps(m, train);
  auto w = initial_w;
  for (std::size_t step = 0; step < step_grads.size(); ++step) {
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] -= 0.5 * step_grads[step][i];
    check_close(after[step], w, tolerance<TestType>());
  }
}

TEMPLATE_TEST_CASE("momentum accumulates gradients, with and without nesterov", "", float,
                   double) {
  for (bool nesterov : {false, true}) {
    INFO("use_nesterov " << nesterov);
    fed_gradient_model<TestType> m;
    const double lr = 0.1, mu = 0.9;
    momentum_optimizer opt{lr, mu, nesterov};
    auto train = opt.apply_gradients({{m.grad, m.w}});
    auto after = run_steps(m, train);
    auto w = initial_w;
    std::vector<double> accum(w.size(), 0.0);
    for (std::size_t step = 0; step < step_grads.size(); ++step) {
      for (std::size_t i = 0; i < w.size(); ++i) {
        auto g = step_grads[step][i];
        accum[i] = accum[i] * mu + g;
        w[i] -= nesterov ? lr * (g + mu * accum[i]) : lr * accum[i];
      }
      check_close(after[step], w, tolerance<TestType>());
    }
  }
}

TEMPLATE_TEST_CASE("adam matches the reference update with bias correction over three steps",
                   "", float, double) {
  fed_gradient_model<TestType> m;
  const double lr = 0.01, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  adam_optimizer adam{lr, beta1, beta2, epsilon};
  auto train = adam.apply_gradients({{m.grad, m.w}});
  auto after = run_steps(m, train);
  auto w = initial_w;
  std::vector<double> m1(w.size(), 0.0), v1(w.size(), 0.0);
  for (std::size_t step = 0; step < step_grads.size(); ++step) {
    auto t = static_cast<double>(step + 1);
    auto lr_t = lr * std::sqrt(1 - std::pow(beta2, t)) / (1 - std::pow(beta1, t));
    for (std::size_t i = 0; i < w.size(); ++i) {
      auto g = step_grads[step][i];
      m1[i] = beta1 * m1[i] + (1 - beta1) * g;
      v1[i] = beta2 * v1[i] + (1 - beta2) * g * g;
      w[i] -= lr_t * m1[i] / (std::sqrt(v1[i]) + epsilon);
    }
    check_close(after[step], w, tolerance<TestType>());
  }
}

TEST_CASE("adam's first step moves every weight by the learning rate against its gradient's sign") {
  // Bias correction: with m and v starting at zero, m_hat / sqrt(v_hat) = g / |g| at step 1,
  // whatever the gradient's size.
  fed_gradient_model<double> m;
  adam_optimizer adam{0.01};
  auto train = adam.apply_gradients({{m.grad, m.w}});
  graph& g = m.g;
  auto beta1_power = g.find_output("beta1_power");
  auto beta2_power = g.find_output("beta2_power");
  REQUIRE(beta1_power.valid());
  REQUIRE(beta2_power.valid());
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  REQUIRE(s.run_targets({train}, {{m.grad, tensor_of<double>({0.5, -50.0, 7.0})}}).ok());
  auto r = s.run({m.w.read});
  REQUIRE(r.ok());
  check_close(r->at(0).to_vector<double>(), {1.0 - 0.01, -2.0 + 0.01, 0.5 - 0.01}, 1e-6);
  // The powers advance once per step, after the updates read them.
  REQUIRE(s.run_targets({train}, {{m.grad, tensor_of<double>({1, 1, 1})}}).ok());
  auto powers = s.run({beta1_power, beta2_power});
  REQUIRE(powers.ok());
  CHECK(powers->at(0).scalar_value<double>() == Approx(0.9 * 0.9 * 0.9));
  CHECK(powers->at(1).scalar_value<double>() == Approx(0.999 * 0.999 * 0.999));
}

TEST_CASE("adam trains a float32 and a float64 variable together") {
  // beta1_power follows the variable that sorts first ("w32", float32); w64's update casts it.
  graph g;
  auto w32 = ops::variable(g, ops::constant(g, tensor_of<float>({1.0, 2.0})), "w32");
  auto w64 = ops::variable(g, ops::constant(g, tensor_of<double>({3.0})), "w64");
  auto g32 = ops::placeholder(g, dtype::float32, {2}, "g32");
  auto g64 = ops::placeholder(g, dtype::float64, {1}, "g64");
  adam_optimizer adam{0.1};
  auto train = adam.apply_gradients({{g64, w64}, {g32, w32}});
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  CHECK(g.at(g.find("beta1_power")).output_types.at(0) == dtype::float32);
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  REQUIRE(s.run_targets({train}, {{g32, tensor_of<float>({2.0, -4.0})},
                                  {g64, tensor_of<double>({6.0})}}).ok());
  auto r = s.run({w32.read, w64.read});
  REQUIRE(r.ok());
  check_close(r->at(0).to_vector<double>(), {0.9, 2.1}, 1e-5);
  check_close(r->at(1).to_vector<double>(), {2.9}, 1e-6);
}

TEMPLATE_TEST_CASE("minimize on loss = sum(w * c) steps against c", "", float, double) {
  graph g;
  auto w = ops::variable(g, ops::constant(g, tensor_of<TestType>(initial_w)), "w");
  auto c = ops::constant(g, tensor_of<TestType>({1.0, -2.0, 3.0}), "c");
  auto loss = ops::reduce_sum(w * c);
  gradient_descent_optimizer sgd{0.1};
  auto train = sgd.minimize(loss);
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  CHECK(train.name() == "GradientDescent");
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int step = 0; step < 3; ++step)
    REQUIRE(s.run_targets({train}).ok());
  auto r = s.run({w.read});
  REQUIRE(r.ok());
  check_close(r->at(0).template to_vector<double>(),
              {1.0 - 0.3 * 1.0, -2.0 + 0.3 * 2.0, 0.5 - 0.3 * 3.0}, tolerance<TestType>());
}

TEST_CASE("gradient descent fits the classic linear regression y = 0.1 x + 0.3") {
  std::mt19937 rng{20170101};
  std::uniform_real_distribution<float> uniform{0.f, 1.f};
  std::vector<float> xs(100), ys(100);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    xs[i] = uniform(rng);
    ys[i] = xs[i] * 0.1f + 0.3f;
  }
  graph g;
  auto x = ops::constant(g, xs, {100}, "x_data");
  auto y = ops::constant(g, ys, {100}, "y_data");
  auto W = ops::variable(g, ops::random_uniform(g, {1}, -1.0, 1.0, dtype::float32, 7), "W");
  auto b = ops::variable(g, ops::zeros(g, {1}), "b");
  auto prediction = W * x + b;
  auto loss = ops::reduce_mean(ops::square(y - prediction));
  gradient_descent_optimizer sgd{0.5};
  auto train = sgd.minimize(loss);
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  for (int step = 0; step < 201; ++step)
    REQUIRE(s.run_targets({train}).ok());
  auto r = s.run({W.read, b.read, loss});
  REQUIRE(r.ok());
  INFO("W " << r->at(0).scalar_value<double>() << " b " << r->at(1).scalar_value<double>()
            << " loss " << r->at(2).scalar_value<double>());
  CHECK(std::abs(r->at(0).scalar_value<double>() - 0.1) < 1e-3);
  CHECK(std::abs(r->at(1).scalar_value<double>() - 0.3) < 1e-3);
}

TEST_CASE("slots and update ops are placed with their variable on another CPU") {
  graph g;
  variable w;
  {
    auto cpu1 = g.device("/cpu:1");
    w = ops::variable(g, ops::constant(g, tensor_of<float>({1, 2, 3})), "w");
  }
  auto grad = ops::placeholder(g, dtype::float32, {3}, "grad");
  momentum_optimizer opt{0.1, 0.9};
  output train;
  {
    // The optimizer is built under another device scope: colocation must win.
    auto cpu0 = g.device("/cpu:0");
    train = opt.apply_gradients({{grad, w}});
  }
  REQUIRE(g.status().ok());
  auto slot = g.find("w/Momentum");
  REQUIRE(slot >= 0);
  CHECK(g.at(slot).requested_device == g.at(w.ref.node_id).requested_device);
  CHECK(g.trainable_variables().size() == 1);
  session_options options;
  options.cpu_device_count = 2;
  options.log_device_placement = true;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  REQUIRE(s.run_targets({train}, {{grad, tensor_of<float>({1, 1, 1})}}).ok());
  const std::string cpu1 = "/job:localhost/replica:0/task:0/device:CPU:1";
  CHECK(placed_on(s, "w") == cpu1);
  CHECK(placed_on(s, "w/Momentum") == cpu1);
  CHECK(placed_on(s, "w/Momentum/Assign") == cpu1);
  CHECK(placed_on(s, "Momentum/update_w/ApplyMomentum") == cpu1);
  CHECK(placed_on(s, "grad") == "/job:localhost/replica:0/task:0/device:CPU:0");
  auto r = s.run({w.read});
  REQUIRE(r.ok());
  check_close(r->at(0).to_vector<double>(), {0.9, 1.9, 2.9}, 1e-6);
}

TEST_CASE("updating an uninitialised variable or slot names it") {
  {
    fed_gradient_model<float> m;
    gradient_descent_optimizer sgd{0.1};
    auto train = sgd.apply_gradients({{m.grad, m.w}});
    session s{m.g};
    auto st = s.run_targets({train}, {{m.grad, tensor_of<float>({1, 1, 1})}});
    REQUIRE_FALSE(st.ok());
    CHECK(st.code() == errc::failed_precondition);
    CHECK_THAT(st.message(), Contains("uninitialized value w ") &&
                               Contains("GradientDescent/update_w/ApplyGradientDescent"));
  }
  {
    fed_gradient_model<float> m;
    momentum_optimizer opt{0.1, 0.9};
    auto train = opt.apply_gradients({{m.grad, m.w}});
    session s{m.g};
    REQUIRE(s.run_targets({m.w.initializer}).ok());
    auto st = s.run_targets({train}, {{m.grad, tensor_of<float>({1, 1, 1})}});
    REQUIRE_FALSE(st.ok());
    CHECK_THAT(st.message(), Contains("uninitialized value w/Momentum"));
  }
}

TEST_CASE("a gradient of the wrong shape fails naming the variable") {
  graph g;
  auto w = ops::variable(g, ops::constant(g, tensor_of<double>({1, 2, 3})), "weights");
  auto grad = ops::placeholder(g, dtype::float64, tensor_shape::unknown(), "grad");
  gradient_descent_optimizer sgd{0.1};
  auto train = sgd.apply_gradients({{grad, w}});
  REQUIRE(g.status().ok());
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto st = s.run_targets({train}, {{grad, tensor_of<double>({1, 2})}});
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == errc::invalid_argument);
  CHECK_THAT(st.message(), Contains("'weights'") && Contains("[3]") && Contains("[2]"));
}

TEST_CASE("a value fetched before an update keeps its contents") {
  // The fetched tensor shares the variable's buffer: the update must write a fresh one.
  fed_gradient_model<double> m;
  adam_optimizer adam{0.1};
  auto train = adam.apply_gradients({{m.grad, m.w}});
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  auto before = s.run({m.w.ref});
  REQUIRE(before.ok());
  auto held = before->at(0);
  REQUIRE(s.run_targets({train}, {{m.grad, tensor_of<double>({1, 1, 1})}}).ok());
  CHECK(held.to_vector<double>() == initial_w);
  auto after = s.run({m.w.read});
  REQUIRE(after.ok());
  check_close(after->at(0).to_vector<double>(), {0.9, -2.1, 0.4}, 1e-6);
  // With nothing holding the value any more the next steps update in place; the results are
  // the same either way.
  held = tensor{};
  before->clear();
  REQUIRE(s.run_targets({train}, {{m.grad, tensor_of<double>({1, 1, 1})}}).ok());
  after = s.run({m.w.read});
  REQUIRE(after.ok());
  check_close(after->at(0).to_vector<double>(), {0.8, -2.2, 0.3}, 1e-6);
}

TEST_CASE("a large variable is updated in parallel blocks") {
  const std::int64_t n = 300000;
  graph g;
  auto w = ops::variable(g, ops::ones(g, {n}, dtype::float32), "big");
  auto grad = ops::placeholder(g, dtype::float32, {n}, "grad");
  momentum_optimizer opt{0.5, 0.9};
  auto train = opt.apply_gradients({{grad, w}});
  std::vector<float> grads(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    grads[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.f;
  session_options options;
  options.intra_op_parallelism_threads = 4;
  options.use_per_session_threads = true;
  session s{g, options};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  auto fed = tensor::from_vector<float>(grads, {n});
  for (int step = 0; step < 2; ++step)
    REQUIRE(s.run_targets({train}, {{grad, fed}}).ok());
  auto r = s.run({w.read});
  REQUIRE(r.ok());
  auto values = r->at(0).to_vector<float>();
  std::int64_t wrong = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    double gi = grads[static_cast<std::size_t>(i)];
    // accum1 = g, accum2 = 1.9 g; w = 1 - 0.5 g - 0.95 g.
    double expected = 1.0 - 0.5 * gi - 0.5 * 1.9 * gi;
    if (std::abs(values[static_cast<std::size_t>(i)] - expected) > 1e-5)
      ++wrong;
  }
  CHECK(wrong == 0);
}

TEST_CASE("Adagrad: accum += grad^2 from its initial value, var -= lr * grad / sqrt(accum), over three steps", "[actors][optimizers]") {
  fed_gradient_model<double> m;
  adagrad_optimizer adagrad{0.5, 0.1};
  auto step = adagrad.apply_gradients({{m.grad, m.w}});
  REQUIRE(m.g.status().ok());
  session s{m.g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(m.g)}).ok());
  auto w = initial_w;
  std::vector<double> accum(w.size(), 0.1);
  for (auto& grad : step_grads) {
    REQUIRE(s.run_targets({step}, {{m.grad, tensor_of<double>(grad)}}).ok());
    for (std::size_t i = 0; i < w.size(); ++i) {
      accum[i] += grad[i] * grad[i];
      w[i] -= 0.5 * grad[i] / std::sqrt(accum[i]);
    }
  }
  auto r = s.run({m.w.read});
  REQUIRE(r.ok());
  auto got = r->at(0).to_vector<double>();
  for (std::size_t i = 0; i < w.size(); ++i)
    CHECK(got[i] == Approx(w[i]).epsilon(1e-12));
  // The accumulator slot sits beside the variable, named as TF names it.
  bool slot = false;
  for (auto& v : m.g.global_variables())
    slot = slot || v.name() == "w/Adagrad";
  CHECK(slot);
}

TEST_CASE("a learning rate tensor is read every step and cast to each variable's dtype",
          "[actors][optimizers]") {
  graph g;
  auto w32 = ops::variable(g, ops::constant(g, tensor_of<float>({1.0, 2.0})), "w32");
  auto w64 = ops::variable(g, ops::constant(g, tensor_of<double>({3.0})), "w64");
  auto g32 = ops::placeholder(g, dtype::float32, {2}, "g32");
  auto g64 = ops::placeholder(g, dtype::float64, {1}, "g64");
  auto rate = ops::placeholder(g, dtype::float32, tensor_shape{}, "rate");
  momentum_optimizer momentum{123.0, 0.5};  // the tensor replaces this number
  momentum.set_learning_rate(rate);
  auto train = momentum.apply_gradients({{g32, w32}, {g64, w64}});
  INFO(g.status().message());
  REQUIRE(g.status().ok());
  session s{g};
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  std::vector<double> w{1.0, 2.0, 3.0}, accum(3, 0.0);
  const std::vector<double> grad{2.0, -4.0, 6.0};
  for (float r : {0.1f, 0.0f, 0.5f}) {
    REQUIRE(s.run_targets({train}, {{g32, tensor_of<float>({2.0, -4.0})},
                                    {g64, tensor_of<double>({6.0})},
                                    {rate, tensor::scalar(r)}}).ok());
    for (std::size_t i = 0; i < w.size(); ++i) {
      accum[i] = 0.5 * accum[i] + grad[i];
      w[i] -= static_cast<double>(r) * accum[i];
    }
  }
  auto out = s.run({w32.read, w64.read});
  REQUIRE(out.ok());
  check_close(out->at(0).to_vector<double>(), {w[0], w[1]}, 1e-5);
  check_close(out->at(1).to_vector<double>(), {w[2]}, 1e-6);

  // Not a scalar: an error naming the tensor.
  auto rates = ops::placeholder(g, dtype::float32, tensor_shape{2}, "rates");
  gradient_descent_optimizer sgd{0.1};
  sgd.set_learning_rate(rates);
  sgd.apply_gradients({{g32, w32}});
  REQUIRE_FALSE(g.status().ok());
  CHECK_THAT(g.status().message(), Catch::Contains("learning rate 'rates:0' must be a scalar"));
}
