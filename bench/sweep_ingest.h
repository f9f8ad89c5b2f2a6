// Drives one sweep through the real store path with generated records (bench/query_records.h):
// `connections` threads, each with its own Store (connection) and registered worker, lease a
// shard (Store::LeaseShard), report every job's record in one ReportResults with finish=true,
// and repeat until the queue is empty; confirmation reruns that the reports queue (new failures
// against the baseline) are leased and reported the same way. Then the scheduler's ticker
// steps (ExpireLeases, SummarizeDoneSweeps) leave the sweep as a real one ends: done, its
// final counts kept.
//
// Thread-safety: IngestSweep may run while other threads read the same database.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/query_records.h"
#include "touchstone/v1/scheduler.pb.h"

namespace ts::bench {

struct IngestOptions {
  std::string db_url;
  int connections = 3;  // store connections reporting in parallel
  // The sweep number the records are generated for (0: the sweep's own id). The query bench
  // gives both of its ingest sweeps the same one, so that they store the same records.
  int64_t records_as_sweep = 0;
};

struct IngestStats {
  int64_t sweep_id = 0;
  int64_t models = 0;        // primary results stored
  int64_t reruns = 0;        // confirmation results stored
  int64_t reports = 0;       // ReportResults calls
  double seconds = 0;        // first lease to the sweep done and summarized
  double report_p50_ms = 0;  // ReportResults latency
  double report_p99_ms = 0;
  int64_t deterministic = 0;  // confirmed regressions when the sweep ended
  int64_t flaky = 0;
};

// Upserts the catalog (UpsertModels, 5000 rows a call). Returns rows inserted + updated.
absl::StatusOr<int64_t> UpsertCatalog(const std::string& db_url,
                                      const std::vector<CatalogEntry>& catalog);

// Creates the sweep `req` and ingests it. FAILED_PRECONDITION when the sweep does not end done
// with every model recorded once (models_recorded != models_expected or duplicates); any store
// error is returned as is.
absl::StatusOr<IngestStats> IngestSweep(const IngestOptions& opts,
                                        const pb::CreateSweepRequest& req,
                                        const RecordGenerator& gen);

// Finishes a sweep that an interrupted fill left running: waits out its leases, then ingests
// what is left as IngestSweep does.
absl::StatusOr<IngestStats> ResumeSweep(const IngestOptions& opts, int64_t sweep_id,
                                        const RecordGenerator& gen);

}  // namespace ts::bench
