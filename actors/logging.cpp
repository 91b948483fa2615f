#include "actors/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace actorflow {

namespace {

std::atomic<int>& verbose_state() {
  // -1: not decided yet; read from the environment on first use.
  static std::atomic<int> state{-1};
  return state;
}

spdlog::logger& logger() {
  static auto instance = [] {
    auto made = std::make_shared<spdlog::logger>(
      "actorflow", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    made->set_pattern("actorflow: %v");
    return made;
  }();
  return *instance;
}

} // namespace

bool verbose() {
  auto& state = verbose_state();
  auto now = state.load();
  if (now < 0) {
    const char* value = std::getenv("ACTORFLOW_VERBOSE");
    now = value != nullptr && std::strcmp(value, "1") == 0 ? 1 : 0;
    state = now;
  }
  return now == 1;
}

void set_verbose(bool on) { verbose_state() = on ? 1 : 0; }

void log_verbose(const std::string& line) {
  if (verbose())
    logger().info(line);
}

void log_info(const std::string& line) { logger().info(line); }

} // namespace actorflow
