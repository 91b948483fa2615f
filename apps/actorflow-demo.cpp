// The foundation's main job: builds graphs with the C++ API and runs them on device actors.
// 1. SPEC's placement example with log_device_placement (c = a * b = 12).
// 2. Control dependencies: x and y run only after a and b.
// 3. A 784-256-128-10 ReLU network's forward pass on a batch of 128, timed over 50 steps.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "support/flags.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>

using namespace actorflow;

namespace {

int fail(const status& s) {
  std::cerr << "actorflow-demo: " << s.to_string() << '\n';
  return 1;
}

} // namespace

int run(int, char**) {
  {
    std::cout << "== placement (log_device_placement)\n";
    graph g;
    auto a = ops::variable(g, 3.f, "a");
    output b;
    {
      auto cpu = g.device("/cpu:0");
      b = ops::constant(g, 4.f, "b");
    }
    auto c = a * b;
    session_options options;
    options.log_device_placement = true;
    session s{g, options};
    if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok())
      return fail(st);
    auto r = s.run({c});
    if (!r)
      return fail(r.error());
    for (auto& line : s.placement_log())
      std::cout << "  " << line << '\n';
    std::cout << "  c = a * b = " << r->at(0).scalar_value<float>() << '\n';
  }
  {
    std::cout << "== control dependencies\n";
    graph g;
    auto counter = ops::variable(g, 0.f, "counter");
    auto a = ops::assign_add(counter, ops::constant(g, 1.f), "a");
    auto b = ops::assign_add(counter, ops::constant(g, 10.f), "b");
    output x;
    {
      auto deps = g.control_dependencies({a, b});
      x = ops::identity(counter.ref, "x");
    }
    session s{g};
    if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok())
      return fail(st);
    auto r = s.run({x});
    if (!r)
      return fail(r.error());
    std::cout << "  x read after a and b: " << r->at(0).scalar_value<float>() << " (expected 11)\n";
  }
  {
    std::cout << "== MLP forward pass, batch 128\n";
    graph g;
    g.seed = 42;
    auto x = ops::placeholder(g, dtype::float32, {-1, 784}, "x");
    auto layer = [&](output in, std::int64_t fan_in, std::int64_t fan_out, const std::string& name,
                     bool activation) {
      auto scope = g.name_scope(name);
      auto w = ops::variable(g, ops::truncated_normal(g, {fan_in, fan_out}, 0.0, 0.05), "w");
      auto bias = ops::variable(g, ops::zeros(g, {fan_out}), "b");
      auto z = ops::matmul(in, w) + bias;
      return activation ? ops::relu(z) : z;
    };
    auto h1 = layer(x, 784, 256, "hidden1", true);
    auto h2 = layer(h1, 256, 128, "hidden2", true);
    auto logits = layer(h2, 128, 10, "logits", false);
    auto probabilities = ops::softmax(logits);
    auto prediction = ops::argmax(probabilities, 1);
    session s{g};
    if (auto st = s.run_targets({ops::global_variables_initializer(g)}); !st.ok())
      return fail(st);
    tensor batch{dtype::float32, {128, 784}};
    for (std::int64_t i = 0; i < batch.num_elements(); ++i)
      batch.data<float>()[i] = static_cast<float>((i * 7919) % 256) / 255.f;
    auto warm = s.run({prediction}, {{x, batch}});
    if (!warm)
      return fail(warm.error());
    auto start = std::chrono::steady_clock::now();
    const int steps = 50;
    for (int i = 0; i < steps; ++i)
      if (auto r = s.run({prediction}, {{x, batch}}); !r)
        return fail(r.error());
    auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  %d steps, %.3f ms/step, %.0f examples/s\n", steps, 1e3 * seconds / steps,
                steps * 128 / seconds);
  }
  return 0;
}

int main(int argc, char** argv) { return apps::run_main("actorflow-demo", run, argc, argv); }
