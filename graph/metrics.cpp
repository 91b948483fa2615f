#include "graph/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace actorflow {

namespace {

enum class metric_kind { counter, gauge, histogram };

const char* kind_name(metric_kind k) {
  switch (k) {
    case metric_kind::counter:
      return "counter";
    case metric_kind::gauge:
      return "gauge";
    case metric_kind::histogram:
      return "histogram";
  }
  return "untyped";
}

std::string escaped(const std::string& s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quotes)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

/// `{a="x",b="y"}`, with `extra` (a histogram's le) last; empty without labels.
std::string label_text(const metric_labels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty())
    return {};
  std::string out = "{";
  for (auto& [name, value] : labels) {
    if (out.size() > 1)
      out += ',';
    out += name + "=\"" + escaped(value, true) + '"';
  }
  if (!extra.empty())
    out += (out.size() > 1 ? "," : "") + extra;
  return out + '}';
}

std::string number(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  char text[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    std::snprintf(text, sizeof text, "%.0f", v);
  else
    std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

/// One family as rendered: its header and its sample lines.
struct rendered_family {
  metric_kind kind = metric_kind::gauge;
  std::string help;
  std::vector<std::string> lines;
};

class collecting_sink : public metric_sink {
public:
  explicit collecting_sink(std::map<std::string, rendered_family>& out) : out_(out) {}
  void gauge(const std::string& name, const std::string& help, const metric_labels& labels,
             double value) override {
    add(metric_kind::gauge, name, help, labels, value);
  }
  void counter(const std::string& name, const std::string& help, const metric_labels& labels,
               double value) override {
    add(metric_kind::counter, name, help, labels, value);
  }

private:
  void add(metric_kind kind, const std::string& name, const std::string& help,
           const metric_labels& labels, double value) {
    auto [at, made] = out_.try_emplace(name);
    if (made) {
      at->second.kind = kind;
      at->second.help = help;
    }
    at->second.lines.push_back(name + label_text(labels) + ' ' + number(value));
  }
  std::map<std::string, rendered_family>& out_;
};

} // namespace

const std::vector<double>& latency_buckets_seconds() {
  static const std::vector<double> bounds{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                          0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                          5,      10,      30,     60};
  return bounds;
}

metric_histogram::metric_histogram(const std::atomic<bool>* enabled, std::vector<double> bounds)
  : enabled_(enabled),
    bounds_(std::move(bounds)),
    buckets_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void metric_histogram::observe(double value) {
  if (!enabled_->load(std::memory_order_relaxed))
    return;
  auto bucket = static_cast<std::size_t>(
    std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_nano_.fetch_add(static_cast<std::int64_t>(std::llround(value * 1e9)), std::memory_order_relaxed);
}

double metric_histogram::sum() const {
  return static_cast<double>(sum_nano_.load(std::memory_order_relaxed)) * 1e-9;
}

std::vector<std::uint64_t> metric_histogram::cumulative_counts() const {
  std::vector<std::uint64_t> out(bounds_.size() + 1);
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i)
    out[i] = running += buckets_[i].load(std::memory_order_relaxed);
  return out;
}

struct metrics_registry::family {
  metric_kind kind;
  std::string help;
  std::vector<double> bounds;
  // Series by their labels; node-based so references stay valid.
  std::map<metric_labels, std::unique_ptr<metric_counter>> counters;
  std::map<metric_labels, std::unique_ptr<metric_gauge>> gauges;
  std::map<metric_labels, std::unique_ptr<metric_histogram>> histograms;
};

metrics_registry::metrics_registry() = default;
metrics_registry::~metrics_registry() = default;

namespace {

template <class Family>
Family& family_of(std::map<std::string, std::unique_ptr<Family>>& families, const std::string& name,
                  const std::string& help, metric_kind kind) {
  auto& slot = families[name];
  if (!slot)
    slot.reset(new Family{kind, help, {}, {}, {}, {}});
  else if (slot->kind != kind)
    throw std::logic_error("metric '" + name + "' is a " + kind_name(slot->kind) + ", not a " +
                           kind_name(kind));
  return *slot;
}

} // namespace

metric_counter& metrics_registry::counter(const std::string& name, const std::string& help,
                                          const metric_labels& labels) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto& f = family_of(families_, name, help, metric_kind::counter);
  auto& series = f.counters[labels];
  if (!series)
    series.reset(new metric_counter{&enabled_});
  return *series;
}

