#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpugeek::metrics {
namespace {

bool NameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

bool ValidName(const std::string& name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

// Go's strconv.ParseFloat accepts these spellings; Prometheus parses sample values with it.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void AppendEscaped(std::string& out, const std::string& value, bool quote) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void AtomicAdd(std::atomic<double>& a, double v) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

bool ValidMetricName(const std::string& name) { return ValidName(name, true); }
bool ValidLabelName(const std::string& name) { return ValidName(name, false) && name.rfind("__", 0) != 0; }

void Writer::Family(const std::string& name, const std::string& help, Type type) {
  family_ = name;
  dropping_ = !ValidMetricName(name) || seen_.contains(name);
  if (dropping_) {
    spdlog::error("metrics: family \"{}\" is {}; dropped", name, seen_.contains(name) ? "written twice" : "misnamed");
    return;
  }
  seen_[name] = true;
  text_ += "# HELP " + name + " ";
  AppendEscaped(text_, help, false);
  text_ += fmt::format("\n# TYPE {} {}\n", name, TypeName(type));
}

void Writer::Sample(const Labels& labels, double value, const std::string& suffix) {
  if (dropping_ || family_.empty()) return;
  for (const auto& [name, unused] : labels) {
    if (!ValidLabelName(name)) {
      spdlog::error("metrics: label \"{}\" of {} is misnamed; sample dropped", name, family_);
      return;
    }
  }
  text_ += family_;
  text_ += suffix;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ',';
      text_ += labels[i].first;
      text_ += "=\"";
      AppendEscaped(text_, labels[i].second, true);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += FormatValue(value);
  text_ += '\n';
}

void Counter::Inc(double v) {
  if (!(v >= 0)) return;  // negative or NaN
  AtomicAdd(value_, v);
}

void Gauge::Add(double v) { AtomicAdd(value_, v); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();  // le: v <= bound
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[bucket];
  sum_ += v;
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

template <typename T>
T& Family<T>::With(const std::vector<std::string>& values) {
  std::vector<std::string> key = values;
  if (key.size() != label_names_.size()) {
    spdlog::error("metrics: {} takes {} label values, got {}", name_, label_names_.size(), key.size());
    key.resize(label_names_.size());
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<T>& child = children_[key];
  if (child == nullptr) {
    if constexpr (std::is_same_v<T, Histogram>) {
      child = std::make_unique<Histogram>(bounds_);
    } else {
      child = std::make_unique<T>();
    }
  }
  return *child;
}

template <typename T>
void Family<T>::Render(Writer& w) const {
  constexpr Type type = std::is_same_v<T, Counter> ? Type::kCounter
                        : std::is_same_v<T, Gauge> ? Type::kGauge
                                                   : Type::kHistogram;
  w.Family(name_, help_, type);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [values, child] : children_) {
    Labels labels;
    for (size_t i = 0; i < label_names_.size(); ++i) labels.emplace_back(label_names_[i], values[i]);
    if constexpr (std::is_same_v<T, Histogram>) {
      const Histogram::Snapshot s = child->Take();
      Labels with_le = labels;
      with_le.emplace_back("le", "");
      for (size_t i = 0; i < s.cumulative.size(); ++i) {
        with_le.back().second = i < s.bounds.size() ? fmt::format("{}", s.bounds[i]) : "+Inf";
        w.Sample(with_le, static_cast<double>(s.cumulative[i]), "_bucket");
      }
      w.Sample(labels, s.sum, "_sum");
      w.Sample(labels, static_cast<double>(s.count), "_count");
    } else {
      w.Sample(labels, child->Value());
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Family<Counter>& Registry::AddCounter(const std::string& name, const std::string& help,
                                      const std::vector<std::string>& label_names) {
  counters_.push_back(std::unique_ptr<Family<Counter>>(new Family<Counter>(name, help, label_names, {})));
  const Family<Counter>* f = counters_.back().get();
  order_.push_back([f](Writer& w) { f->Render(w); });
  return *counters_.back();
}

Family<Gauge>& Registry::AddGauge(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& label_names) {
  gauges_.push_back(std::unique_ptr<Family<Gauge>>(new Family<Gauge>(name, help, label_names, {})));
  const Family<Gauge>* f = gauges_.back().get();
  order_.push_back([f](Writer& w) { f->Render(w); });
  return *gauges_.back();
}

Family<Histogram>& Registry::AddHistogram(const std::string& name, const std::string& help,
                                          const std::vector<std::string>& label_names, std::vector<double> bounds) {
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::erase_if(bounds, [](double b) { return !std::isfinite(b); });
  histograms_.push_back(
      std::unique_ptr<Family<Histogram>>(new Family<Histogram>(name, help, label_names, std::move(bounds))));
  const Family<Histogram>* f = histograms_.back().get();
  order_.push_back([f](Writer& w) { f->Render(w); });
  return *histograms_.back();
}

void Registry::AddCollector(std::function<void(Writer&)> collector) { order_.push_back(std::move(collector)); }

std::string Registry::Render() const {
  Writer w;
  for (const auto& render : order_) render(w);
  return w.text();
}

}  // namespace gpugeek::metrics
