#pragma once
/// A small recurrent model for control-flow tests: a tanh recurrence in a while_loop, trained
/// by gradient descent, with the input's part of each step optionally pinned elsewhere.
///   graph g;  g.seed = 7;
///   auto m = build_recurrent(g, "/job:worker/task:1");
///   session s{g, options};
///   auto losses = train_recurrent(s, g, m, 30);           // the loss before each step

#include "actors/session.hpp"
#include "graph/control_flow.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

namespace actorflow::testing {

struct recurrent_model {
  output loss, train, last_state;
  actorflow::variable w, u;
};

/// A tanh recurrence over the 6 columns of a fixed [4, 6] input, trained to make its last state
/// sum to the targets: h' = tanh(x_t w + h u), loss = mean((sum(h) - target)^2). With
/// `input_device`, the input's part of each step (x_t w, and its gradient) runs there.
inline recurrent_model build_recurrent(graph& g, const std::string& input_device = "") {
  recurrent_model m;
  auto x = ops::constant(g, std::vector<float>{0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f,  //
                                               0.7f, 0.8f,  -0.9f, 1.0f, 0.1f, 0.2f,   //
                                               -0.3f, 0.4f, 0.5f,  0.6f, 0.7f, -0.8f,  //
                                               0.9f, -1.0f, 0.2f,  0.3f, 0.4f, 0.5f},
                         {4, 6}, "x");
  m.w = ops::variable(g, ops::random_uniform(g, {1, 3}, -1.0, 1.0), "w");
  m.u = ops::variable(g, ops::random_uniform(g, {3, 3}, -0.5, 0.5), "u");
  auto out = ops::while_loop(
    [](const std::vector<output>& v) { return ops::less(v[0], 6.0); },
    [&](const std::vector<output>& v) {
      output from_input;
      {
        std::optional<scope_guard> pinned;
        if (!input_device.empty())
          pinned.emplace(g.device(input_device));
        auto column = ops::reshape(ops::gather(x, v[0], 1), {4, 1});
        from_input = ops::matmul(column, m.w, false, false, "from_input");
      }
      auto h = ops::tanh(from_input + ops::matmul(v[1], m.u));
      return std::vector<output>{v[0] + 1.0, h};
    },
    {ops::constant(g, std::int32_t{0}, "t"), ops::zeros(g, {4, 3})});
  m.last_state = out[1];
  auto target = ops::constant(g, std::vector<float>{1, -1, 0.5f, 0}, {4}, "target");
  m.loss = ops::reduce_mean(ops::square(ops::reduce_sum(out[1], {1}) - target), {}, false, "loss");
  m.train = gradient_descent_optimizer{0.2}.minimize(m.loss);
  return m;
}

/// Initialises the variables and runs `steps` training steps; the loss of each.
inline std::vector<float> train_recurrent(session& s, graph& g, const recurrent_model& m, int steps) {
  REQUIRE(s.run_targets({ops::global_variables_initializer(g)}).ok());
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    auto r = s.run({m.loss}, {}, {m.train});
    INFO(r.error().to_string());
    REQUIRE(r.ok());
    losses.push_back(r->at(0).scalar_value<float>());
  }
  return losses;
}

} // namespace actorflow::testing
