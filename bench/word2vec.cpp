// word2vec throughput and quality beside PyTorch 1.13 in one run (issue 29): actorflow-train
// --model word2vec's model (TF's word2vec_basic: skip-gram pairs of GCIDE's words, a 50,000-word
// vocabulary, 128-dimensional embeddings, NCE over 64 log-uniform candidates, SGD at 1.0, batch
// 128) trained on the same pre-made batches by a one-thread local session and by
// bench/torch_word2vec.py (nn.Embedding(sparse=True) tables, SGD, the same loss), then both
// tables scored by the same WordNet score actorflow-train prints (and random vectors' score).
//   bench_word2vec [steps]     (default 100000 as actorflow-train's, after 200 warmup steps)
// The score counts words (about 780 of the ranks scored are in WordNet): at 30,000 steps both
// tables still score near random vectors' (9-27 words), so the default trains as long as
// actorflow-train does.
// Prints word2vec_examples_per_s_t1 (baseline: PyTorch's rate) and word2vec_wordnet_score
// (baseline: PyTorch's score). Needs dict-gcide and wordnet-base (make deps installs both).
#include "bench_util.hpp"

#include "actors/session.hpp"
#include "graph/ops.hpp"
#include "graph/optimizers.hpp"
#include "graph/sampled_losses.hpp"
#include "graph/sparse_ops.hpp"
#include "train/text_corpus.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#ifndef ACTORFLOW_BENCH_SOURCE_DIR
#define ACTORFLOW_BENCH_SOURCE_DIR "bench"
#endif

using namespace actorflow;

namespace {

constexpr const char* corpus_path = "/usr/share/dictd/gcide.dict.dz";
constexpr const char* wordnet_dir = "/usr/share/wordnet";
constexpr std::int64_t vocabulary_size = 50000, dim = 128, batch = 128;
constexpr int num_sampled = 64, warmup_steps = 200;
constexpr double learning_rate = 1.0;
// actorflow-train's score: words of rank 100-1100, neighbours among the 10,000 most frequent.
constexpr std::int64_t first_scored = 100, last_scored = 1100, neighbour_pool = 10000;

struct trained {
  double examples_per_second = 0;
  /// The mean loss of the last 1,000 steps.
  double last_loss = 0;
  tensor embeddings;
};

constexpr std::size_t last_steps = 1000;

/// run_word2vec's graph, local, one thread, over `batches`.
result<trained> train_actorflow(const std::vector<std::pair<tensor, tensor>>& batches) {
  graph g;
  g.seed = 1;
  auto embeddings = ops::variable(g, ops::random_uniform(g, {vocabulary_size, dim}, -1.0, 1.0), "embeddings");
  auto weights = ops::variable(
    g, ops::truncated_normal(g, {vocabulary_size, dim}, 0.0, 1.0 / std::sqrt(static_cast<double>(dim))),
    "nce_weights");
  auto biases = ops::variable(g, ops::zeros(g, {vocabulary_size}), "nce_biases");
  auto centers = ops::placeholder(g, dtype::int64, {batch}, "centers");
  auto contexts = ops::placeholder(g, dtype::int64, {batch, 1}, "contexts");
  auto embedded = ops::embedding_lookup(embeddings, centers);
  auto loss = ops::reduce_mean(ops::nce_loss(weights, biases, contexts, embedded, num_sampled, vocabulary_size),
                               {}, false, "loss");
  auto train = gradient_descent_optimizer{learning_rate}.minimize(loss);
  AF_RETURN_IF_ERROR(g.status());
  session_options options;
  options.inter_op_parallelism_threads = 1;
  options.intra_op_parallelism_threads = 1;
  options.use_per_session_threads = true;
  session s{g, options};
  AF_RETURN_IF_ERROR(s.run_targets({ops::global_variables_initializer(g)}));
  double recent_loss = 0;
  auto step = [&](std::size_t b) -> status {
    bool recent = b + last_steps >= batches.size();
    auto r = s.run(recent ? std::vector<output>{loss} : std::vector<output>{},
                   {{centers, batches[b].first}, {contexts, batches[b].second}}, {train});
    if (r && recent)
      recent_loss += r->at(0).scalar_value<double>();
    return r ? status{} : r.error();
  };
  for (std::size_t b = 0; b < static_cast<std::size_t>(warmup_steps); ++b)
    AF_RETURN_IF_ERROR(step(b));
  status failure;
  auto seconds = bench::time_seconds([&] {
    for (auto b = static_cast<std::size_t>(warmup_steps); b < batches.size() && failure.ok(); ++b)
      failure = step(b);
  });
  AF_RETURN_IF_ERROR(failure);
  auto table = s.run({embeddings.read});
  if (!table)
    return table.error();
  trained out;
  out.examples_per_second = static_cast<double>(batches.size() - warmup_steps) * batch / seconds;
  out.last_loss = recent_loss / static_cast<double>(std::min(last_steps, batches.size()));
  out.embeddings = std::move(table->at(0));
  return out;
}

/// The batches as torch_word2vec.py reads them: every center, then every context, int64.
status write_batches(const std::vector<std::pair<tensor, tensor>>& batches, const std::string& path) {
  std::ofstream out{path, std::ios::binary};
  for (int half = 0; half < 2; ++half)
    for (auto& [centers, contexts] : batches) {
      auto& t = half == 0 ? centers : contexts;
      out.write(reinterpret_cast<const char*>(t.data<std::int64_t>()),
                static_cast<std::streamsize>(t.num_elements() * sizeof(std::int64_t)));
    }
  out.close();
  return out ? status{} : make_error(errc::internal, "cannot write " + path);
}

result<tensor> read_vectors(const std::string& path) {
  tensor t{dtype::float32, tensor_shape{vocabulary_size, dim}};
  std::ifstream in{path, std::ios::binary};
  in.read(reinterpret_cast<char*>(t.data<float>()), static_cast<std::streamsize>(t.num_elements() * sizeof(float)));
  if (!in)
    return make_error(errc::data_loss, path + " holds fewer than " + std::to_string(t.num_elements()) +
                                         " float32 values");
  return t;
}

} // namespace

