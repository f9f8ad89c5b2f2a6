// One Prometheus registry per service, the shorthands that declare its metrics, and the
// /metrics route that exposes it (text format 0.0.4). The scheduler and the worker declare their
// metrics as members initialised from a MetricsRegistry, so each metric is one line.
//
// Thread-safety: declaring metrics is for construction time; the metrics themselves and
// Exposition() are safe from any thread (prometheus-cpp's own locking).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "services/common/http_server.h"

namespace ts::common {

class MetricsRegistry {
 public:
  // A metric without labels.
  prometheus::Counter& Counter(const std::string& name, const std::string& help);
  prometheus::Gauge& Gauge(const std::string& name, const std::string& help);
  prometheus::Histogram& Histogram(const std::string& name, const std::string& help,
                                   const prometheus::Histogram::BucketBoundaries& buckets);
  // A family whose members the caller adds by label values.
  prometheus::Family<prometheus::Counter>& CounterFamily(const std::string& name,
                                                         const std::string& help);
  prometheus::Family<prometheus::Gauge>& GaugeFamily(const std::string& name,
                                                     const std::string& help);
  prometheus::Family<prometheus::Histogram>& HistogramFamily(const std::string& name,
                                                             const std::string& help);

  // Every metric in the text exposition format.
  std::string Exposition() const;
  // The /metrics handler: runs `refresh` (e.g. to sample RSS), then answers Exposition().
  HttpHandler Handler(std::function<void()> refresh = {}) const;

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
};

// Buckets for request latencies (0.5 ms .. 2.5 s) and for model run times (10 ms .. 300 s).
prometheus::Histogram::BucketBoundaries LatencyBuckets();
prometheus::Histogram::BucketBoundaries ModelSecondsBuckets();

}  // namespace ts::common
