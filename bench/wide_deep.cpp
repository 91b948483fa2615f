// Wide & Deep between-graph on loopback beside PyTorch RPC parameter servers, in one run
// (issue 29): 2 ps processes (actorflow-worker) and 2 worker processes (actorflow-train --model
// wide-deep --job worker, one thread each) train the click log's model on hash tables sharded
// over the ps; then bench/torch_rpc_wide_deep.py trains the same model, on the same examples
// (each trainer the stretch of the log its actorflow worker had, written to a file here), on 2
// torch.distributed.rpc ps processes applying the same sparse FTRL and Adagrad updates.
//   bench_wide_deep [steps per worker]     (default 2000, batches of 128, 100000 ids a field)
// Prints wide_deep_examples_per_s (both workers' examples/s summed; baseline: PyTorch's two
// trainers summed) and wide_deep_auc (the chief's held-out AUC; baseline: PyTorch trainer 0's on
// the same held-out set; the true model's AUC in the note).
#include "bench_util.hpp"
#include "support/processes.hpp"
#include "train/click_log.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

using namespace actorflow;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t batch_size = 128;
constexpr std::int64_t ids_per_field = 100000;
constexpr std::int64_t held_out_examples = 20000; // actorflow-train's evaluation set
constexpr std::uint64_t seed = 1;                 // actorflow-train's default --seed

/// The number after `prefix` on the last line that starts with it.
std::optional<double> number_after(const std::string& lines, const std::string& prefix) {
  std::optional<double> found;
  for (std::size_t at = lines.find(prefix); at != std::string::npos;
       at = lines.find(prefix, at + 1))
    if (at == 0 || lines[at - 1] == '\n')
      found = std::stod(lines.substr(at + prefix.size()));
  return found;
}

template <class T>
void write_values(std::ofstream& out, const T* data, std::size_t n) {
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(T)));
}

void write_block(std::ofstream& out, const train::click_batch& b) {
  for (auto* t : {&b.user, &b.item, &b.context, &b.cross})
    write_values(out, t->data<std::int64_t>(), static_cast<std::size_t>(t->num_elements()));
  write_values(out, b.label_values.data(), b.label_values.size());
}

/// The examples each actorflow worker trains on (task k's stretch of the log, batch by batch,
/// as actorflow-train draws them) and the held-out set, in torch_rpc_wide_deep.py's format.
bool write_examples(const std::string& path, int workers, std::int64_t steps) {
  std::ofstream out{path, std::ios::binary};
  std::int64_t header[4] = {workers, steps, batch_size, held_out_examples};
  write_values(out, header, 4);
  for (int task = 0; task < workers; ++task) {
    train::click_log log{{ids_per_field, seed, static_cast<std::uint64_t>(task) << 40}};
    // One draw of steps x batch examples is the same stretch as steps draws of a batch.
    write_block(out, log.next(steps * batch_size));
  }
  write_block(out, train::click_log{{ids_per_field, seed}}.evaluation(held_out_examples));
  return static_cast<bool>(out);
}

} // namespace

int main(int argc, char** argv) {
  const std::int64_t steps = bench::positive_arg(argc, argv, 1, 2000);
  auto cluster = testing::start_ps_cluster(ACTORFLOW_WORKER_BINARY, 2, 2);
  if (!cluster.ready) {
    std::fprintf(stderr, "bench_wide_deep: the ps processes did not start\n");
    return 1;
  }
  auto dir = "/tmp/af-bench-wide-deep-" + std::to_string(::getpid());
  std::vector<std::unique_ptr<testing::child_process>> workers;
  for (int task : {1, 0})
    workers.push_back(std::make_unique<testing::child_process>(
      ACTORFLOW_TRAIN_BINARY,
      std::vector<std::string>{"--model", "wide-deep", "--cluster", cluster.spec, "--job",
                               "worker", "--task", std::to_string(task), "--threads", "1",
                               "--steps", std::to_string(steps), "--ids-per-field",
                               std::to_string(ids_per_field), "--log-every", "1000000",
                               "--output-dir", dir + "/w" + std::to_string(task)}));
  std::vector<std::string> outputs;
  for (auto& w : workers) {
    outputs.push_back(w->read_all_lines(600000ms));
    if (w->wait_exit(30000ms) != 0) {
      std::fprintf(stderr, "bench_wide_deep: a worker failed:\n%s%s\n", outputs.back().c_str(),
                   w->stderr_text().c_str());
      return 1;
    }
  }
  auto& chief = outputs[1];
  auto rate_other = number_after(outputs[0], "examples/s: ");
  auto rate_chief = number_after(chief, "examples/s: ");
  auto auc = number_after(chief, "auc: ");
  auto ceiling_at = chief.find("true model's: ");
  double ceiling = ceiling_at == std::string::npos ? 0.0 : std::stod(chief.substr(ceiling_at + 14));
  if (!rate_other || !rate_chief || !auc) {
    std::fprintf(stderr, "bench_wide_deep: no examples/s or auc in:\n%s\n", chief.c_str());
    return 1;
  }
  const double rate = *rate_other + *rate_chief;

  auto data = dir + "/examples.bin";
  std::optional<std::string> torch;
  if (write_examples(data, 2, steps))
    torch = bench::python_output(ACTORFLOW_BENCH_SOURCE_DIR, "torch_rpc_wide_deep.py", "--data " + data);
  auto torch_rate = torch ? bench::json_field(*torch, "examples_per_second") : std::nullopt;
  auto torch_auc = torch ? bench::json_field(*torch, "auc") : std::nullopt;

  char note[240];
  std::snprintf(note, sizeof note,
                "2 ps + 2 worker processes on loopback, %lld steps of %lld a worker, %lld ids a "
                "field; baseline: torch.distributed.rpc, 2 ps + 2 trainers, the same examples",
                static_cast<long long>(steps), static_cast<long long>(batch_size),
                static_cast<long long>(ids_per_field));
  bench::figure f{"wide_deep_examples_per_s", rate, "examples/s"};
  f.note = note;
  if (torch_rate) {
    f.baseline = *torch_rate;
    f.ratio = rate / *torch_rate;
  }
  bench::emit(f);
  bench::figure a{"wide_deep_auc", *auc, "auc"};
  std::snprintf(note, sizeof note, "the chief's held-out AUC; the true model's %.4f; baseline: "
                                   "PyTorch trainer 0's on the same examples",
                ceiling);
  a.note = note;
  if (torch_auc) {
    a.baseline = *torch_auc;
    a.ratio = *auc / *torch_auc;
  }
  bench::emit(a);
  std::filesystem::remove_all(dir);
  return 0;
}
