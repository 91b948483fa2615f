// actorflow-train --model word2vec: skip-gram vectors (TF's word2vec_basic) of a real corpus's
// words, trained by a sampled loss over embedding lookups, so that each step moves the rows of
// its batch only; scored at the end against WordNet and against random vectors.
#include "train/modes.hpp"
#include "graph/ops.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/sparse_ops.hpp"
#include "train/text_corpus.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

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

} // namespace

int run_word2vec(const train_options& o, const training_target& where) {
  if (auto st = prepare_output_directories(o); !st.ok())
    return fail(st);
  progress_printer progress{o.log_every};
  auto words = train::read_dictionary_words(o.corpus);
  if (!words)
    return fail(words.error().with_context("--corpus (Debian's dict-gcide has one)"));
  auto related = train::read_wordnet(o.wordnet_dir);
  if (!related)
    return fail(related.error().with_context("--wordnet-dir (Debian's wordnet-base has it)"));
  auto vocab = train::vocabulary::build(*words, o.vocabulary);
  const auto size = static_cast<std::int64_t>(vocab.words.size());
  char line[200];
  std::snprintf(line, sizeof line, "word2vec: %zu words of %s, a vocabulary of %lld (UNK %.1f%%)",
                words->size(), o.corpus.c_str(), static_cast<long long>(size),
                100.0 * static_cast<double>(vocab.counts[0]) / static_cast<double>(words->size()));
  progress.line(line);
  train::skipgram_batches batches{vocab.encode(*words), o.batch_size, 1, 2, o.seed};
  // An epoch is a pass over the corpus's pairs (two per word).
  const auto steps_per_epoch =
    std::max<std::int64_t>(1, static_cast<std::int64_t>(2 * words->size()) / o.batch_size);
  auto shown = o;
  shown.epochs = static_cast<int>((o.steps + steps_per_epoch - 1) / steps_per_epoch);
  words->clear();

  graph g;
  g.seed = static_cast<std::int64_t>(o.seed);
  auto at = devices_of(where);
  const std::int64_t dim = o.embedding_dim;
  actorflow::variable embeddings, weights, biases;
  {
    auto on = g.device(at.embeddings);
    embeddings = ops::variable(g, ops::random_uniform(g, {size, dim}, -1.0, 1.0), "embeddings");
  }
  {
    auto on = g.device(at.output_table);
    weights = ops::variable(g, ops::truncated_normal(g, {size, dim}, 0.0, 1.0 / std::sqrt(static_cast<double>(dim))),
                            "nce_weights");
    biases = ops::variable(g, ops::zeros(g, {size}), "nce_biases");
  }
  output centers, contexts, loss, train;
  {
    auto on = g.device(at.worker);
    centers = ops::placeholder(g, dtype::int64, {o.batch_size}, "centers");
    contexts = ops::placeholder(g, dtype::int64, {o.batch_size, 1}, "contexts");
    auto embedded = ops::embedding_lookup(embeddings, centers);
    auto per_example = o.sampled_loss == "nce"
                         ? ops::nce_loss(weights, biases, contexts, embedded, o.num_sampled, size)
                         : ops::sampled_softmax_loss(weights, biases, contexts, embedded, o.num_sampled, size);
    loss = ops::reduce_mean(per_example, {}, false, "loss");
    train = gradient_descent_optimizer{o.learning_rate}.minimize(loss);
  }
  if (!g.status().ok())
    return fail(g.status());
  session s{g, where.options};
  if (auto init = s.run_targets({ops::global_variables_initializer(g)}); !init.ok())
    return fail(init);
  train::metrics_log metrics;
  if (auto st = metrics.open(o.output_dir + "/metrics.csv"); !st.ok())
    return fail(st);
  train::throughput_meter throughput;
  std::vector<std::unique_ptr<train::training_hook>> hooks;
  hooks.push_back(train::make_finite_loss_hook());
  hooks.push_back(progress_hook(shown, o.steps, throughput, progress, &metrics, g));
  train::trainer loop{std::move(hooks)};
  auto trained = loop.run(0, o.steps, [&](std::int64_t step) -> result<train::step_report> {
    auto started = clock_type::now();
    auto [center_ids, context_ids] = batches.next();
    auto r = s.run({loss}, {{centers, center_ids}, {contexts, context_ids}}, {train});
    if (!r)
      return r.error();
    train::step_report report;
    report.step = step;
    report.epoch = static_cast<int>((step - 1) / steps_per_epoch) + 1;
    report.loss = r->at(0).scalar_value<double>();
    report.examples = o.batch_size;
    report.seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    return report;
  });
  if (!trained.ok())
    return fail(trained);

  auto vectors = s.run({embeddings.read});
  if (!vectors)
    return fail(vectors.error());
  auto learned = train::unit_rows(vectors->at(0));
  for (auto* word : shown_words) {
    auto near = train::nearest_words(learned, vocab, word, 8, neighbour_pool);
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
  auto score = train::wordnet_score(learned, vocab, *related, first_scored, last_scored,
                                    neighbour_pool);
  auto chance = train::wordnet_score(train::unit_rows(random_vectors), vocab, *related,
                                     first_scored, last_scored, neighbour_pool);
  if (auto st = train::write_curve_svg(o.output_dir + "/curve.svg", metrics.rows(), "actorflow: word2vec");
      !st.ok())
    return fail(st);
  std::snprintf(line, sizeof line, "examples/s: %.0f", throughput.overall());
  progress.line(line);
  std::snprintf(line, sizeof line,
                "wordnet score: %.4f (random vectors: %.4f; words of rank %lld-%lld whose 10 "
                "nearest of the %lld most frequent include a WordNet synonym or hypernym)",
                score, chance, static_cast<long long>(first_scored), static_cast<long long>(last_scored),
                static_cast<long long>(neighbour_pool));
  progress.line(line);
  return 0;
}

} // namespace actorflow::train_app
