// The one place that writes an alert of a line (internal to services/store): accuracy detection
// (detection.cc) and performance detection (perf_detection.cc) both open, reopen or update an
// alert keyed by (line, mode, cause_kind, cause), add its models and rate its severity here.
#pragma once

#include <cstdint>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <vector>

#include "touchstone/v1/query.pb.h"

namespace ts::store {

// A model of an alert: its class and task, what a human reads of its regression, and the modes
// it regressed in for the alert's cause (none for an alert of no mode).
struct AlertMember {
  std::string model_id, arch, task, detail;
  std::set<std::string> modes;
};

// One alert's key and how it is written.
struct AlertWrite {
  std::string line;        // the sweep line (alerts.line)
  int64_t head = 0;        // the sweep being detected
  std::string kind;        // alerts.kind: "accuracy" or "performance"
  std::string mode;        // the key's mode; "" for an alert across modes
  std::string cause_kind;  // alerts.cause_kind
  std::string cause;       // alerts.cause
  std::string cause_text;  // what a human reads of the cause
  // A group test fired on (some of) its models: rates it as a broad regression.
  bool group_fired = false;
  // False: it stays a warning whatever its breadth (drift: the models still pass).
  bool rated = true;
  // True: a model already on the alert takes this sweep as its sweep_id with its new detail (a
  // performance figure is read with the sweep that measured it); false: it keeps the sweep it
  // joined in (an accuracy regression dates from its first failing sweep).
  bool refresh_member_sweep = false;
};

// Opens the alert, reopens it (it was resolved) or updates it (an alert that counted this sweep
// already is left alone), said in `report` (opened / reopened / updated); adds `members` (a
// member already there gets its modes widened and a non-empty detail refreshed) and widens the
// alert's modes to theirs; its severity from its breadth and `group_fired`, never lowered.
void WriteAlert(pqxx::transaction_base& w, const AlertWrite& a,
                const std::vector<AlertMember>& members,
                ::touchstone::v1::DetectRegressionsResponse* report);

}  // namespace ts::store
