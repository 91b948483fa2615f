// A table of 1e9 float32 parameters (15,625,000 rows x 64, 4 GB) over 4 ps processes
// (actorflow-worker), trained between-graph by 2 worker processes (tests/support/
// big_table_worker.cpp, one thread each): each step looks up 4096 random ids per worker and
// applies sparse SGD on the ps; the chief saves a sharded checkpoint when training ends (each
// ps writes its own shards), then 4 fresh ps take it back (the chief restores, timed). Figures:
//   big_table_ps_peak_rss_mib: the largest ps's peak resident memory; baseline: its share of
//     the table (table bytes / ps), ratio peak / share;
//   big_table_worker_peak_rss_mib: the largest worker's peak (none holds the table);
//   big_table_rows_per_s: rows looked up and updated per second, the workers added up;
//   big_table_save_seconds / big_table_restore_seconds: the chief's final sharded save (its
//     close), and the restore into fresh ps tasks (its monitored_session's creation).
//   bench_big_table [rows [steps]]    default 15625000 rows of 64, 200 steps
#include "support/processes.hpp"
#include "bench_util.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using actorflow::testing::child_process;

namespace {

constexpr int ps_tasks = 4, workers = 2, dim = 64;
constexpr double mib = 1 << 20;

std::vector<std::string> flags(const std::string& spec, int task, long long rows,
                               const std::string& dir) {
  // Parts of at most 256 MiB (a checkpoint entry holds at most 512 MiB), a multiple of the ps.
  long long table_bytes = rows * dim * 4;
  long long parts = std::max<long long>(ps_tasks, (table_bytes + (256 << 20) - 1) / (256 << 20));
  parts = (parts + ps_tasks - 1) / ps_tasks * ps_tasks;
  return {"--cluster", spec, "--task", std::to_string(task), "--rows", std::to_string(rows),
          "--dim", std::to_string(dim), "--parts", std::to_string(parts), "--checkpoint-dir", dir};
}

double number_after(const std::string& line, const std::string& word) {
  auto at = line.find(word + " ");
  return at == std::string::npos ? 0 : std::atof(line.c_str() + at + word.size() + 1);
}

} // namespace

int main(int argc, char** argv) {
  long long rows = argc > 1 ? std::atoll(argv[1]) : 15625000;
  long long steps = argc > 2 ? std::atoll(argv[2]) : 200;
  const std::string dir = "/tmp/af-bench-big-table";
  std::system(("rm -rf " + dir).c_str());
  auto cluster = actorflow::testing::start_ps_cluster(ACTORFLOW_WORKER_BINARY, ps_tasks, workers);
  if (!cluster.ready) {
    std::fprintf(stderr, "bench_big_table: the ps tasks did not start\n");
    return 1;
  }
  auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<child_process>> trainers;
  for (int task = workers - 1; task >= 0; --task) {
    auto f = flags(cluster.spec, task, rows, dir);
    f.insert(f.end(), {"--steps", std::to_string(steps), "--batch", "4096"});
    trainers.push_back(std::make_unique<child_process>(ACTORFLOW_BIG_TABLE_WORKER_BINARY, f));
  }
  double rows_per_second = 0, saved_seconds = 0;
  for (auto& t : trainers) {
    auto line = t->wait_for_line("rows_per_second", 3600s);
    if (!line) {
      std::fprintf(stderr, "bench_big_table: a worker failed: %s\n", t->stderr_text().c_str());
      return 1;
    }
    rows_per_second += number_after(*line, "rows_per_second");
  }
  auto& chief = *trainers.back();
  auto saved = chief.wait_for_line("saved_seconds", 3600s);
  if (!saved) {
    std::fprintf(stderr, "bench_big_table: the chief did not save: %s\n", chief.stderr_text().c_str());
    return 1;
  }
  saved_seconds = number_after(*saved, "saved_seconds");
  double ps_peak = 0, worker_peak = 0;
  for (auto& ps : cluster.ps)
    ps_peak = std::max(ps_peak, static_cast<double>(ps->peak_resident_bytes()));
  for (auto& t : trainers) {
    worker_peak = std::max(worker_peak, static_cast<double>(t->peak_resident_bytes()));
    t->wait_exit(60000ms);
  }
  std::fprintf(stderr, "trained and saved in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  for (auto& ps : cluster.ps)
    ps->signal(SIGTERM);

  auto again = actorflow::testing::start_ps_cluster(ACTORFLOW_WORKER_BINARY, ps_tasks, workers);
  if (!again.ready) {
    std::fprintf(stderr, "bench_big_table: the fresh ps tasks did not start\n");
    return 1;
  }
  auto f = flags(again.spec, 0, rows, dir);
  f.insert(f.end(), {"--steps", std::to_string(steps), "--restore-only"});
  child_process restorer{ACTORFLOW_BIG_TABLE_WORKER_BINARY, f};
  auto restored = restorer.wait_for_line("restored_seconds", 3600s);
  if (!restored) {
    std::fprintf(stderr, "bench_big_table: the restore failed: %s\n", restorer.stderr_text().c_str());
    return 1;
  }
  double restore_ps_peak = 0;
  for (auto& ps : again.ps)
    restore_ps_peak = std::max(restore_ps_peak, static_cast<double>(ps->peak_resident_bytes()));
  restorer.wait_exit(60000ms);
  for (auto& ps : again.ps)
    ps->signal(SIGTERM);
  std::system(("rm -rf " + dir).c_str());

  const double share = static_cast<double>(rows) * dim * 4 / ps_tasks;
  char setup[200];
  std::snprintf(setup, sizeof setup,
                "%lld x %d float32 (%.3g parameters) over %d ps, %d workers, %lld steps of 4096 ids each",
                rows, dim, static_cast<double>(rows) * dim, ps_tasks, workers, steps);
  bench::emit({"big_table_ps_peak_rss_mib", ps_peak / mib, "MiB", share / mib, ps_peak / share,
               std::string{setup} + "; the largest ps's peak resident memory while training and "
                                    "saving (restoring: " + std::to_string(static_cast<int>(restore_ps_peak / mib)) +
                 " MiB); baseline: its share of the table"});
  bench::emit({"big_table_worker_peak_rss_mib", worker_peak / mib, "MiB", std::nullopt, std::nullopt,
               std::string{setup} + "; the largest worker's peak resident memory"});
  bench::emit({"big_table_rows_per_s", rows_per_second, "rows/s", std::nullopt, std::nullopt,
               std::string{setup} + "; rows looked up and updated per second, the workers added up"});
  bench::emit({"big_table_save_seconds", saved_seconds, "s", std::nullopt, std::nullopt,
               std::string{setup} + "; the chief's final sharded save (each ps writes its shards)"});
  bench::emit({"big_table_restore_seconds", number_after(*restored, "restored_seconds"), "s",
               std::nullopt, std::nullopt,
               std::string{setup} + "; into 4 fresh ps tasks, each reading its shards"});
  return 0;
}
