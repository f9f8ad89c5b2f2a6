#include "services/common/metrics.h"

#include <prometheus/text_serializer.h>

namespace ts::common {

prometheus::Counter& MetricsRegistry::Counter(const std::string& name, const std::string& help) {
  return CounterFamily(name, help).Add({});
}

prometheus::Gauge& MetricsRegistry::Gauge(const std::string& name, const std::string& help) {
  return GaugeFamily(name, help).Add({});
}

prometheus::Histogram& MetricsRegistry::Histogram(
    const std::string& name, const std::string& help,
    const prometheus::Histogram::BucketBoundaries& buckets) {
  return HistogramFamily(name, help).Add({}, buckets);
}

prometheus::Family<prometheus::Counter>& MetricsRegistry::CounterFamily(const std::string& name,
                                                                        const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
}

prometheus::Family<prometheus::Gauge>& MetricsRegistry::GaugeFamily(const std::string& name,
                                                                    const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
}

prometheus::Family<prometheus::Histogram>& MetricsRegistry::HistogramFamily(
    const std::string& name, const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
}

std::string MetricsRegistry::Exposition() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

HttpHandler MetricsRegistry::Handler(std::function<void()> refresh) const {
  return [this, refresh = std::move(refresh)](const std::string&) {
    if (refresh) refresh();
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", Exposition()};
  };
}

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  return {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

prometheus::Histogram::BucketBoundaries ModelSecondsBuckets() {
  return {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

}  // namespace ts::common