int main(int argc, char** argv) {
  const int steps = bench::positive_arg(argc, argv, 1, 100000) + warmup_steps;
  auto words = train::read_dictionary_words(corpus_path);
  auto related = train::read_wordnet(wordnet_dir);
  if (!words || !related) {
    std::fprintf(stderr, "word2vec: %s\n",
                 (!words ? words.error() : related.error()).to_string().c_str());
    return 1;
  }
  auto vocab = train::vocabulary::build(*words, vocabulary_size);
  train::skipgram_batches pairs{vocab.encode(*words), batch, 1, 2, 1};
  words->clear();
  std::vector<std::pair<tensor, tensor>> batches;
  for (int i = 0; i < steps; ++i)
    batches.push_back(pairs.next());

  auto ours = train_actorflow(batches);
  if (!ours) {
    std::fprintf(stderr, "word2vec: %s\n", ours.error().to_string().c_str());
    return 1;
  }
  auto score = [&](const tensor& vectors) {
    return train::wordnet_score(train::unit_rows(vectors), vocab, *related, first_scored, last_scored,
                                neighbour_pool);
  };
  double our_score = score(ours->embeddings);
  tensor random_vectors{dtype::float32, ours->embeddings.shape()};
  std::mt19937_64 engine{1};
  std::normal_distribution<float> normal;
  for (std::int64_t i = 0; i < random_vectors.num_elements(); ++i)
    random_vectors.data<float>()[i] = normal(engine);
  double chance = score(random_vectors);

  // PyTorch on the same batches, its table scored here.
  std::string dir = "/tmp/bench_word2vec." + std::to_string(::getpid());
  std::string batches_path = dir + ".batches", vectors_path = dir + ".vectors";
  std::optional<double> torch_rate, torch_score, torch_loss;
  if (write_batches(batches, batches_path).ok()) {
    char args[512];
    std::snprintf(args, sizeof args, "'%s' %lld %lld %d %g %d '%s'", batches_path.c_str(),
                  static_cast<long long>(vocabulary_size), static_cast<long long>(dim), num_sampled,
                  learning_rate, warmup_steps, vectors_path.c_str());
    auto output = bench::python_output(ACTORFLOW_BENCH_SOURCE_DIR, "torch_word2vec.py", args);
    if (output) {
      torch_rate = bench::json_field(*output, "examples_per_second");
      torch_loss = bench::json_field(*output, "last_loss");
    }
    if (torch_rate)
      if (auto vectors = read_vectors(vectors_path))
        torch_score = score(*vectors);
  }
  std::remove(batches_path.c_str());
  std::remove(vectors_path.c_str());

  char note[400];
  std::snprintf(note, sizeof note,
                "TF's word2vec_basic on GCIDE: vocabulary 50000, dim 128, NCE over 64 log-uniform "
                "candidates, SGD 1.0, batch 128, %d steps, 1 thread; baseline: PyTorch 1.13 "
                "nn.Embedding(sparse=True) + SGD, same batches",
                steps - warmup_steps);
  bench::figure rate{"word2vec_examples_per_s_t1", ours->examples_per_second, "examples/s", torch_rate,
                     torch_rate ? std::optional<double>{ours->examples_per_second / *torch_rate} : std::nullopt,
                     note};
  bench::emit(rate);
  std::snprintf(note, sizeof note,
                "share of words of rank 100-1100 whose 10 nearest (of the 10000 most frequent) include "
                "a WordNet synonym or hypernym; random vectors %.4f; loss of the last 1000 steps %.3f, "
                "PyTorch's %.3f; baseline: PyTorch's table, same run",
                chance, ours->last_loss, torch_loss ? *torch_loss : 0.0);
  bench::figure quality{"word2vec_wordnet_score", our_score, "share", torch_score,
                        torch_score ? std::optional<double>{our_score / *torch_score} : std::nullopt, note};
  bench::emit(quality);
  return 0;
}
