// A table of 1e8 float32 parameters (400 MB) partitioned over 4 ps processes, trained by 2
// worker processes (tests/support/big_table_worker.cpp), saved in shards by the ps themselves
// and restored into 4 fresh ps: no process holds more than its share of the table and a bounded
// overhead, and the restored rows are the saved ones (issue 29's scale run, at a tenth of the
// benchmark's size: bench/big_table.cpp).
#include "serialization/checkpoint.hpp"
#include "support/processes.hpp"
#include "support/temp_dir.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace actorflow::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t rows = 1562500, dim = 64;
constexpr int ps_tasks = 4, parts = 8;
constexpr double mib = 1 << 20;

/// Workers' flags for the table.
std::vector<std::string> table_flags(const std::string& spec, int task, const std::string& dir) {
  return {"--cluster", spec, "--task", std::to_string(task), "--rows", std::to_string(rows),
          "--dim", std::to_string(dim), "--parts", std::to_string(parts), "--checkpoint-dir", dir};
}

std::string value_after(const std::string& line) { return line.substr(line.rfind(' ') + 1); }

} // namespace

TEST_CASE("a table of 1e8 parameters over 4 ps trains with 2 workers, is saved in shards by the ps and restored, no process holding much more than its share") {
  actorflow::test::temp_dir dir;
  const std::string checkpoints = dir.path() + "/ckpt";
  const double share = static_cast<double>(rows * dim * 4) / ps_tasks;
  const double part = static_cast<double>(rows * dim * 4) / parts;
  auto cluster = start_ps_cluster(ACTORFLOW_WORKER_BINARY, ps_tasks, 2);
  REQUIRE(cluster.ready);
  std::vector<std::unique_ptr<child_process>> workers;
  for (int task = 1; task >= 0; --task) {
    auto flags = table_flags(cluster.spec, task, checkpoints);
    flags.insert(flags.end(), {"--steps", "60", "--batch", "4096"});
    workers.push_back(std::make_unique<child_process>(ACTORFLOW_BIG_TABLE_WORKER_BINARY, flags));
  }
  auto& chief = *workers.back();
  // Peaks sampled while the processes live (a process gone has none to read).
  std::vector<double> peaks(cluster.ps.size(), 0);
  double worker_peak = 0;
  auto sample = [&] {
    for (std::size_t t = 0; t < cluster.ps.size(); ++t)
      peaks[t] = std::max(peaks[t], static_cast<double>(cluster.ps[t]->peak_resident_bytes()));
    for (auto& w : workers)
      worker_peak = std::max(worker_peak, static_cast<double>(w->peak_resident_bytes()));
  };
  std::optional<std::string> saved;
  for (auto deadline = std::chrono::steady_clock::now() + 240s;
       !saved && std::chrono::steady_clock::now() < deadline;) {
    sample();
    saved = chief.wait_for_line("saved_seconds", 50ms);
  }
  INFO(chief.stderr_text());
  REQUIRE(saved);
  sample();
  for (auto& w : workers)
    CHECK(w->wait_exit(60000ms) == 0);
  for (std::size_t t = 0; t < peaks.size(); ++t) {
    INFO("ps " << t << " peak " << peaks[t] / mib << " MiB, its share " << share / mib
               << " MiB, a part " << part / mib << " MiB");
    // Its share, and what initialising one part at a time holds besides (its uniform draw,
    // scaled, offset, and Assign's copy: at most three parts), and the process itself. Not the
    // table: saving writes each part from its own buffer.
    CHECK(peaks[t] < share + 3 * part + 96 * mib);
  }
  INFO("worker peak " << worker_peak / mib << " MiB");
  CHECK(worker_peak < 160 * mib);
  for (auto& ps : cluster.ps)
    ps->signal(SIGTERM);

  // Four fresh ps take the shards back; the chief alone restores and trains nothing.
  auto again = start_ps_cluster(ACTORFLOW_WORKER_BINARY, ps_tasks, 2);
  REQUIRE(again.ready);
  auto flags = table_flags(again.spec, 0, checkpoints);
  flags.insert(flags.end(), {"--steps", "60", "--restore-only"});
  child_process restorer{ACTORFLOW_BIG_TABLE_WORKER_BINARY, flags};
  auto probe = restorer.wait_for_line("probe ", 240000ms);
  INFO(restorer.stderr_text());
  REQUIRE(probe);
  CHECK(restorer.wait_exit(60000ms) == 0);
  // Ids 0 .. 63 are the first rows of part 0 ("div"): their sum from the shard file that
  // holds part 0.
  auto latest = actorflow::checkpoint_manager{checkpoints}.latest();
  REQUIRE(latest);
  auto own = actorflow::read_checkpoint(*latest);
  REQUIRE(own.ok());
  CHECK(own->step >= 60);
  double expected = 0;
  bool found = false;
  for (int shard = 0; shard < ps_tasks && !found; ++shard) {
    auto data = actorflow::read_checkpoint(actorflow::checkpoint_shard_path(checkpoints, own->step, shard));
    if (!data)
      continue;
    auto part = data->entries.find("table/part_0");
    if (part == data->entries.end())
      continue;
    found = true;
    for (std::int64_t i = 0; i < 64 * dim; ++i)
      expected += part->second.data<float>()[i];
  }
  REQUIRE(found);
  CHECK(std::stod(value_after(*probe)) == Approx(expected).margin(1e-3));
  for (auto& ps : again.ps)
    ps->signal(SIGTERM);
}
