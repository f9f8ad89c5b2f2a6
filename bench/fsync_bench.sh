#!/usr/bin/env bash
# The embedded default's durability cost (issue 14): the 5,000-model uniform sweep (the
# catalog's own class mix, seed 1) with fsync on (the default) and with --fast-unsafe (fsync
# and full_page_writes off), in the order off, on, on, off to cancel drift. Each run gets a
# fresh state folder (its own embedded PostgreSQL).
#
#   bench/fsync_bench.sh [--count N] [--build DIR]
#
# Prints Markdown for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=5000
BUILD=build
while (($#)); do
  case "$1" in
    --count) COUNT=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: bench/fsync_bench.sh [--count N] [--build DIR]" >&2; exit 2 ;;
  esac
done
TS="$BUILD/bin/touchstone"
DIR=$(mktemp -d /tmp/ts-fsync-bench-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$TS" catalog generate --seed 1 --count "$COUNT" --out "$DIR/catalog.jsonl" >/dev/null

run() {  # $1: label, $2...: extra flags; prints "label seconds recorded"
  local label=$1; shift
  local state="$DIR/state-$label-$RANDOM"
  local t0 t1
  t0=$(date +%s.%N)
  "$TS" sweep --catalog "$DIR/catalog.jsonl" --sample all --state-dir "$state" \
    --json "$DIR/$label.json" "$@" >"$DIR/$label.out" 2>&1
  t1=$(date +%s.%N)
  local recorded
  recorded=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("models_recorded", d.get("progress", {}).get("models_recorded", "?")))' "$DIR/$label.json" 2>/dev/null || echo "?")
  rm -rf "$state"
  awk -v l="$label" -v a="$t0" -v b="$t1" -v r="$recorded" 'BEGIN { printf "%s %.1f %s\n", l, b - a, r }'
}

results=()
results+=("$(run off --fast-unsafe)")
results+=("$(run on)")
results+=("$(run on)")
results+=("$(run off --fast-unsafe)")

echo "| run | fsync | wall s | models/s | recorded |"
echo "|---|---|---:|---:|---:|"
i=0
for r in "${results[@]}"; do
  i=$((i + 1))
  read -r label secs recorded <<<"$r"
  awk -v i="$i" -v l="$label" -v s="$secs" -v n="$COUNT" -v r="$recorded" \
    'BEGIN { printf "| %d | %s | %.1f | %.2f | %s |\n", i, (l == "on" ? "on (default)" : "off (--fast-unsafe)"), s, n / s, r }'
done
awk -v a="${results[0]}" -v b="${results[1]}" -v c="${results[2]}" -v d="${results[3]}" 'BEGIN {
  split(a, x, " "); split(b, y, " "); split(c, z, " "); split(d, w, " ");
  off = (x[2] + w[2]) / 2; on = (y[2] + z[2]) / 2;
  printf "\nmean: fsync off %.1f s, on %.1f s: fsync costs %+.1f%%\n", off, on, 100 * (on - off) / off }'
