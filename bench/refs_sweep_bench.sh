#!/usr/bin/env bash
# Reference bundles (issue 31): the same sweep cold (an empty STATE/refs: every model computes
# its references and stores them) then warm (every bundle stored), side by side in one run on
# one state folder; the hit rates and the store's size (`touchstone refs stats`); the per-task
# tables compared (they must be equal); then, in one process on a sample of the same catalog,
# where the time goes cold and warm (bench/refs_bench: the reference work's share, bundle sizes
# per class and extrapolated to the whole catalog, verdicts compared model by model).
#
#   bench/refs_sweep_bench.sh [--sample N] [--profile FILE] [--workers W] [--build DIR]
#                             [--share-sample N]
#
# Defaults: the 5,000-model sweep, sim-2.0, one worker per core, 500 models for the share.
# Target: warm <= 0.6 x cold. Prints Markdown for bench/RESULTS.md. Needs ~5 GiB under /tmp
# for the bundles of 5,000 models. Run on a quiet machine: wall times. Needs touchstone and
# bench/refs_bench built (cmake --build build --target touchstone refs_bench).
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLE=5000
PROFILE=workers/simdevice/profiles/sim-2.0.json
BUILD=build
WORKERS=$(nproc)
SHARE=500
while (($#)); do
  case "$1" in
    --sample) SAMPLE=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --share-sample) SHARE=$2; shift 2 ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
TS="$BUILD/bin/touchstone"
# Benchmarks are out of the default build (bench/README.md).
[[ -x "$BUILD/bench/refs_bench" ]] || { echo "build it first: cmake --build $BUILD --target refs_bench" >&2; exit 2; }
DIR=$(mktemp -d /tmp/ts-refs-bench-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$TS" catalog generate --out "$DIR/catalog.jsonl" >/dev/null
field() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }

for pass in cold warm; do
  "$TS" sweep --catalog "$DIR/catalog.jsonl" --sample "$SAMPLE" --workers "$WORKERS" \
    --profile "$PROFILE" --state-dir "$DIR/state" --json "$DIR/$pass.json" \
    >"$DIR/$pass.txt" 2>"$DIR/$pass.err"
  "$TS" refs stats --state-dir "$DIR/state" >"$DIR/$pass-stats.txt"
done
cold=$(field "$DIR/cold.json" sweep_s)
warm=$(field "$DIR/warm.json" sweep_s)
same=$(python3 - "$DIR/cold.json" "$DIR/warm.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keep = lambda j: {k: v for k, v in j.items() if k not in ("sweep_id", "sweep_s", "total_s", "restarts")}
print("equal" if keep(a) == keep(b) else "DIFFERENT")
PY
)
echo "### Reference bundles: the $SAMPLE-model sweep cold and warm ($(basename "$PROFILE"), $WORKERS workers)"
echo
echo "| pass | sweep s | models/s | vs cold | references |"
echo "|---|---:|---:|---:|---|"
for pass in cold warm; do
  s=$(field "$DIR/$pass.json" sweep_s)
  hit=$(grep -o '[0-9]* of [0-9]* models from stored bundles ([0-9.]*% hit rate)' "$DIR/$pass-stats.txt")
  printf '| %s | %.1f | %.2f | %.2f | %s |\n' "$pass" "$s" \
    "$(python3 -c "print($SAMPLE / $s)")" "$(python3 -c "print($s / $cold)")" "$hit"
done
echo
echo "per-task tables cold vs warm: $same; store after the warm pass: $(head -1 "$DIR/warm-stats.txt")"
echo "warm / cold = $(python3 -c "print(round($warm / $cold, 3))") (target <= 0.6)"
echo
"$BUILD/bench/refs_bench" --catalog "$DIR/catalog.jsonl" --profile "$PROFILE" --sample "$SHARE" \
  --store "$DIR/share-store" --audit-ops  # as the sweep: it replays passing modes too
