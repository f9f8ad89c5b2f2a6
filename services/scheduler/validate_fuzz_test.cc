// A fuzz test over every request checker the scheduler runs before the database: the Scheduler
// service's Validate and the Query service's string limits + query::Check. Messages are filled
// by reflection with random and boundary values (NUL bytes, strings at and one past their
// limit, extreme numbers, NaN), and random wire bytes are parsed and checked too. Every answer
// must be OK or INVALID_ARGUMENT whose message starts with a field of the request; a message
// holding a NUL or an over-long string must be refused. Time-boxed to stay within the 60 s the
// issue allows in scripts/test.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include "services/common/field_limits.h"
#include "services/query/request_checks.h"
#include "services/scheduler/validate.h"
#include "touchstone/v1/query.pb.h"

namespace ts::scheduler {
namespace {

namespace gp = ::google::protobuf;
namespace v1 = ::touchstone::v1;
using Rng = std::mt19937_64;

// Each case: a fresh message and the checker the service runs on it.
struct Case {
  std::string name;
  std::function<std::unique_ptr<gp::Message>()> make;
  std::function<absl::Status(const gp::Message&)> check;
};

template <typename Req>
Case Sched() {
  return {Req::descriptor()->name(), [] { return std::make_unique<Req>(); },
          [](const gp::Message& m) { return Validate(static_cast<const Req&>(m)); }};
}

template <typename Req>
Case Query() {
  return {Req::descriptor()->name(), [] { return std::make_unique<Req>(); },
          [](const gp::Message& m) {
            absl::Status st = common::CheckStrings(m);
            return st.ok() ? query::Check(static_cast<const Req&>(m)) : st;
          }};
}

std::vector<Case> Cases() {
  return {Sched<v1::RegisterWorkerRequest>(), Sched<v1::LeaseShardRequest>(),
          Sched<v1::HeartbeatRequest>(),      Sched<v1::ReportResultsRequest>(),
          Sched<v1::FinishShardRequest>(),    Sched<v1::UpsertModelsRequest>(),
          Sched<v1::CreateSweepRequest>(),    Sched<v1::GetSweepRequest>(),
          Sched<v1::CancelSweepRequest>(),    Sched<v1::ListResultsRequest>(),
          Sched<v1::AddScheduleRequest>(),    Sched<v1::ListSchedulesRequest>(),
          Sched<v1::RemoveScheduleRequest>(), Sched<v1::SetScheduleEnabledRequest>(),
          Query<v1::ListSweepsRequest>(),     Query<v1::GetSummaryRequest>(),
          Query<v1::GetModelRequest>(),       Query<v1::OpDemandRequest>(),
          Query<v1::GraphBreaksRequest>(),    Query<v1::SuspectOpsRequest>(),
          Query<v1::CompareSweepsRequest>(),  Query<v1::GateRequest>(),
          Query<v1::WatchSweepRequest>(),     Query<v1::ListAlertsRequest>(),
          Query<v1::WatchAlertsRequest>(),    Query<v1::ListQuarantineRequest>(),
          Query<v1::AckAlertRequest>(),       Query<v1::DetectRegressionsRequest>()};
}

// Values that pass most shape checks, so that the fuzzer gets past the first refusal.
const std::vector<std::string> kPlausible = {
    "eager", "compile", "train", "sim-2.0", "{}", "{\"a\": 1}", "org/model", "text-generation",
    "LlamaForCausalLM", "llama", "pass", "open", "previous", "0 2 * * *", "nightly", "deadbeef00"};

struct Filler {
  Rng& rng;
  bool poisoned = false;  // a NUL or an over-long string was put in

  size_t Pick(size_t n) { return static_cast<size_t>(rng() % n); }

  std::string String(std::string_view limit_name) {
    const size_t limit = common::StringLimit(limit_name);
    std::string s;
    switch (Pick(8)) {
      case 0: return "";
      case 1: return kPlausible[Pick(kPlausible.size())];
      case 2: s.assign(limit, 'x'); return s;  // at the limit: fine
      case 3:
        s.assign(limit + 1 + Pick(3), 'y');  // one past
        poisoned = true;
        return s;
      case 4: {
        s = kPlausible[Pick(kPlausible.size())];
        s.insert(Pick(s.size() + 1), 1, '\0');
        poisoned = true;
        return s;
      }
      default:
        for (size_t i = 0, n = 1 + Pick(24); i < n; ++i) {
          s.push_back(static_cast<char>(' ' + Pick(95)));
        }
        return s;
    }
  }