metric_gauge& metrics_registry::gauge(const std::string& name, const std::string& help,
                                      const metric_labels& labels) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto& f = family_of(families_, name, help, metric_kind::gauge);
  auto& series = f.gauges[labels];
  if (!series)
    series.reset(new metric_gauge{});
  return *series;
}

metric_histogram& metrics_registry::histogram(const std::string& name, const std::string& help,
                                              const metric_labels& labels,
                                              const std::vector<double>& bounds) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto& f = family_of(families_, name, help, metric_kind::histogram);
  if (f.histograms.empty())
    f.bounds = bounds;
  else if (f.bounds != bounds)
    throw std::logic_error("histogram '" + name + "' used with other bucket bounds");
  auto& series = f.histograms[labels];
  if (!series)
    series.reset(new metric_histogram{&enabled_, bounds});
  return *series;
}

metrics_registry::collector_handle::collector_handle(collector_handle&& other) noexcept
  : owner_(other.owner_), id_(other.id_) {
  other.owner_ = nullptr;
}

metrics_registry::collector_handle&
metrics_registry::collector_handle::operator=(collector_handle&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr)
      owner_->remove_collector(id_);
    owner_ = other.owner_;
    id_ = other.id_;
    other.owner_ = nullptr;
  }
  return *this;
}

metrics_registry::collector_handle::~collector_handle() {
  if (owner_ != nullptr)
    owner_->remove_collector(id_);
}

metrics_registry::collector_handle
metrics_registry::collect(std::function<void(metric_sink&)> collector) {
  std::lock_guard<std::mutex> lock{mutex_};
  auto id = next_collector_++;
  collectors_.emplace(id, std::move(collector));
  return collector_handle{this, id};
}

void metrics_registry::remove_collector(std::uint64_t id) {
  std::lock_guard<std::mutex> lock{mutex_};
  collectors_.erase(id);
}

std::string metrics_registry::render() const {
  std::map<std::string, rendered_family> out;
  std::lock_guard<std::mutex> lock{mutex_};
  for (auto& [name, f] : families_) {
    auto& r = out[name];
    r.kind = f->kind;
    r.help = f->help;
    for (auto& [labels, c] : f->counters)
      r.lines.push_back(name + label_text(labels) + ' ' + number(static_cast<double>(c->value())));
    for (auto& [labels, g] : f->gauges)
      r.lines.push_back(name + label_text(labels) + ' ' + number(static_cast<double>(g->value())));
    for (auto& [labels, h] : f->histograms) {
      auto counts = h->cumulative_counts();
      for (std::size_t i = 0; i < counts.size(); ++i) {
        auto le = i < h->bounds().size() ? number(h->bounds()[i]) : std::string{"+Inf"};
        r.lines.push_back(name + "_bucket" + label_text(labels, "le=\"" + le + '"') + ' ' +
                          number(static_cast<double>(counts[i])));
      }
      r.lines.push_back(name + "_sum" + label_text(labels) + ' ' + number(h->sum()));
      r.lines.push_back(name + "_count" + label_text(labels) + ' ' +
                        number(static_cast<double>(counts.back())));
    }
  }
  collecting_sink sink{out};
  for (auto& [id, collector] : collectors_)
    collector(sink);
  std::string page;
  for (auto& [name, r] : out) {
    if (r.lines.empty())
      continue;
    page += "# HELP " + name + ' ' + escaped(r.help, false) + '\n';
    page += "# TYPE " + name + ' ' + kind_name(r.kind) + '\n';
    for (auto& line : r.lines)
      page += line + '\n';
  }
  return page;
}

namespace {
metric_labels with_outcome(metric_labels labels, const char* outcome) {
  labels.emplace_back("outcome", outcome);
  return labels;
}
} // namespace

step_metrics::step_metrics(const std::string& prefix, const std::string& what,
                           const metric_labels& labels)
  : succeeded_(default_metrics().counter(prefix + "_steps_total", "Completed " + what + ", by outcome.",
                                         with_outcome(labels, "ok"))),
    failed_(default_metrics().counter(prefix + "_steps_total", "Completed " + what + ", by outcome.",
                                      with_outcome(labels, "error"))),
    seconds_(default_metrics().histogram(prefix + "_step_seconds", "Wall time of " + what + ".",
                                         labels)) {}

metrics_registry& default_metrics() {
  static metrics_registry* registry = new metrics_registry; // never destroyed: used until exit
  return *registry;
}

} // namespace actorflow
