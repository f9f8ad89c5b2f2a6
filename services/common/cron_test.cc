#include "services/common/cron.h"

#include <gtest/gtest.h>
#include <time.h>

namespace ts::common {
namespace {

using TimePoint = CronSpec::TimePoint;

TimePoint Utc(int y, int mo, int d, int h, int mi, int s = 0) {
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string Show(TimePoint t) {
  time_t tt = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M %a", &tm);
  return buf;
}

struct Case {
  const char* spec;
  TimePoint after;
  const char* next;  // "%Y-%m-%d %H:%M %a"
};

TEST(CronSpecTest, NextMatchesTheTable) {
  // 2026-12-04 is a Friday.
  const Case cases[] = {
      {"* * * * *", Utc(2026, 12, 4, 15, 30, 12), "2026-12-04 15:31 Fri"},
      {"* * * * *", Utc(2026, 12, 4, 15, 30, 0), "2026-12-04 15:31 Fri"},  // strictly after
      {"0 2 * * *", Utc(2026, 12, 4, 1, 59), "2026-12-04 02:00 Fri"},
      {"0 2 * * *", Utc(2026, 12, 4, 2, 0), "2026-12-05 02:00 Sat"},
      {"30 2 * * 1-5", Utc(2026, 12, 4, 3, 0), "2026-12-07 02:30 Mon"},  // weekend skipped
      {"*/15 * * * *", Utc(2026, 12, 4, 15, 31), "2026-12-04 15:45 Fri"},
      {"5/20 * * * *", Utc(2026, 12, 4, 15, 46), "2026-12-04 16:05 Fri"},
      {"0 0 1 * *", Utc(2026, 12, 4, 0, 0), "2027-01-01 00:00 Fri"},           // year rollover
      {"0 0 29 2 *", Utc(2026, 3, 1, 0, 0), "2028-02-29 00:00 Tue"},           // next leap day
      {"0 12 * jan,JUL sun", Utc(2026, 12, 4, 0, 0), "2027-01-03 12:00 Sun"},  // names
      {"0 0 * * 7", Utc(2026, 12, 4, 0, 0), "2026-12-06 00:00 Sun"},           // 7 is Sunday
      // Both day fields restricted: either matches (the 13th, or any Friday).
      {"0 0 13 * 5", Utc(2026, 12, 5, 0, 0), "2026-12-11 00:00 Fri"},
      {"0 0 13 * 5", Utc(2026, 12, 11, 0, 0), "2026-12-13 00:00 Sun"},
      // Day-of-month starred with a step: both must match.
      {"0 0 */10 * 5", Utc(2026, 12, 4, 0, 0), "2026-12-11 00:00 Fri"},
      {"0 0 */10 * 5", Utc(2026, 12, 11, 0, 0), "2027-01-01 00:00 Fri"},
      {"15,45 9-10 * * *", Utc(2026, 12, 4, 10, 45), "2026-12-05 09:15 Sat"},
      {"59 23 31 12 *", Utc(2026, 12, 31, 23, 59), "2027-12-31 23:59 Fri"},
  };
  for (const Case& c : cases) {
    auto spec = CronSpec::Parse(c.spec);
    ASSERT_TRUE(spec.ok()) << c.spec << ": " << spec.status();
    auto next = spec->Next(c.after);
    ASSERT_TRUE(next.has_value()) << c.spec;
    EXPECT_EQ(Show(*next), c.next) << c.spec << " after " << Show(c.after);
  }
}

TEST(CronSpecTest, ImpossibleDateHasNoNextTime) {
  auto spec = CronSpec::Parse("0 0 30 2 *");
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->Next(Utc(2026, 1, 1, 0, 0)).has_value());
}

TEST(CronSpecTest, BadSpecsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"* * * *", "want 5 fields"},
      {"60 * * * *", "minute: '60': out of range 0-59"},
      {"* 24 * * *", "hour: '24'"},
      {"* * 0 * *", "day-of-month: '0'"},
      {"* * * 13 *", "month: '13'"},
      {"* * * foo *", "month: 'foo': not a number or name"},
      {"* * * * 8", "day-of-week: '8'"},
      {"*/0 * * * *", "minute: '*/0': step must be a positive number"},
      {"30-10 * * * *", "minute: '30-10': range runs backwards"},
      {"1,,2 * * * *", "minute: '': not a number or name"},
  };
  for (const auto& [spec, want] : cases) {
    auto p = CronSpec::Parse(spec);
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(p.status().message()).find(want), std::string::npos)
        << spec << " -> " << p.status().message();
  }
}

TEST(CronSpecTest, TextIsNormalized) {
  auto spec = CronSpec::Parse("  0   2 * *  1-5 ");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->text(), "0 2 * * 1-5");
}

}  // namespace
}  // namespace ts::common
