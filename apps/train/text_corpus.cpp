#include "train/text_corpus.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>

namespace actorflow::train {

namespace {

/// The whole file, gunzipped when it is gzip (zlib reads plain files as they are).
result<std::string> read_maybe_gzipped(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  if (in == nullptr)
    return make_error(errc::not_found, "cannot open '" + path + "'");
  std::string text;
  std::vector<char> chunk(1 << 20);
  int got = 0;
  while ((got = gzread(in, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0)
    text.append(chunk.data(), static_cast<std::size_t>(got));
  int error_code = 0;
  const char* why = got < 0 ? gzerror(in, &error_code) : nullptr;
  gzclose(in);
  if (why != nullptr)
    return make_error(errc::data_loss, "reading '" + path + "': " + why);
  return text;
}

/// The ids of the k rows of [1, rows) nearest to row `id` by dot product (not itself).
std::vector<std::int64_t> nearest(const float* unit, std::int64_t rows, std::int64_t dim,
                                  std::int64_t id, int k) {
  std::vector<std::pair<float, std::int64_t>> scored;
  scored.reserve(static_cast<std::size_t>(rows));
  const float* q = unit + id * dim;
  for (std::int64_t r = 1; r < rows; ++r) {
    if (r == id)
      continue;
    const float* v = unit + r * dim;
    float dot = 0;
    for (std::int64_t c = 0; c < dim; ++c)
      dot += q[c] * v[c];
    scored.emplace_back(dot, r);
  }
  auto top = std::min<std::size_t>(static_cast<std::size_t>(k), scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(top), scored.end(),
                    [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < top; ++i)
    out.push_back(scored[i].second);
  return out;
}

} // namespace

result<std::vector<std::string>> read_dictionary_words(const std::string& path) {
  auto text = read_maybe_gzipped(path);
  if (!text)
    return text.error();
  std::vector<std::string> words;
  std::string word;
  // Inside \pronunciation\ or [etymology, source] nothing counts.
  bool in_pronunciation = false;
  int bracket_depth = 0;
  bool blank_line = true;
  auto end_word = [&] {
    if (!word.empty())
      words.push_back(word);
    word.clear();
  };
  for (char raw : *text) {
    auto c = static_cast<unsigned char>(raw);
    if (c == '\\') {
      end_word();
      in_pronunciation = !in_pronunciation;
      continue;
    }
    if (c == '[') {
      end_word();
      ++bracket_depth;
      continue;
    }
    if (c == ']') {
      end_word();
      bracket_depth = std::max(0, bracket_depth - 1);
      continue;
    }
    if (c == '\n') {
      // A pronunciation never spans lines, an etymology never spans entries (a blank line):
      // an unclosed one must not swallow the file.
      in_pronunciation = false;
      if (blank_line)
        bracket_depth = 0;
      blank_line = true;
    } else if (std::isspace(c) == 0) {
      blank_line = false;
    }
    if (in_pronunciation || bracket_depth > 0)
      continue;
    if (std::isalpha(c) != 0)
      word.push_back(static_cast<char>(std::tolower(c)));
    else
      end_word();
  }
  end_word();
  if (words.empty())
    return make_error(errc::invalid_argument, "'" + path + "' has no words");
  return words;
}

vocabulary vocabulary::build(const std::vector<std::string>& corpus, std::int64_t size) {
  std::unordered_map<std::string, std::pair<std::int64_t, std::int64_t>> seen;  // count, first
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    auto [at, fresh] = seen.emplace(corpus[i], std::make_pair(std::int64_t{0}, static_cast<std::int64_t>(i)));
    ++at->second.first;
  }
  std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> ranked(seen.begin(), seen.end());
  std::sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first
                                            : a.second.second < b.second.second;
  });
  vocabulary v;
  v.words.push_back("UNK");
  v.counts.push_back(0);
  for (auto& [word, count_first] : ranked) {
    if (static_cast<std::int64_t>(v.words.size()) < size) {
      v.ids.emplace(word, static_cast<std::int64_t>(v.words.size()));
      v.words.push_back(word);
      v.counts.push_back(count_first.first);
    } else {
      v.counts[0] += count_first.first;
    }
  }
  return v;
}

std::vector<std::int64_t> vocabulary::encode(const std::vector<std::string>& corpus) const {
  std::vector<std::int64_t> out;
  out.reserve(corpus.size());
  for (auto& w : corpus) {
    auto at = ids.find(w);
    out.push_back(at == ids.end() ? 0 : at->second);
  }
  return out;
}

skipgram_batches::skipgram_batches(std::vector<std::int64_t> corpus, std::int64_t batch_size,
                                   int skip_window, int num_skips, std::uint64_t seed)
    : corpus_(std::move(corpus)), batch_size_(batch_size), skip_window_(skip_window),
      num_skips_(num_skips), random_(seed) {}

std::pair<tensor, tensor> skipgram_batches::next() {
  std::vector<std::int64_t> centers, contexts;
  auto n = corpus_.size();
  while (static_cast<std::int64_t>(centers.size()) < batch_size_) {
    // The window of 2 skip_window + 1 words from at_, its center in the middle.
    std::vector<int> offsets;
    for (int d = -skip_window_; d <= skip_window_; ++d)
      if (d != 0)
        offsets.push_back(d);
    std::shuffle(offsets.begin(), offsets.end(), random_);
    auto center = (at_ + static_cast<std::size_t>(skip_window_)) % n;
    for (int k = 0; k < num_skips_ && static_cast<std::int64_t>(centers.size()) < batch_size_; ++k) {
      auto signed_n = static_cast<std::int64_t>(n);
      auto context = static_cast<std::size_t>(
        (static_cast<std::int64_t>(center) + offsets[static_cast<std::size_t>(k)] + signed_n) % signed_n);
      centers.push_back(corpus_[center]);
      contexts.push_back(corpus_[context]);
    }
    at_ = (at_ + 1) % n;
  }
  return {tensor::from_vector<std::int64_t>(centers, {batch_size_}),
          tensor::from_vector<std::int64_t>(contexts, {batch_size_, 1})};
}

result<related_words> read_wordnet(const std::string& directory) {
  related_words related;
  for (auto part : {"noun", "verb", "adj", "adv"}) {
    auto path = directory + "/data." + part;
    std::ifstream in{path};
    if (!in)
      return make_error(errc::not_found, "cannot open WordNet's '" + path + "'");
    // synset offset -> its words, and the hypernym offsets of each synset, of this part.
    std::map<std::string, std::vector<std::string>> words_of;
    std::vector<std::pair<std::string, std::vector<std::string>>> hypernyms_of;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == ' ')
        continue;  // the license header
      std::istringstream fields{line};
      std::string offset, lex_file, type, count_hex;
      fields >> offset >> lex_file >> type >> count_hex;
      auto count = std::stol(count_hex, nullptr, 16);
      std::vector<std::string> words;
      for (long i = 0; i < count; ++i) {
        std::string word, lex_id;
        fields >> word >> lex_id;
        // Single lower-case words only ("physical_entity" and "Paris" are no corpus words).
        if (std::all_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; }))
          words.push_back(word);
      }
      int pointers = 0;
      fields >> pointers;
      std::vector<std::string> hypernyms;
      for (int p = 0; p < pointers; ++p) {
        std::string symbol, target, pos, source;
        fields >> symbol >> target >> pos >> source;
        if (symbol == "@" || symbol == "@i")
          hypernyms.push_back(target);
      }
      for (auto& w : words)
        for (auto& other : words)
          if (other != w)
            related[w].insert(other);
      words_of[offset] = std::move(words);
      hypernyms_of.emplace_back(offset, std::move(hypernyms));
    }
    for (auto& [offset, hypernyms] : hypernyms_of)
      for (auto& h : hypernyms)
        if (auto up = words_of.find(h); up != words_of.end())
          for (auto& w : words_of[offset])
            for (auto& general : up->second)
              related[w].insert(general);
  }
  return related;
}

