// actorflow-train --model word2vec: skip-gram vectors (TF's word2vec_basic) of a real corpus's
// words, trained by a sampled loss over embedding lookups, so that each step moves the rows of
// its batch only; scored at the end against WordNet and against random vectors.
#include "train/modes.hpp"
#include "train/between_graph_worker.hpp"
#include "graph/ops.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/sparse_ops.hpp"
#include "train/text_corpus.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>

namespace actorflow::train_app {

namespace {

/// Words whose neighbours the run prints: frequent in a 1913 dictionary, of several kinds.
constexpr const char* shown_words[] = {"water", "king", "red", "horse", "three", "run"};

/// Ranks of the words the score asks about: past the most frequent (the, of, a, ...), among the
/// well trained.
constexpr std::int64_t first_scored = 100, last_scored = 1100;
/// Neighbours come from the most frequent words.
constexpr std::int64_t neighbour_pool = 10000;

/// The tables' devices: on the in-process cluster the tables on the ps tasks (the output table
/// on the second when there is one), the lookups' other ends on the first worker; local: none.
struct word2vec_devices {
  std::string embeddings, output_table, worker;
};

word2vec_devices devices_of(const training_target& where) {
  if (!where.layout)
    return {};
  auto& l = *where.layout;
  auto ps = [&](int task) { return "/job:" + l.ps_job + "/task:" + std::to_string(task % l.ps_tasks); };
  return {ps(0), ps(1), "/job:" + l.worker_job + "/task:0"};
}

/// The corpus, its vocabulary and WordNet's relations, read; a line says what was read.
struct word2vec_data {
  train::vocabulary vocab;
  train::related_words related;
  std::optional<train::skipgram_batches> batches;
  std::int64_t steps_per_epoch = 1;
};

result<word2vec_data> load_word2vec_data(const train_options& o, progress_printer& progress) {
  auto words = train::read_dictionary_words(o.corpus);
  if (!words)
    return words.error().with_context("--corpus (Debian's dict-gcide has one)");
  auto related = train::read_wordnet(o.wordnet_dir);
  if (!related)
    return related.error().with_context("--wordnet-dir (Debian's wordnet-base has it)");
  word2vec_data out;
  out.related = std::move(*related);
  out.vocab = train::vocabulary::build(*words, o.vocabulary);
  char line[200];
  std::snprintf(line, sizeof line, "word2vec: %zu words of %s, a vocabulary of %zu (UNK %.1f%%)",
                words->size(), o.corpus.c_str(), out.vocab.words.size(),
                100.0 * static_cast<double>(out.vocab.counts[0]) / static_cast<double>(words->size()));
  progress.line(line);
  out.batches.emplace(out.vocab.encode(*words), o.batch_size, 1, 2, o.seed);
  // An epoch is a pass over the corpus's pairs (two per word).
  out.steps_per_epoch =
    std::max<std::int64_t>(1, static_cast<std::int64_t>(2 * words->size()) / o.batch_size);
  return out;
}

struct word2vec_model {
  actorflow::variable embeddings, weights, biases;
  output centers, contexts, loss, train;
  /// Between-graph: the updates every worker makes, counted by `train` (beside the embeddings).
  std::optional<actorflow::variable> global_step;
};

result<word2vec_model> build_word2vec(graph& g, const train_options& o, std::int64_t size,
                                      const word2vec_devices& at, bool count_steps) {
  word2vec_model m;
  const std::int64_t dim = o.embedding_dim;
  std::optional<global_step_counter> counter;
  {
    auto on = g.device(at.embeddings);
    m.embeddings = ops::variable(g, ops::random_uniform(g, {size, dim}, -1.0, 1.0), "embeddings");
    if (count_steps)
      counter = make_global_step(g);
  }
  {
    auto on = g.device(at.output_table);
    m.weights = ops::variable(g, ops::truncated_normal(g, {size, dim}, 0.0, 1.0 / std::sqrt(static_cast<double>(dim))),
                              "nce_weights");
    m.biases = ops::variable(g, ops::zeros(g, {size}), "nce_biases");
  }
  auto on = g.device(at.worker);
  m.centers = ops::placeholder(g, dtype::int64, {o.batch_size}, "centers");
  m.contexts = ops::placeholder(g, dtype::int64, {o.batch_size, 1}, "contexts");
  auto embedded = ops::embedding_lookup(m.embeddings, m.centers);
  auto per_example = o.sampled_loss == "nce"
                       ? ops::nce_loss(m.weights, m.biases, m.contexts, embedded, o.num_sampled, size)
                       : ops::sampled_softmax_loss(m.weights, m.biases, m.contexts, embedded, o.num_sampled, size);
  m.loss = ops::reduce_mean(per_example, {}, false, "loss");
  m.train = gradient_descent_optimizer{o.learning_rate}.minimize(m.loss);
  if (counter) {
    m.global_step = counter->step;
    m.train = ops::group(g, {m.train, counter->count}, "train_and_count");
  }
  AF_RETURN_IF_ERROR(g.status());
  return m;
}

/// --steps steps of `m` on `data`'s batches, reported to the progress line and `metrics`.
status train_word2vec(const train_options& o, const word2vec_model& m, word2vec_data& data,
                      const run_step_fn& run, const graph& g, progress_printer& progress,
                      train::metrics_log* metrics, train::throughput_meter& throughput) {
  auto shown = o;
  shown.epochs = static_cast<int>((o.steps + data.steps_per_epoch - 1) / data.steps_per_epoch);
  std::vector<std::unique_ptr<train::training_hook>> hooks;
  hooks.push_back(train::make_finite_loss_hook());
  hooks.push_back(progress_hook(shown, o.steps, throughput, progress, metrics, g));
  train::trainer loop{std::move(hooks)};
  return loop.run(0, o.steps, [&](std::int64_t step) -> result<train::step_report> {
    auto started = clock_type::now();
    auto [center_ids, context_ids] = data.batches->next();
    auto r = run({m.loss}, {{m.centers, center_ids}, {m.contexts, context_ids}}, {m.train});
    if (!r)
      return r.error();
    train::step_report report;
    report.step = step;
    report.epoch = static_cast<int>((step - 1) / data.steps_per_epoch) + 1;
    report.loss = r->at(0).scalar_value<double>();
    report.examples = o.batch_size;
    report.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    return report;
  });
}

/// The learned vectors' nearest neighbours of a few words, then "examples/s: N" and their
/// WordNet score beside random vectors' as the last lines.
status report_word2vec(const train_options& o, const word2vec_model& m, const word2vec_data& data,
                       const run_step_fn& run, const train::throughput_meter& throughput,
                       progress_printer& progress) {
  auto vectors = run({m.embeddings.read}, {}, {});
  if (!vectors)
    return vectors.error();
  auto learned = train::unit_rows(vectors->at(0));
  for (auto* word : shown_words) {
    auto near = train::nearest_words(learned, data.vocab, word, 8, neighbour_pool);
    std::string listed;
    for (auto& w : near)
      listed += (listed.empty() ? "" : ", ") + w;
    progress.line(std::string{"nearest to "} + word + ": " + listed);
  }
  // The same score for vectors that learned nothing: what chance gives.
  tensor random_vectors{dtype::float32, learned.shape()};
  std::mt19937_64 engine{o.seed};
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < random_vectors.num_elements(); ++i)
    random_vectors.data<float>()[i] = normal(engine);
  auto score = train::wordnet_score(learned, data.vocab, data.related, first_scored, last_scored,
                                    neighbour_pool);
  auto chance = train::wordnet_score(train::unit_rows(random_vectors), data.vocab, data.related,
                                     first_scored, last_scored, neighbour_pool);
  say_examples_per_second(progress, throughput);
  char line[240];
  std::snprintf(line, sizeof line,
                "wordnet score: %.4f (random vectors: %.4f; words of rank %lld-%lld whose 10 "
                "nearest of the %lld most frequent include a WordNet synonym or hypernym)",
                score, chance, static_cast<long long>(first_scored), static_cast<long long>(last_scored),
                static_cast<long long>(neighbour_pool));
  progress.line(line);
  return {};
}

} // namespace

