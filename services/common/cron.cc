#include "services/common/cron.h"

#include <time.h>

#include <array>
#include <cctype>
#include <charconv>
#include <vector>

namespace ts::common {
namespace {

struct FieldDef {
  const char* name;
  int lo, hi;
  const char* const* names;  // lowercase three-letter names for lo.., or null
};

constexpr const char* kMonths[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                   "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* kDays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
constexpr std::array<FieldDef, 5> kFields = {{{"minute", 0, 59, nullptr},
                                              {"hour", 0, 23, nullptr},
                                              {"day-of-month", 1, 31, nullptr},
                                              {"month", 1, 12, kMonths},
                                              {"day-of-week", 0, 7, kDays}}};

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? p : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

absl::Status Bad(const FieldDef& f, std::string_view text, const std::string& why) {
  return absl::InvalidArgumentError(std::string("cron: ") + f.name + ": '" + std::string(text) +
                                    "': " + why);
}

// A number or (where the field has them) a name.
std::optional<int> Value(const FieldDef& f, std::string_view t) {
  if (t.empty()) return std::nullopt;
  int v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc() && p == t.data() + t.size()) return v;
  if (!f.names || t.size() != 3) return std::nullopt;
  std::string lower;
  for (char c : t) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const int n = f.hi - f.lo + 1 - (f.hi == 7 ? 1 : 0);
  for (int i = 0; i < n; ++i) {
    if (lower == f.names[i]) return f.lo + i;
  }
  return std::nullopt;
}

// One field into `bits` (index = value). Returns whether it is `*` or `*/n`.
absl::StatusOr<bool> ParseField(const FieldDef& f, std::string_view text, std::vector<bool>* bits) {
  bits->assign(f.hi + 1, false);
  bool star = false;
  if (text.empty()) return Bad(f, text, "empty");
  for (std::string_view item : Split(text, ',')) {
    std::string_view range = item;
    int step = 1;
    if (size_t slash = item.find('/'); slash != std::string_view::npos) {
      range = item.substr(0, slash);
      auto s = item.substr(slash + 1);
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
      if (ec != std::errc() || p != s.data() + s.size() || step < 1) {
        return Bad(f, item, "step must be a positive number");
      }
    }
    int lo = f.lo, hi = f.hi;
    if (range == "*") {
      if (item == text) star = true;
      if (f.hi == 7) hi = 6;  // 7 is Sunday again
    } else {
      const size_t dash = range.find('-');
      auto a = Value(f, range.substr(0, dash));
      if (!a) return Bad(f, item, "not a number or name");
      lo = hi = *a;
      if (dash != std::string_view::npos) {
        auto b = Value(f, range.substr(dash + 1));
        if (!b) return Bad(f, item, "not a number or name");
        hi = *b;
      } else if (item.find('/') != std::string_view::npos) {
        hi = f.hi == 7 ? 6 : f.hi;  // "5/15": from 5 to the end, every 15
      }
      if (lo < f.lo || hi > f.hi) {
        return Bad(f, item, "out of range " + std::to_string(f.lo) + "-" + std::to_string(f.hi));
      }
      if (lo > hi) return Bad(f, item, "range runs backwards");
    }
    for (int v = lo; v <= hi; v += step) (*bits)[v] = true;
  }
  return star;
}

}  // namespace

absl::StatusOr<CronSpec> CronSpec::Parse(std::string_view spec) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < spec.size()) {
    while (i < spec.size() && std::isspace(static_cast<unsigned char>(spec[i]))) ++i;
    size_t j = i;
    while (j < spec.size() && !std::isspace(static_cast<unsigned char>(spec[j]))) ++j;
    if (j > i) fields.push_back(spec.substr(i, j - i));
    i = j;
  }
  if (fields.size() != 5) {
    return absl::InvalidArgumentError("cron: '" + std::string(spec) +
                                      "': want 5 fields (minute hour day-of-month month "
                                      "day-of-week), got " +
                                      std::to_string(fields.size()));
  }
  CronSpec c;
  std::vector<bool> bits;
  for (size_t k = 0; k < 5; ++k) {
    auto star = ParseField(kFields[k], fields[k], &bits);
    if (!star.ok()) return star.status();
    for (size_t v = 0; v < bits.size(); ++v) {
      if (!bits[v]) continue;
      switch (k) {
        case 0:
          c.minute_.set(v);
          break;
        case 1:
          c.hour_.set(v);
          break;
        case 2:
          c.mday_.set(v);
          break;
        case 3:
          c.month_.set(v);
          break;
        case 4:
          c.wday_.set(v % 7);
          break;
      }
    }
    if (k == 2) c.mday_star_ = *star;
    if (k == 4) c.wday_star_ = *star;
  }
  for (size_t k = 0; k < fields.size(); ++k) {
    if (k) c.text_ += ' ';
    c.text_ += fields[k];
  }
  return c;
}

bool CronSpec::DayMatches(int mday, int mon, int wday) const {
  if (!month_[mon]) return false;
  if (mday_star_ || wday_star_) return mday_[mday] && wday_[wday];
  return mday_[mday] || wday_[wday];
}

std::optional<CronSpec::TimePoint> CronSpec::Next(TimePoint after) const {
  using namespace std::chrono;
  // Start at the next whole minute.
  time_t t = system_clock::to_time_t(time_point_cast<seconds>(floor<minutes>(after)) + minutes(1));
  const time_t limit = t + time_t{5} * 366 * 24 * 3600;
  while (t < limit) {
    struct tm tm {};
    gmtime_r(&t, &tm);
    if (!DayMatches(tm.tm_mday, tm.tm_mon + 1, tm.tm_wday)) {
      // Skip to the next day's midnight.
      t += (24 - tm.tm_hour) * 3600 - tm.tm_min * 60;
      continue;
    }
    if (!hour_[tm.tm_hour]) {
      t += 3600 - tm.tm_min * 60;
      continue;
    }
    if (!minute_[tm.tm_min]) {
      t += 60;
      continue;
    }
    return system_clock::from_time_t(t);
  }
  return std::nullopt;
}

}  // namespace ts::common
