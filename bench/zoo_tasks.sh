#!/usr/bin/env bash
# The zoo's tasks on the catalog (issue 33): the 1,000-model stratified sample swept on the
# defect-free device (sim-2.0 without its defects: every verdict must pass), on sim-2.0 and on
# sim-2.1, one embedded sweep each; prints the per-task table (models; Eager / Compile / Train %
# per profile) as Markdown for README.md, and the defect-free statuses.
#
#   bench/zoo_tasks.sh [--sample N] [--workers W] [--build DIR]
#
# Needs touchstone built (cmake --build build --target touchstone touchstone-scheduler
# touchstone-worker touchstone-runner). Seconds per sweep on 2 cores: ~30 at 1,000 models.
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLE=1000
BUILD=build
WORKERS=$(nproc)
while (($#)); do
  case "$1" in
    --sample) SAMPLE=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
TS="$BUILD/bin/touchstone"
DIR=$(mktemp -d /tmp/ts-zoo-tasks-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
"$TS" catalog generate --out "$DIR/catalog.jsonl" >"$DIR/catalog.txt" 2>&1
python3 -c "import json,sys; p=json.load(open(sys.argv[1])); p.pop('defects', None); p['name']='sim-2.0-clean'; json.dump(p, open(sys.argv[2], 'w'))" \
  workers/simdevice/profiles/sim-2.0.json "$DIR/clean.json"
for p in clean sim-2.0 sim-2.1; do
  prof=workers/simdevice/profiles/$p.json
  [[ $p == clean ]] && prof=$DIR/clean.json
  "$TS" sweep --catalog "$DIR/catalog.jsonl" --sample "$SAMPLE" --workers "$WORKERS" \
    --profile "$prof" --state-dir "$DIR/state-$p" --json "$DIR/$p.json" >"$DIR/$p.txt" 2>&1
done
python3 - "$DIR" "$(cat "$DIR/catalog.txt")" <<'PY'
import json, sys
d, catalog = sys.argv[1], sys.argv[2]
runs = {p: json.load(open(f"{d}/{p}.json")) for p in ("clean", "sim-2.0", "sim-2.1")}
print(f"catalog: {catalog.strip()}")
print()
print("| task | models | defect-free: Eager / Compile / Train % | sim-2.0 | sim-2.1 |")
print("|---|---:|---|---|---|")
f = lambda r: f"{r['eager_pct']:.1f} / {r['compile_pct']:.1f} / {r['train_pct']:.1f}"
by = {p: {r["task"]: r for r in j["tasks"]} for p, j in runs.items()}
for t in sorted(by["clean"]):
    print(f"| {t} | {by['clean'][t]['models']} | " + " | ".join(f(by[p][t]) if t in by[p] else "–" for p in runs) + " |")
for key in ("total", "class_weighted"):
    name = runs["clean"][key]["task"]
    print(f"| {name} | {runs['clean'][key]['models']} | " + " | ".join(f(runs[p][key]) for p in runs) + " |")
print()
for p, j in runs.items():
    print(f"{p}: statuses {json.dumps(j['statuses'], sort_keys=True)}, {j['models_recorded']} models, "
          f"{len(j['tasks'])} tasks, sweep {j['sweep_s']:.1f} s")
PY
