// SPEC's plain split matmul on several GPUs: A comes in two halves of rows, each half is
// multiplied by B on its own GPU (/gpu:0, /gpu:1), and the CPU gathers the halves. With soft
// placement a missing GPU's half runs on the CPU instead, so it runs on any machine.
//   split_matmul [--n 512] [--device-type GPU|TEST] [--log-device-placement]
// --device-type TEST puts the halves on two test devices (the GPU's path without a GPU).
// Prints where each half ran and the largest difference from the unsplit product (computed on
// the CPU); exits 1 when that exceeds 1e-3, or when test-device halves ran elsewhere.
#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "support/flags.hpp"

#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

using namespace actorflow;

int main(int argc, char** argv) {
  // A peer or pipe reader that goes away fails a write (EPIPE) instead of killing the program.
  std::signal(SIGPIPE, SIG_IGN);
  int n = 512;
  std::string type = "GPU";
  bool log_device_placement = false;
  apps::flag_set flags;
  flags.values = {
    {"--n", [&](const std::string& v) { return apps::parse_int_flag("--n", v, 2, n, 8192); }},
    {"--device-type", [&](const std::string& v) {
       if (v != "GPU" && v != "TEST")
         return make_error(errc::invalid_argument, "--device-type: '" + v + "' is neither GPU nor TEST");
       type = v;
       return status{};
     }},
  };
  flags.switches = {{"--log-device-placement", &log_device_placement}};
  if (auto st = apps::parse_flags(argc, argv, flags); !st.ok()) {
    std::cerr << "split_matmul: " << st.message() << '\n';
    return 2;
  }
  n -= n % 2;

  graph g;
  g.seed = 1;
  std::vector<output> a_halves;
  output b, whole;
  {
    auto on_cpu = g.device("/cpu:0");
    for (int i = 0; i < 2; ++i)
      a_halves.push_back(ops::random_uniform(g, {n / 2, n}, -1.0, 1.0, dtype::float32,
                                             std::nullopt, "a_" + std::to_string(i)));
    b = ops::random_uniform(g, {n, n}, -1.0, 1.0, dtype::float32, std::nullopt, "b");
    whole = ops::matmul(ops::concat(a_halves, 0, "a"), b, false, false, "whole");
  }
  std::vector<output> halves;
  for (int i = 0; i < 2; ++i) {
    auto on_device = g.device("/device:" + type + ":" + std::to_string(i));
    halves.push_back(ops::matmul(a_halves[static_cast<std::size_t>(i)], b, false, false,
                                 "half_" + std::to_string(i)));
  }
  output gathered, difference;
  {
    auto on_cpu = g.device("/cpu:0");
    gathered = ops::concat(halves, 0, "gathered");
    difference = ops::reduce_max(ops::square(gathered - whole), {}, false, "difference");
  }
  if (!g.status().ok()) {
    std::cerr << "split_matmul: " << g.status().to_string() << '\n';
    return 1;
  }
  session_options options;
  options.allow_soft_placement = true;
  options.log_device_placement = log_device_placement;
  if (type == "TEST")
    options.test_device_count = 2;
  session s{g, options};
  auto r = s.run({difference});
  if (!r) {
    std::cerr << "split_matmul: " << r.error().to_string() << '\n';
    return 1;
  }
  int halves_on_test_devices = 0;
  for (auto& line : s.placement_log())
    if (line.rfind("half_", 0) == 0) {
      std::cout << line << '\n';
      auto id = line.substr(5, 1);
      if (line.find("/device:TEST:" + id) != std::string::npos)
        ++halves_on_test_devices;
    }
  if (type == "TEST" && halves_on_test_devices != 2) {
    std::cerr << "split_matmul: the halves did not run on TEST:0 and TEST:1\n";
    return 1;
  }
  auto largest = std::sqrt(r->at(0).scalar_value<float>());
  std::cout << "largest difference from the unsplit product: " << largest << '\n';
  return largest <= 1e-3 ? 0 : 1;
}