tensor unit_rows(const tensor& vectors) {
  auto rows = vectors.shape().dim(0), dim = vectors.shape().dim(1);
  tensor out{dtype::float32, vectors.shape()};
  const float* v = vectors.data<float>();
  float* u = out.data<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    double norm = 0;
    for (std::int64_t c = 0; c < dim; ++c)
      norm += static_cast<double>(v[r * dim + c]) * v[r * dim + c];
    auto scale = norm > 0 ? 1.0 / std::sqrt(norm) : 0.0;
    for (std::int64_t c = 0; c < dim; ++c)
      u[r * dim + c] = static_cast<float>(v[r * dim + c] * scale);
  }
  return out;
}

double wordnet_score(const tensor& unit, const vocabulary& vocab, const related_words& related,
                     std::int64_t first, std::int64_t last, std::int64_t among, int neighbours) {
  auto rows = std::min(unit.shape().dim(0), among), dim = unit.shape().dim(1);
  std::int64_t asked = 0, found = 0;
  for (auto id = first; id < std::min(last, rows); ++id) {
    auto known = related.find(vocab.words[static_cast<std::size_t>(id)]);
    if (known == related.end() || known->second.empty())
      continue;
    ++asked;
    for (auto near : nearest(unit.data<float>(), rows, dim, id, neighbours))
      if (known->second.count(vocab.words[static_cast<std::size_t>(near)]) > 0) {
        ++found;
        break;
      }
  }
  return asked > 0 ? static_cast<double>(found) / static_cast<double>(asked) : 0.0;
}

std::vector<std::string> nearest_words(const tensor& unit, const vocabulary& vocab,
                                       const std::string& word, int k, std::int64_t among) {
  auto at = vocab.ids.find(word);
  if (at == vocab.ids.end())
    return {};
  std::vector<std::string> out;
  for (auto id : nearest(unit.data<float>(), std::min(unit.shape().dim(0), among),
                         unit.shape().dim(1), at->second, k))
    out.push_back(vocab.words[static_cast<std::size_t>(id)]);
  return out;
}

} // namespace actorflow::train
