#include "services/common/metrics.h"

#include <gtest/gtest.h>

namespace ts::common {
namespace {

TEST(MetricsRegistryTest, DeclaredMetricsAppearInTheExpositionWithTheirValues) {
  MetricsRegistry m;
  prometheus::Counter& c = m.Counter("t_events_total", "Events");
  prometheus::Gauge& g = m.GaugeFamily("t_depth", "Depth").Add({{"state", "queued"}});
  prometheus::Histogram& h = m.Histogram("t_seconds", "Time", LatencyBuckets());
  c.Increment(3);
  g.Set(7);
  h.Observe(0.003);
  int refreshed = 0;
  const HttpResponse r = m.Handler([&] { ++refreshed; })("/metrics");
  EXPECT_EQ(refreshed, 1);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.content_type.find("version=0.0.4"), std::string::npos);
  EXPECT_NE(r.body.find("# HELP t_events_total Events"), std::string::npos);
  EXPECT_NE(r.body.find("t_events_total 3"), std::string::npos);
  EXPECT_NE(r.body.find("t_depth{state=\"queued\"} 7"), std::string::npos);
  EXPECT_NE(r.body.find("t_seconds_bucket{le=\"0.005\"} 1"), std::string::npos);
  EXPECT_NE(r.body.find("t_seconds_bucket{le=\"0.002\"} 0"), std::string::npos);
}

}  // namespace
}  // namespace ts::common