int run_word2vec(const train_options& o, const training_target& where) {
  if (auto st = prepare_output_directories(o); !st.ok())
    return fail(st);
  progress_printer progress{o.log_every};
  auto data = load_word2vec_data(o, progress);
  if (!data)
    return fail(data.error());
  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  auto m = build_word2vec(g, o, static_cast<std::int64_t>(data->vocab.words.size()), devices_of(where), false);
  if (!m)
    return fail(m.error());
  session s{g, where.options};
  if (auto init = s.run_targets({ops::global_variables_initializer(g)}); !init.ok())
    return fail(init);
  train::metrics_log metrics;
  if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
    return fail(st);
  train::throughput_meter throughput;
  auto run = steps_on(s);
  if (auto trained = train_word2vec(o, *m, *data, run, g, progress, &metrics, throughput); !trained.ok())
    return fail(trained);
  if (auto st = train::write_curve_svg(o.output_dir + "/curve.svg", metrics.rows(), "actorflow: word2vec");
      !st.ok())
    return fail(st);
  if (auto st = report_word2vec(o, *m, *data, run, throughput, progress); !st.ok())
    return fail(st);
  return 0;
}

int run_word2vec_worker(const train_options& o, const cluster_spec& cluster, const std::string& job,
                        int task) {
  if (auto flags = check_worker_flags(o, cluster, job, task, 0); !flags.ok())
    return usage_error(flags);
  const bool chief = task == 0;
  if (chief)
    if (auto st = prepare_output_directories(o); !st.ok())
      return fail(st);
  progress_printer progress{o.log_every};
  auto data = load_word2vec_data(o, progress);
  if (!data)
    return fail(data.error());
  // Each worker walks its own part of the corpus.
  const int workers = cluster.num_tasks(job);
  data->batches->start_at_share(task, workers);
  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  const auto me = "/job:" + job + "/task:" + std::to_string(task);
  const int ps_tasks = cluster.num_tasks(o.ps_job);
  auto ps = [&](int t) { return "/job:" + o.ps_job + "/task:" + std::to_string(t % ps_tasks); };
  auto m = build_word2vec(g, o, static_cast<std::int64_t>(data->vocab.words.size()),
                          {ps(0), ps(1), me}, true);
  if (!m)
    return fail(m.error());
  auto worker = between_graph_worker::start(o, cluster, job, task, g, *m->global_step, progress);
  if (!worker)
    return fail(worker.error());
  train::metrics_log metrics;
  if (chief)
    if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
      return fail(st);
  progress.line("worker " + me + (chief ? " (chief)" : "") + ": word2vec on its part (1 in " +
                std::to_string(workers) + ") of the corpus, the tables on the " + o.ps_job +
                " task(s)");
  train::throughput_meter throughput;
  auto trained = train_word2vec(o, *m, *data, (*worker)->steps(), g, progress,
                                chief ? &metrics : nullptr, throughput);
  if (!trained.ok())
    return fail(trained);
  return (*worker)->end(
    [&](const run_step_fn& run) { return report_word2vec(o, *m, *data, run, throughput, progress); },
    throughput, progress);
}

} // namespace actorflow::train_app
