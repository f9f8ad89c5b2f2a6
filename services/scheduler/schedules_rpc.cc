// The schedule RPCs (admin): validated on gRPC's callback threads, answered on the database pool.
#include "services/scheduler/scheduler_impl.h"

namespace ts::scheduler {

grpc::ServerUnaryReactor* Scheduler::Impl::AddSchedule(grpc::CallbackServerContext* ctx,
                                                       const pb::AddScheduleRequest* req,
                                                       pb::Schedule* resp) {
  return Handle("AddSchedule", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
    return Assign(s.AddSchedule(r, WallNow()), out);
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::ListSchedules(grpc::CallbackServerContext* ctx,
                                                         const pb::ListSchedulesRequest* req,
                                                         pb::ListSchedulesResponse* resp) {
  return Handle(query_pool.get(), "ListSchedules", ctx, req, resp,
                [](store::Store& s, const auto&, auto* out) {
                  auto list = s.ListSchedules(5);
                  if (!list.ok()) return list.status();
                  for (auto& sc : *list) *out->add_schedules() = std::move(sc);
                  return absl::OkStatus();
                });
}

grpc::ServerUnaryReactor* Scheduler::Impl::RemoveSchedule(grpc::CallbackServerContext* ctx,
                                                          const pb::RemoveScheduleRequest* req,
                                                          pb::RemoveScheduleResponse* resp) {
  return Handle("RemoveSchedule", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
    absl::Status st = s.RemoveSchedule(r.name());
    out->set_removed(st.ok());
    return st;
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::SetScheduleEnabled(
    grpc::CallbackServerContext* ctx, const pb::SetScheduleEnabledRequest* req,
    pb::Schedule* resp) {
  return Handle("SetScheduleEnabled", ctx, req, resp,
                [this](store::Store& s, const auto& r, auto* out) {
                  return Assign(s.SetScheduleEnabled(r.name(), r.enabled(), WallNow()), out);
                });
}

}  // namespace ts::scheduler
