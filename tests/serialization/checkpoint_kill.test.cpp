// kill -9 at any moment of a save: the previous checkpoint stays usable, and what the killed
// saver left behind is cleared by the next save. A forked child saves in a loop; this process
// kills it after a random delay, 100 times, and restores after every kill.
#include "serialization/checkpoint.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <random>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace actorflow;
using actorflow::test::directory_entries;
using actorflow::test::temp_dir;

namespace {

/// A checkpoint whose every value says its step: "w" (256 Ki floats) and "global_step".
checkpoint_entries entries_for(std::int64_t step) {
  checkpoint_entries entries;
  tensor w{dtype::float32, tensor_shape{256 * 1024}};
  for (std::int64_t i = 0; i < w.num_elements(); ++i)
    w.data<float>()[i] = static_cast<float>(step);
  entries["w"] = w;
  entries["global_step"] = tensor::scalar<std::int64_t>(step);
  return entries;
}

/// Whether the checkpoint at `path` reads back whole and says `step` everywhere.
bool consistent(const std::string& path, std::int64_t& step) {
  auto data = read_checkpoint(path);
  if (!data.ok())
    return false;
  step = data->step;
  auto& w = data->entries.at("w");
  if (data->entries.at("global_step").scalar_value<std::int64_t>() != step ||
      w.num_elements() != 256 * 1024)
    return false;
  for (std::int64_t i = 0; i < w.num_elements(); ++i)
    if (w.data<float>()[i] != static_cast<float>(step))
      return false;
  return true;
}

std::size_t temporaries_in(const std::string& dir) {
  std::size_t count = 0;
  for (auto& name : directory_entries(dir))
    count += name.find(".tmp.") != std::string::npos ? 1 : 0;
  return count;
}

} // namespace

TEST_CASE("a saver killed at 100 random moments always leaves a usable checkpoint, never an older one", "[checkpoint]") {
  temp_dir dir;
  auto directory = dir.path() + "/ckpt";
  checkpoint_manager manager{directory, 3};
  REQUIRE(manager.save(0, entries_for(0)).ok());
  std::mt19937 random{2026};
  std::int64_t newest = 0;
  std::size_t left_behind = 0;
  for (int kill = 0; kill < 100; ++kill) {
    auto child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      checkpoint_manager saver{directory, 3};
      for (auto step = newest + 1;; ++step)
        if (!saver.save(step, entries_for(step)).ok())
          ::_exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
    ::kill(child, SIGKILL);
    int wait_status = 0;
    REQUIRE(::waitpid(child, &wait_status, 0) == child);
    // Killed, not failed: a save error would have exited 3.
    REQUIRE(WIFSIGNALED(wait_status));
    left_behind += temporaries_in(directory);
    auto found = manager.find_latest();
    INFO("kill " << kill);
    REQUIRE(found.path.has_value());
    CHECK(found.skipped.empty()); // a committed checkpoint is always whole
    std::int64_t step = -1;
    REQUIRE(consistent(*found.path, step));
    // The newest committed checkpoint never goes back.
    CHECK(step >= newest);
    newest = step;
  }
  // Some kills must have landed mid-write for the test to mean anything.
  CHECK(left_behind > 0);
  REQUIRE(manager.save(newest + 1, entries_for(newest + 1)).ok());
  CHECK(temporaries_in(directory) == 0);
  std::int64_t step = -1;
  REQUIRE(consistent(*manager.latest(), step));
  CHECK(step == newest + 1);
}
