#pragma once
/// What actorflow-train --model word2vec reads: the words of a real corpus (GCIDE, Debian's
/// dict-gcide: the 1913 Webster and more, 40 MB of English), a vocabulary of its most frequent
/// words, skip-gram batches, and WordNet (wordnet-base) to score the trained vectors by.
///   auto words = read_dictionary_words("/usr/share/dictd/gcide.dict.dz");
///   auto vocab = vocabulary::build(*words, 50000);        // id 0 is "UNK"
///   skipgram_batches batches{vocab.encode(*words), 128, 2, seed};
///   auto& [centers, contexts] = batches.next();           // [128], [128, 1] int64
///   auto related = read_wordnet("/usr/share/wordnet");    // word -> synonyms and hypernyms
///   double score = wordnet_score(unit_rows(vectors), vocab, *related, 100, 1100, 10000);

#include "graph/status.hpp"
#include "graph/tensor.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace actorflow::train {

/// The lower-case words of a dictd dictionary file (gzip-compressed, as dictzip writes it, or
/// plain): the entries' text without their pronunciations (\...\), bracketed etymologies and
/// sources ([...]) and headers; a word is a run of letters. An error names the file.
result<std::vector<std::string>> read_dictionary_words(const std::string& path);

struct vocabulary {
  /// By id: "UNK" (every rarer word) at 0, then the most frequent words, most frequent first.
  std::vector<std::string> words;
  std::vector<std::int64_t> counts;
  std::unordered_map<std::string, std::int64_t> ids;

  /// The `size` - 1 most frequent words of `corpus` (ties by first appearance) and UNK.
  static vocabulary build(const std::vector<std::string>& corpus, std::int64_t size);
  std::vector<std::int64_t> encode(const std::vector<std::string>& corpus) const;
};

/// Skip-gram pairs (TF's word2vec_basic): each center word with `num_skips` of the words at most
/// `skip_window` away on either side, drawn without repeats, walking the corpus in order and
/// wrapping around.
class skipgram_batches {
public:
  skipgram_batches(std::vector<std::int64_t> corpus, std::int64_t batch_size, int skip_window,
                   int num_skips, std::uint64_t seed);
  /// The next batch: centers [batch], contexts [batch, 1].
  std::pair<tensor, tensor> next();
  /// Windows go on from the `share`-th of `shares` equal parts of the corpus (between-graph
  /// workers, each from its own part).
  void start_at_share(int share, int shares) {
    at_ = corpus_.size() * static_cast<std::size_t>(share) / static_cast<std::size_t>(shares);
  }

private:
  std::vector<std::int64_t> corpus_;
  std::int64_t batch_size_;
  int skip_window_, num_skips_;
  std::size_t at_ = 0;
  std::mt19937_64 random_;
};

/// For each single word of WordNet (data.noun, data.verb, data.adj, data.adv in `directory`):
/// the words of its synsets (synonyms) and of their hypernyms. An error names the file.
using related_words = std::unordered_map<std::string, std::unordered_set<std::string>>;
result<related_words> read_wordnet(const std::string& directory);

/// `vectors` [vocabulary, dim] float32 with every row scaled to length 1 (0 stays 0), so that
/// a dot product is a cosine: what the two below take.
tensor unit_rows(const tensor& vectors);

/// The share of the vocabulary's words of ranks [first, last) that WordNet knows whose
/// `neighbours` nearest words by cosine include one WordNet relates to them. Neighbours are
/// sought among the `among` most frequent words (UNK excepted), as analogy tests restrict
/// theirs: the rarest words' vectors have hardly moved from their random start. `unit`:
/// unit_rows of the vectors.
double wordnet_score(const tensor& unit, const vocabulary& vocab, const related_words& related,
                     std::int64_t first, std::int64_t last, std::int64_t among, int neighbours = 10);

/// The `k` nearest words to `word` by cosine among the `among` most frequent (not itself, not
/// UNK). `unit`: unit_rows of the vectors.
std::vector<std::string> nearest_words(const tensor& unit, const vocabulary& vocab,
                                       const std::string& word, int k, std::int64_t among);

} // namespace actorflow::train
