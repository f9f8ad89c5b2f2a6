// The catalog side of a sweep, between workers/catalog (rows, samples, the table) and the
// scheduler's API (services/cluster SweepDriver): which catalog file, which of its rows, and how
// a stored result counts in the per-task table. `touchstone sweep` uses it, as will `touchstone
// submit`; `run-catalog` takes its sample here too, so that they print the same table.
//
// Thread-safety: functions over their arguments; the driver is used from the caller's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/cluster/sweep_driver.h"
#include "touchstone/v1/scheduler.pb.h"
#include "workers/catalog/catalog.h"

namespace ts::cli {

// The reference data (HF configs, task tables): $TS_DATA_DIR, else the first `shared/data` beside
// a folder above the binary (the repo's ../shared/data), else "../shared/data".
std::string DefaultDataDir();

// `catalog` when given; else the 104,909-model catalog, generated once (with a notice on stderr)
// from the reference data under data_dir into <state_dir>/catalog-seed0.jsonl. Errors: the
// generator's, as INTERNAL "catalog: ...".
absl::StatusOr<std::string> SweepCatalogPath(const std::string& catalog,
                                             const std::string& state_dir,
                                             const std::string& data_dir);

struct CatalogSample {
  std::set<int64_t> lines;  // 1-based line numbers of the sampled rows
  int64_t rows = 0;         // rows whose keys parse: the population sampled from
};

// The stratified sample of the catalog at `path` (catalog::StratifiedSample over the row keys;
// sample 0: every row whose keys parse): what run-catalog runs and the sweep sends.
// `on_bad_line(line_no, why)`, when given, hears of each line whose keys do not parse (skipped).
// NOT_FOUND "cannot read PATH" when the file cannot be opened.
absl::StatusOr<CatalogSample> SampleCatalog(
    const std::string& path, int64_t sample, uint64_t seed,
    const std::function<void(int64_t, const std::string&)>& on_bad_line = nullptr);

// Calls `each` with the full row (config included) on each of `lines`, in file order; rows that
// do not parse are skipped. Returns the first error of `each`.
absl::Status ForEachRow(const std::string& path, const std::set<int64_t>& lines,
                        const std::function<absl::Status(catalog::Row)>& each);

// Sends the rows on `lines` to the scheduler's catalog and names them in `create`'s filter.
// Returns the scheduler's error.
absl::Status UploadRows(const std::string& path, const std::set<int64_t>& lines,
                        cluster::SweepDriver* driver, touchstone::v1::CreateSweepRequest* create);

}  // namespace ts::cli
