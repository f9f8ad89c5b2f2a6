#!/usr/bin/env bash
# End-to-end sweep throughput vs the single-process run-catalog on the same stratified sample,
# and the RSS of workers and runner children (sampled every 0.5 s while the sweep runs).
#
#   bench/sweep_bench.sh [--sample N] [--profile FILE] [--build DIR] [--workers "1 2"]
#
# Prints Markdown for bench/RESULTS.md. Uses a private state folder under /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLE=1000
PROFILE=workers/simdevice/profiles/sim-2.0.json
BUILD=build
WORKERS="1 2"
while (($#)); do
  case "$1" in
    --sample) SAMPLE=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    *) echo "usage: bench/sweep_bench.sh [--sample N] [--profile FILE] [--build DIR] [--workers LIST]" >&2; exit 2 ;;
  esac
done
TS="$BUILD/bin/touchstone"
DIR=$(mktemp -d /tmp/ts-sweep-bench-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$TS" catalog generate --out "$DIR/catalog.jsonl" >/dev/null

now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }
t0=$(now)
"$TS" run-catalog --catalog "$DIR/catalog.jsonl" --sample "$SAMPLE" --profile "$PROFILE" \
  --format json >"$DIR/run-catalog.json" 2>/dev/null
t1=$(now)
rc_s=$(calc "$t1 - $t0")

echo "| run | workers | models | wall s | models/s | vs run-catalog | max RSS worker | max RSS runner |"
echo "|---|---|---|---|---|---|---|---|"
printf '| run-catalog (one process) | 1 | %d | %.1f | %.2f | 1.00 | | |\n' "$SAMPLE" "$rc_s" \
  "$(calc "$SAMPLE / $rc_s")"
for W in $WORKERS; do
  "$TS" sweep --catalog "$DIR/catalog.jsonl" --sample "$SAMPLE" --workers "$W" --profile "$PROFILE" \
    --state-dir "$DIR/state-$W" --json "$DIR/sweep-$W.json" >"$DIR/sweep-$W.txt" 2>"$DIR/sweep-$W.err" &
  pid=$!
  max_w=0; max_r=0
  while kill -0 "$pid" 2>/dev/null; do
    for p in $(pgrep -f touchstone-worker || true); do
      r=$(awk '/VmRSS/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0); ((r > max_w)) && max_w=$r
    done
    for p in $(pgrep -f touchstone-runner || true); do
      r=$(awk '/VmRSS/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0); ((r > max_r)) && max_r=$r
    done
    sleep 0.5
  done
  wait "$pid"
  sweep_s=$(python3 -c "import json; print(json.load(open('$DIR/sweep-$W.json'))['sweep_s'])")
  total_s=$(python3 -c "import json; print(json.load(open('$DIR/sweep-$W.json'))['total_s'])")
  rec=$(python3 -c "import json; j=json.load(open('$DIR/sweep-$W.json')); print(j['models_recorded'], j['duplicates'])")
  same=$(python3 - "$DIR/sweep-$W.json" "$DIR/run-catalog.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("same table" if a["statuses"] == b["statuses"] and all(
    abs(x[k] - y[k]) < 1e-9 for x, y in zip(a["tasks"], b["tasks"]) for k in ("eager_pct", "compile_pct", "opcov_pct"))
    else "TABLES DIFFER")
PY
)
  printf '| sweep (scheduler + PostgreSQL), sweep time | %d | %s | %.1f | %.2f | %.3f | %d MiB | %d MiB |\n' \
    "$W" "${rec% *}" "$sweep_s" "$(calc "$SAMPLE / $sweep_s")" "$(calc "$sweep_s / $rc_s")" \
    $((max_w / 1024)) $((max_r / 1024))
  printf '| sweep, end to end (PostgreSQL start, catalog load) | %d | %s | %.1f | %.2f | %.3f | | |\n' \
    "$W" "${rec% *}" "$total_s" "$(calc "$SAMPLE / $total_s")" "$(calc "$total_s / $rc_s")"
  echo "<!-- workers=$W: duplicates ${rec#* }, $same -->"
done
