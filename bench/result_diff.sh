#!/usr/bin/env bash
# Shows that a change left every stored result as it was: the same sample, swept by two builds
# on each profile, stores the same verdicts, errors, accuracy numbers, graph breaks, loss
# curves, op counts and tiny configs (timings excepted, which differ run to run).
#
#   bench/result_diff.sh BEFORE_BIN AFTER_BIN [SAMPLE] [PROFILE...]
#     BEFORE_BIN, AFTER_BIN   folders holding each build's touchstone, touchstone-scheduler,
#                             touchstone-worker and touchstone-runner (build/bin)
#     SAMPLE                  models in the stratified sample (default 1000)
#     PROFILE                 device profiles (default sim-2.0 and sim-2.1 from the tree)
#
# Each sweep writes into its own database of one throwaway PostgreSQL cluster (`sweep --db`),
# so both builds see an empty catalog and the same sample and seeds. Prints one line per
# profile, "identical: N result rows, M model runs" or the first differing rows, and exits 1 if
# any differ. The dumps stay in $TS_DIFF_DIR (default a temporary folder) for a closer look.
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1"); after=$(realpath "$2"); sample=${3:-1000}
shift $(( $# < 3 ? $# : 3 ))
profiles=("$@")
if ((${#profiles[@]} == 0)); then
  profiles=(workers/simdevice/profiles/sim-2.0.json workers/simdevice/profiles/sim-2.1.json)
fi

work=${TS_DIFF_DIR:-$(mktemp -d /tmp/ts_result_diff.XXXXXX)}
mkdir -p "$work"
source bench/throwaway_pg.sh  # $port, psql

# Every primary result and model run of the database's only sweep, timings left out.
dump() {
  local db=$1
  psql -d "$db" -c "SELECT model_id, mode, run, status, error, error_signature, rmse_device,
      rmse_reference, rmse_ratio, max_abs_err, cosine, graph_breaks, break_reasons,
      device_segments, loss_reference, loss_device, max_loss_gap_ratio
    FROM results ORDER BY model_id, mode, run" > "$work/$db.results.tsv"
  psql -d "$db" -c "SELECT model_id, run, distinct_ops, native_ops, opcov_ratio, ops, op_calls,
      op_native, tiny_config FROM model_runs ORDER BY model_id, run" > "$work/$db.runs.tsv"
}

status=0
for profile in "${profiles[@]}"; do
  name=$(basename "$profile" .json | tr -c 'a-z0-9\n' '_')
  for side in before after; do
    bin=$before; [[ $side == after ]] && bin=$after
    db="${side}_${name}"
    psql -d postgres -c "CREATE DATABASE $db" >/dev/null
    "$bin/touchstone" sweep --db "postgresql://touchstone@127.0.0.1:$port/$db" \
      --sample "$sample" --profile "$profile" --workers 2 > "$work/$db.out" 2>&1
    dump "$db"
  done
  for kind in results runs; do
    if ! diff -q "$work/before_$name.$kind.tsv" "$work/after_$name.$kind.tsv" >/dev/null; then
      echo "$profile: $kind differ:"
      diff "$work/before_$name.$kind.tsv" "$work/after_$name.$kind.tsv" | head -20
      status=1
    fi
  done
  if ((status == 0)); then
    echo "$profile: identical: $(($(wc -l < "$work/before_$name.results.tsv") - 1)) result rows," \
         "$(($(wc -l < "$work/before_$name.runs.tsv") - 1)) model runs (dumps in $work)"
  fi
done
exit $status