  int64_t Int() {
    static const int64_t kEdges[] = {0, 1, -1, 2, 7, 1000, 10001, std::numeric_limits<int32_t>::max(),
                                     std::numeric_limits<int32_t>::min(),
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
    return Pick(3) == 0 ? static_cast<int64_t>(rng()) : kEdges[Pick(std::size(kEdges))];
  }

  double Double() {
    static const double kEdges[] = {0, 0.5, 1, -1, 30, 1e9, 1e300, -0.0,
                                    std::numeric_limits<double>::quiet_NaN(),
                                    std::numeric_limits<double>::infinity(),
                                    -std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::denorm_min()};
    return kEdges[Pick(std::size(kEdges))];
  }

  // `limit_name`: the field name whose string limit applies (a map entry's key and value take
  // the map's).
  void Fill(gp::Message* m, int depth, std::string_view map_name = "") {
    const gp::Descriptor* d = m->GetDescriptor();
    const gp::Reflection* r = m->GetReflection();
    for (int i = 0; i < d->field_count(); ++i) {
      const gp::FieldDescriptor* f = d->field(i);
      if (Pick(3) == 0) continue;
      const std::string_view limit_name = map_name.empty() ? std::string_view(f->name()) : map_name;
      const int n = f->is_repeated() ? static_cast<int>(Pick(depth > 2 ? 2 : 4)) : 1;
      for (int k = 0; k < n; ++k) {
        const bool rep = f->is_repeated();
        switch (f->cpp_type()) {
          case gp::FieldDescriptor::CPPTYPE_INT32: {
            const auto v = static_cast<int32_t>(Int());
            rep ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_INT64: {
            const int64_t v = Int();
            rep ? r->AddInt64(m, f, v) : r->SetInt64(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_UINT32: {
            const auto v = static_cast<uint32_t>(Int());
            rep ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_UINT64: {
            const auto v = static_cast<uint64_t>(Int());
            rep ? r->AddUInt64(m, f, v) : r->SetUInt64(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_DOUBLE: {
            const double v = Double();
            rep ? r->AddDouble(m, f, v) : r->SetDouble(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_FLOAT: {
            const auto v = static_cast<float>(Double());
            rep ? r->AddFloat(m, f, v) : r->SetFloat(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_BOOL: {
            const bool v = Pick(2) == 0;
            rep ? r->AddBool(m, f, v) : r->SetBool(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_ENUM: {
            const int v = static_cast<int>(Pick(12)) - 2;  // known values and unknown ones
            rep ? r->AddEnumValue(m, f, v) : r->SetEnumValue(m, f, v);
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_STRING: {
            std::string v = String(limit_name);
            rep ? r->AddString(m, f, std::move(v)) : r->SetString(m, f, std::move(v));
            break;
          }
          case gp::FieldDescriptor::CPPTYPE_MESSAGE: {
            if (depth > 4) break;
            gp::Message* sub = rep ? r->AddMessage(m, f) : r->MutableMessage(m, f);
            Fill(sub, depth + 1, f->is_map() ? std::string_view(f->name()) : "");
            break;
          }
        }
      }
    }
  }
};

// The leading field path's first name ("results[2].modes[0].error: ..." -> "results").
std::string FirstName(const std::string& message) {
  size_t end = 0;
  while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) ||
                                  std::isdigit(static_cast<unsigned char>(message[end])) ||
                                  message[end] == '_')) {
    ++end;
  }
  return message.substr(0, end);
}

void ExpectWellFormedAnswer(const Case& c, const gp::Message& m, const absl::Status& st,
                            bool poisoned, const std::string& how) {
  if (st.ok()) {
    EXPECT_FALSE(poisoned) << c.name << " (" << how << ") accepted a NUL or over-long string: "
                           << m.ShortDebugString().substr(0, 300);
    return;
  }
  ASSERT_EQ(st.code(), absl::StatusCode::kInvalidArgument)
      << c.name << " (" << how << "): " << st;
  const std::string first = FirstName(std::string(st.message()));
  ASSERT_NE(m.GetDescriptor()->FindFieldByName(first), nullptr)
      << c.name << " (" << how << "): the error does not start with a field of the request: "
      << st.message().substr(0, 200);
}

TEST(ValidateFuzz, RandomAndBoundaryMessagesGetOkOrAnErrorNamingAField) {
  Rng rng(20261205);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int checked = 0, refused = 0, poisoned_seen = 0;
  for (int round = 0; round < 3000 && std::chrono::steady_clock::now() < deadline; ++round) {
    for (const Case& c : Cases()) {
      auto m = c.make();
      Filler f{rng};
      f.Fill(m.get(), 0);
      const absl::Status st = c.check(*m);
      ExpectWellFormedAnswer(c, *m, st, f.poisoned, "filled");
      if (HasFatalFailure()) return;
      ++checked;
      refused += st.ok() ? 0 : 1;
      poisoned_seen += f.poisoned ? 1 : 0;
    }
  }
  // Both outcomes are reached, so the fuzzer is not only exercising the first refusal.
  EXPECT_GT(checked, 1000);
  EXPECT_GT(poisoned_seen, 100);
  EXPECT_LT(refused, checked);
  std::printf("checked %d messages: %d refused, %d held a NUL or over-long string\n", checked,
              refused, poisoned_seen);
}

TEST(ValidateFuzz, RandomWireBytesParseAndCheckWithoutCrashing) {
  google::protobuf::LogSilencer quiet;  // the parser logs each invalid UTF-8 string it refuses
  Rng rng(7);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int parsed = 0;
  for (int round = 0; round < 8000 && std::chrono::steady_clock::now() < deadline; ++round) {
    for (const Case& c : Cases()) {
      std::string bytes(rng() % 256, '\0');
      for (char& b : bytes) b = static_cast<char>(rng());
      // Half the time, start from a valid encoding and flip a few bytes.
      if (rng() % 2 == 0) {
        auto seed = c.make();
        Filler f{rng};
        f.Fill(seed.get(), 2);
        bytes = seed->SerializePartialAsString();
        for (int k = 0; k < 3 && !bytes.empty(); ++k) bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
      }
      auto m = c.make();
      if (!m->ParsePartialFromString(bytes)) continue;
      ++parsed;
      const absl::Status st = c.check(*m);
      ExpectWellFormedAnswer(c, *m, st, /*poisoned=*/false, "wire");
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(parsed, 100);
}

TEST(ValidateFuzz, HugeAndNulStringsAreRefusedNamingTheirPath) {
  pb::ReportResultsRequest r;
  r.set_worker_id(1);
  r.set_shard_id(2);
  r.set_lease_token("t");
  auto* m = r.add_results();
  m->set_job_id(3);
  m->set_model_id("org/m");
  auto* v = m->add_modes();
  v->set_mode(v1::MODE_EAGER);
  v->set_status(v1::VERDICT_FAIL_ACCURACY);
  v->set_error(std::string(common::kMaxTextBytes + 1, 'e'));
  absl::Status st = Validate(r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message().substr(0, 25), "results[0].modes[0].error") << st;

  v->set_error("fine");
  (*m->mutable_timings_ms())[std::string("to\0tal", 6)] = 1;
  st = Validate(r);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("results[0].timings_ms"), std::string::npos) << st;
  EXPECT_NE(st.message().find("NUL"), std::string::npos) << st;

  pb::CreateSweepRequest cs;
  cs.mutable_profile()->set_name("p");
  cs.mutable_profile()->set_body("{}");
  cs.add_modes("eager");
  cs.mutable_filter()->add_model_ids(std::string(common::kMaxIdBytes + 1, 'm'));
  st = Validate(cs);
  EXPECT_EQ(st.message().substr(0, 19), "filter.model_ids[0]") << st;
  cs.mutable_filter()->clear_model_ids();
  cs.set_shard_target_s(0.01);
  EXPECT_EQ(Validate(cs).message().substr(0, 14), "shard_target_s");
  cs.set_shard_target_s(std::numeric_limits<double>::infinity());
  EXPECT_EQ(Validate(cs).message().substr(0, 14), "shard_target_s");
  cs.set_shard_target_s(5);
  EXPECT_TRUE(Validate(cs).ok());

  v1::GetModelRequest gm;
  gm.set_model_id(std::string("org/\0m", 6));
  EXPECT_EQ(common::CheckStrings(gm).message().substr(0, 8), "model_id");
}

TEST(ClampStrings, CutsWhatCheckStringsRefusesAndKeepsTheRest) {
  v1::ModelResult m;
  m.set_model_id("org/m");
  auto* v = m.add_modes();
  // Two-byte characters where the cut falls (limit - 8, before the marker).
  std::string error(common::kMaxTextBytes - 9, 'e');
  for (int i = 0; i < 6; ++i) error += "\xc3\xa9";
  v->set_error(error);
  v->add_break_reasons(std::string("a\0b", 3));
  m.set_tiny_config_json(std::string(common::kMaxJsonBytes + 10, ' '));
  (*m.mutable_timings_ms())["total"] = 5;
  EXPECT_FALSE(common::CheckStrings(m).ok());
  EXPECT_EQ(common::ClampStrings(&m), 3);
  EXPECT_TRUE(common::CheckStrings(m).ok()) << common::CheckStrings(m);
  EXPECT_EQ(m.model_id(), "org/m");
  EXPECT_LE(m.modes(0).error().size(), common::kMaxTextBytes);
  EXPECT_EQ(m.modes(0).error().substr(m.modes(0).error().size() - 8), "...[cut]");
  // The cut did not split the two-byte character: what is left before the marker is whole.
  const std::string kept = m.modes(0).error().substr(0, m.modes(0).error().size() - 8);
  EXPECT_NE(static_cast<unsigned char>(kept.back()) & 0xC0, 0xC0);
  EXPECT_EQ(m.modes(0).break_reasons(0), "a b");
  EXPECT_EQ(m.tiny_config_json(), "");
  EXPECT_EQ(m.timings_ms().at("total"), 5);
  EXPECT_EQ(common::ClampStrings(&m), 0);
}

}  // namespace
}  // namespace ts::scheduler
