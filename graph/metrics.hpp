#pragma once
/// A process's metrics in Prometheus's data model: counters, gauges and histograms, each a
/// family (one name, one help text) of labelled series, rendered in the text exposition format
/// (version 0.0.4) that Prometheus scrapes.
///   auto& steps = default_metrics().counter("actorflow_steps_total", "Steps run.", {{"role", "client"}});
///   steps.add();                                   // lock-free; a series lives as long as its registry
///   auto handle = default_metrics().collect([](metric_sink& out) { out.gauge(...); });
///   std::string page = default_metrics().render();
/// Updating a series costs one relaxed atomic add, and nothing while the registry is disabled:
/// a process counts only once something serves its metrics (apps' --metrics-port), so that
/// benchmarks can compare the two in one run. Series are found by name and labels under a
/// lock; callers look them up once (per peer, per shard) and keep the reference.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace actorflow {

/// Label names and values of one series, e.g. {{"peer", "10.0.0.2:2222"}, {"channel", "bulk"}}.
using metric_labels = std::vector<std::pair<std::string, std::string>>;

class metrics_registry;

/// A value that only goes up (events, bytes).
class metric_counter {
public:
  void add(std::uint64_t n = 1) {
    if (enabled_->load(std::memory_order_relaxed))
      value_.fetch_add(n, std::memory_order_relaxed);
  }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

private:
  friend class metrics_registry;
  explicit metric_counter(const std::atomic<bool>* enabled) : enabled_(enabled) {}
  const std::atomic<bool>* enabled_;
  std::atomic<std::uint64_t> value_{0};
};

/// A value that goes up and down (open sessions).
class metric_gauge {
public:
  void add(std::int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  void set(std::int64_t v) { value_.store(v, std::memory_order_relaxed); }
  std::int64_t value() const { return value_.load(std::memory_order_relaxed); }

private:
  friend class metrics_registry;
  metric_gauge() = default;
  // Gauges count whether or not the registry is enabled: a gauge's add and its matching
  // subtract may straddle the switch.
  std::atomic<std::int64_t> value_{0};
};

/// Observations counted into buckets by upper bound (latencies, in seconds).
class metric_histogram {
public:
  void observe(double value);
  /// Observations so far, and their sum.
  std::uint64_t count() const { return cumulative_counts().back(); }
  double sum() const;
  /// Cumulative counts per bound, as rendered (the last is +Inf, equal to count()).
  std::vector<std::uint64_t> cumulative_counts() const;
  const std::vector<double>& bounds() const { return bounds_; }

private:
  friend class metrics_registry;
  metric_histogram(const std::atomic<bool>* enabled, std::vector<double> bounds);
  const std::atomic<bool>* enabled_;
  std::vector<double> bounds_;
  /// One per bound plus the +Inf bucket; not cumulative.
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  /// The sum in nanounits (1e-9), so that it adds atomically without a compare-and-swap loop.
  std::atomic<std::int64_t> sum_nano_{0};
};

/// Latency buckets from 100 µs to 60 s, for steps and their parts.
const std::vector<double>& latency_buckets_seconds();

/// What a collector reports at scrape time: values read from elsewhere (an allocator's bytes in
/// use, whether a task answers), rendered beside the registry's own series.
class metric_sink {
public:
  virtual ~metric_sink() = default;
  virtual void gauge(const std::string& name, const std::string& help, const metric_labels& labels,
                     double value) = 0;
  virtual void counter(const std::string& name, const std::string& help,
                       const metric_labels& labels, double value) = 0;
};

class metrics_registry {
public:
  metrics_registry();
  ~metrics_registry();
  metrics_registry(const metrics_registry&) = delete;
  metrics_registry& operator=(const metrics_registry&) = delete;

  /// Counting on or off (off at first); gauges and collectors are unaffected.
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  /// The series of a family with these labels, made on first use. A name used with another
  /// kind (or, for histograms, other bounds) throws std::logic_error: a programming error.
  metric_counter& counter(const std::string& name, const std::string& help, const metric_labels& labels = {});
  metric_gauge& gauge(const std::string& name, const std::string& help, const metric_labels& labels = {});
  metric_histogram& histogram(const std::string& name, const std::string& help,
                              const metric_labels& labels = {},
                              const std::vector<double>& bounds = latency_buckets_seconds());

  /// Keeps a collector registered while the handle lives (its owner's lifetime); it runs on the
  /// thread that renders, under the registry's lock, so it must not call back into it.
  class collector_handle {
  public:
    collector_handle() = default;
    collector_handle(collector_handle&&) noexcept;
    collector_handle& operator=(collector_handle&&) noexcept;
    ~collector_handle();

  private:
    friend class metrics_registry;
    collector_handle(metrics_registry* owner, std::uint64_t id) : owner_(owner), id_(id) {}
    metrics_registry* owner_ = nullptr;
    std::uint64_t id_ = 0;
  };
  [[nodiscard]] collector_handle collect(std::function<void(metric_sink&)> collector);

  /// Every family, sorted by name, in Prometheus's text format: HELP and TYPE lines, then one
  /// line per series (histograms as _bucket, _sum and _count).
  std::string render() const;

private:
  struct family;
  void remove_collector(std::uint64_t id);

  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<family>> families_;
  std::map<std::uint64_t, std::function<void(metric_sink&)>> collectors_;
  std::uint64_t next_collector_ = 1;
};

/// The process's registry: what the runtime's parts count into and what --metrics-port serves.
metrics_registry& default_metrics();

/// Steps of one kind in default_metrics(): `<prefix>_steps_total{outcome="ok"|"error"}` and the
/// histogram `<prefix>_step_seconds`, both with `labels` too. Made once per stepping thing.
///   step_metrics steps{"actorflow_client", "steps (session runs) of this process's clients"};
///   steps.record(r.ok(), seconds);
class step_metrics {
public:
  step_metrics(const std::string& prefix, const std::string& what, const metric_labels& labels = {});
  void record(bool ok, double seconds) {
    (ok ? succeeded_ : failed_).add();
    seconds_.observe(seconds);
  }

private:
  metric_counter& succeeded_;
  metric_counter& failed_;
  metric_histogram& seconds_;
};

} // namespace actorflow
