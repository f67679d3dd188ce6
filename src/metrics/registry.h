#pragma once
// Metrics: counters, gauges and histograms with labels, and their rendering in the Prometheus text
// exposition format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/). Debian 12
// packages no C++ Prometheus client, so this small writer is ours; CI checks its output with
// `promtool check metrics`. The metric names of gpugeek are listed in docs/metrics.md.
//
//   metrics::Registry registry;
//   auto& placed = registry.AddCounter("gpugeek_scheduling_placements_total", "Jobs placed.", {"policy"});
//   placed.With({"FGDFit"}).Inc();
//   auto& cycle = registry.AddHistogram("gpugeek_scheduling_cycle_duration_seconds", "...", {},
//                                       metrics::ExponentialBuckets(0.0001, 4, 10));
//   cycle.With({}).Observe(0.0031);
//   registry.AddCollector([&](metrics::Writer& w) {   // state read at scrape time
//     w.Family("gpugeek_pool_gpus", "GPUs in the pool.", metrics::Type::kGauge);
//     w.Sample({{"model", "A100-SXM-80GB"}}, 8);
//   });
//   std::string text = registry.Render();
//
// Thread-safety: Add* and AddCollector before concurrent use; With(), the instruments and Render() are
// thread-safe. Instruments returned by With() live as long as the registry.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpugeek::metrics {

enum class Type { kCounter, kGauge, kHistogram };

// Label name/value pairs of one sample, in the order they are written.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Whether `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) / label name ([a-zA-Z_][a-zA-Z0-9_]*,
// not starting with "__", which Prometheus reserves).
bool ValidMetricName(const std::string& name);
bool ValidLabelName(const std::string& name);

// Appends families and samples in the text format. Family() opens a family (HELP and TYPE lines);
// Sample() adds one sample of it. Label values are escaped (\\, \", \n); values are written as Go's
// ParseFloat reads them ("+Inf", "-Inf", "NaN", shortest round-trip decimal otherwise).
// A family name opened twice, or an invalid name, is a programming error: it is dropped (with its
// samples) and logged once, so one bad collector cannot make the whole scrape unparsable.
class Writer {
 public:
  void Family(const std::string& name, const std::string& help, Type type);
  // A sample of the open family; `suffix` is appended to the family name ("_bucket", "_sum", "_count").
  void Sample(const Labels& labels, double value, const std::string& suffix = "");
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string family_;
  bool dropping_ = false;
  std::map<std::string, bool> seen_;
};

class Counter {
 public:
  // Adds `v` (>= 0; a negative or NaN increment is ignored: counters only go up).
  void Inc(double v = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  // `bounds`: upper bounds, strictly increasing and finite (+Inf is implicit).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Take() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = above every bound
  double sum_ = 0;
};

// `count` bounds: start, start*factor, ... InvalidArgument-free: start > 0, factor > 1, count >= 1
// are the caller's contract.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// Instruments of one metric name, one per distinct label-value tuple.
template <typename T>
class Family {
 public:
  // The instrument for these label values (as many as the family's label names; a wrong count is a
  // programming error: the values are padded or cut, and the mismatch is logged).
  T& With(const std::vector<std::string>& values);

 private:
  friend class Registry;
  Family(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}
  void Render(Writer& w) const;

  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_;
};

class Registry {
 public:
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              const std::vector<std::string>& label_names);
  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          const std::vector<std::string>& label_names);
  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& label_names, std::vector<double> bounds);
  // Called by each Render, after the instruments, to write families that mirror state held elsewhere.
  void AddCollector(std::function<void(Writer&)> collector);

  // Every family, in the order added, then the collectors' output. Ends with a newline.
  std::string Render() const;

 private:
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
  std::vector<std::function<void(Writer&)>> order_;  // renders each family / collector in order
};

// The content type of Render()'s text, for the HTTP reply.
inline constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace gpugeek::metrics
