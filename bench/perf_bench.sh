#!/usr/bin/env bash
# The device cost model (issue 30): its overhead on a sweep, and the per-task speedup / MFU
# table of a sample.
#
#   bench/perf_bench.sh [--sample N] [--runs R] [--build DIR] [--catalog FILE] [--table-only]
#
# 1. Overhead: `touchstone run-catalog` of the same sample (defect-free sim-2.0, one process,
#    one core), alternately with the simulated clock on and off (TS_SIMDEVICE_CLOCK=off: the
#    kernels neither read their shapes nor charge anything), R times each; the median wall
#    times, their ratio, and a check that the verdicts are identical (the cost model only reads
#    shapes). Wall time: run it on a quiet machine.
# 2. The per-task table on sim-2.0 and sim-2.1 (deterministic: the clock is arithmetic): models,
#    models whose compile passed with a speedup, geomean speedup, median compiled MFU, mean
#    memory compression, from run-catalog --format json (services/query's arithmetic).
#
# Prints Markdown for bench/RESULTS.md. Uses a private folder under /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
SAMPLE=1000
RUNS=3
BUILD=build
CATALOG=
TABLE_ONLY=0
while (($#)); do
  case "$1" in
    --sample) SAMPLE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --catalog) CATALOG=$2; shift 2 ;;
    --table-only) TABLE_ONLY=1; shift ;;
    *) echo "usage: bench/perf_bench.sh [--sample N] [--runs R] [--build DIR] [--catalog FILE] [--table-only]" >&2; exit 2 ;;
  esac
done
TS="$BUILD/bin/touchstone"
P=workers/simdevice/profiles
DIR=$(mktemp -d /tmp/ts-perf-bench-XXXXXX)
trap 'rm -rf "$DIR"' EXIT
if [[ -z "$CATALOG" ]]; then
  CATALOG="$DIR/catalog.jsonl"
  "$TS" catalog generate --seed 0 --out "$CATALOG" >/dev/null
fi
python3 -c "import json,sys;p=json.load(open('$P/sim-2.0.json'));p.pop('defects');json.dump(p,open('$DIR/clean.json','w'))"

now() { date +%s.%N; }
run() {  # run OUT PROFILE [env...]: one run-catalog, its wall seconds on stdout
  local out=$1 profile=$2
  shift 2
  local t0 t1
  t0=$(now)
  env "$@" "$TS" run-catalog --catalog "$CATALOG" --sample "$SAMPLE" --profile "$profile" \
    --format json >"$out" 2>/dev/null
  t1=$(now)
  awk "BEGIN { print $t1 - $t0 }"
}

if ((TABLE_ONLY == 0)); then
  on=() off=()
  for ((r = 1; r <= RUNS; r++)); do
    on+=("$(run "$DIR/on.json" "$DIR/clean.json")")
    off+=("$(run "$DIR/off.json" "$DIR/clean.json" TS_SIMDEVICE_CLOCK=off)")
  done
  python3 - "$DIR/on.json" "$DIR/off.json" "${on[*]}" "${off[*]}" "$SAMPLE" <<'PY'
import json, statistics, sys
on, off = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t_on = [float(x) for x in sys.argv[3].split()]
t_off = [float(x) for x in sys.argv[4].split()]
same = on["statuses"] == off["statuses"] and all(
    (a["task"], a["eager_pct"], a["compile_pct"], a["train_pct"]) ==
    (b["task"], b["eager_pct"], b["compile_pct"], b["train_pct"])
    for a, b in zip(on["tasks"], off["tasks"]))
m_on, m_off = statistics.median(t_on), statistics.median(t_off)
print(f"### Cost model overhead: run-catalog, {sys.argv[5]} models, defect-free sim-2.0\n")
print("| clock | runs (s) | median s |")
print("|---|---|---|")
print(f"| on | {' '.join(f'{t:.1f}' for t in t_on)} | {m_on:.1f} |")
print(f"| off (TS_SIMDEVICE_CLOCK=off) | {' '.join(f'{t:.1f}' for t in t_off)} | {m_off:.1f} |")
print(f"\noverhead: **{100 * (m_on / m_off - 1):+.1f}%** (target <= 3%); verdicts "
      f"{'identical' if same else 'DIFFER'} ({' '.join(f'{k}={v}' for k, v in sorted(on['statuses'].items()))})\n")
PY
fi

table() {  # table JSON TITLE
  python3 - "$1" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
def f(v, fmt):
    return "–" if v is None else fmt.format(v)
print(f"### {sys.argv[2]}\n")
print("| task | models | with speedup | geomean speedup | median MFU | mean compression | Compile % |")
print("|---|---|---|---|---|---|---|")
for r in j["tasks"] + [j["total"], j["class_weighted"]]:
    print(f"| {r['task']} | {r['models']} | {r['perf_models']} | {f(r['geomean_speedup'], '{:.2f}x')} "
          f"| {f(r['median_mfu'], '{:.3g}')} | {f(r['mean_compression'], '{:.2f}')} | {r['compile_pct']:.1f} |")
print()
PY
}
run "$DIR/t20.json" "$P/sim-2.0.json" >/dev/null
run "$DIR/t21.json" "$P/sim-2.1.json" >/dev/null
table "$DIR/t20.json" "sim-2.0, $SAMPLE models"
table "$DIR/t21.json" "sim-2.1, $SAMPLE models"
