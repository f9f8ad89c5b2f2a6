// A 5-field cron expression in UTC (minute hour day-of-month month day-of-week), as crontab(5)
// reads it: numbers, `*`, ranges `a-b`, steps `*/n` and `a-b/n`, lists `a,b-c`; month names
// (jan..dec) and day names (sun..sat) in any case; day-of-week 0 and 7 are Sunday. When both
// day-of-month and day-of-week are restricted (neither starts with `*`), a day matches when
// either does (Vixie cron). No @-macros, no seconds field, no time zones: schedules are UTC.
//
// Debian ships no maintained C/C++ cron-expression library (only Go, Perl and Ruby ones), so
// this is our own, tested against a table of specs and times (cron_test.cc).
//
// Thread-safety: a parsed CronSpec is immutable; Next() is const and pure.
#pragma once

#include <bitset>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ts::common {

class CronSpec {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  // INVALID_ARGUMENT "cron: <field>: ..." naming the field (minute, hour, day-of-month, month,
  // day-of-week) and the bad text.
  static absl::StatusOr<CronSpec> Parse(std::string_view spec);

  // The first minute strictly after `after` that the spec matches; nullopt when none comes
  // within 5 years (e.g. "0 0 30 2 *", the 30th of February).
  std::optional<TimePoint> Next(TimePoint after) const;

  const std::string& text() const { return text_; }

 private:
  CronSpec() = default;
  bool DayMatches(int mday, int mon, int wday) const;

  std::string text_;
  std::bitset<60> minute_;
  std::bitset<24> hour_;
  std::bitset<32> mday_;   // 1..31
  std::bitset<13> month_;  // 1..12
  std::bitset<7> wday_;    // 0..6, Sunday 0
  bool mday_star_ = false;
  bool wday_star_ = false;
};

}  // namespace ts::common
