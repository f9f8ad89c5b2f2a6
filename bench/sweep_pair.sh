#!/usr/bin/env bash
# Compares two builds' per-model cost on a noisy machine: both sweep AT THE SAME TIME (one worker
# each by default), so whatever the host does to the CPU it does to both.
#
#   bench/sweep_pair.sh BEFORE_BIN AFTER_BIN [SAMPLE] [PROFILE] [WORKERS]
#     BEFORE_BIN, AFTER_BIN   folders holding each build's touchstone, touchstone-scheduler,
#                             touchstone-worker and touchstone-runner (build/bin)
#     SAMPLE                  models in the stratified sample (default 1000)
#     PROFILE                 the device profile (default sim-2.0 from the tree)
#     WORKERS                 worker processes per build (default 1)
#
#   TS_PAIR_CATALOG=FILE   both builds sweep this catalog, so the same models: each model's time
#                          is compared with its own time under the other build (the code's cost).
#                          Unset, each build its own default catalog (the zoo's cost, the sample's
#                          make-up included): then the walls and each sample's summed time compare.
#   TS_PAIR_CATALOG_BEFORE, TS_PAIR_CATALOG_AFTER=FILE   a catalog for one side (over
#                          TS_PAIR_CATALOG): one build on two catalogs measures a zoo's cost
#                          without the engine's changes (BEFORE_BIN = AFTER_BIN)
#   TS_PAIR_WARM=1         then a second sweep on each side (reference bundles stored: warm)
#   TS_PAIR_DIR=DIR        where the cluster, states and dumps go (default a temporary folder)
#
# Back-to-back wall times of one build on this 2-core VM moved by 1.7x from one run to the next
# (bench/RESULTS.md, "The 15% engine regression that was not"); a paired run's did not. Each
# sweep writes into its own database of one throwaway PostgreSQL cluster (`sweep --db`).
#
# Prints per pass: both walls and their ratio; each sample's summed primary-run time
# (model_runs.total_ms, run 1) per model; over the models both samples hold with the same class
# and tiny config, the per-model ratio's median and p10/p90, the same per family (>= 5 models,
# sorted), and the summed per-stage timings (model_runs.timing_names / timing_ms).
set -euo pipefail
cd "$(dirname "$0")/.."
before=$(realpath "$1"); after=$(realpath "$2"); sample=${3:-1000}
profile=${4:-workers/simdevice/profiles/sim-2.0.json}; workers=${5:-1}

work=${TS_PAIR_DIR:-$(mktemp -d /tmp/ts_sweep_pair.XXXXXX)}
mkdir -p "$work"
source bench/throwaway_pg.sh  # $port, psql

catalog_of() {  # side: that side's catalog file, or nothing (the build's own default)
  local var="TS_PAIR_CATALOG_${1^^}"
  local file=${!var:-${TS_PAIR_CATALOG:-}}
  if [[ -n $file ]]; then realpath "$file"; fi
}

sweep() {  # side bin pass
  local side=$1 bin=$2 pass=$3 t0
  ((pass > 1)) || psql -d postgres -c "CREATE DATABASE $side" >/dev/null
  t0=$(date +%s.%N)
  local file catalog=()
  file=$(catalog_of "$side")
  if [[ -n $file ]]; then catalog=(--catalog "$file"); fi
  "$bin/touchstone" sweep --db "postgresql://touchstone@127.0.0.1:$port/$side" "${catalog[@]}" \
    --sample "$sample" --profile "$profile" --workers "$workers" --state-dir "$work/state_$side" \
    > "$work/$side.$pass.out" 2>&1
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" \
    "$(date +%s.%N)" > "$work/$side.$pass.wall"
}

compare() {  # pass
  python3 - "$work" "$1" <<'PY'
import csv, statistics, sys
work, pass_ = sys.argv[1], sys.argv[2]

def load(side):
    rows = {}
    with open(f"{work}/{side}.{pass_}.runs.tsv") as f:
        r = csv.reader(f, delimiter="\t")
        next(r)
        for mid, arch, fam, h, ms, names, vals in r:
            stages = dict(zip(names.split(","), map(float, vals.split(",")))) if names else {}
            rows[mid] = (arch, fam, h, float(ms), stages)
    return rows

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

b, a = load("before"), load("after")
wall = {s: float(open(f"{work}/{s}.{pass_}.wall").read()) for s in ("before", "after")}
print(f"wall: before {wall['before']:.1f} s, after {wall['after']:.1f} s, after/before "
      f"{wall['after'] / wall['before']:.3f} (at the same time)")
tb = sum(v[3] for v in b.values())
ta = sum(v[3] for v in a.values())
print(f"each sample's own total_ms: before {tb / len(b):.1f} ms a model over {len(b)}, after "
      f"{ta / len(a):.1f} over {len(a)}; after/before {(ta / len(a)) / (tb / len(b)):.3f}")
common = [m for m in b if m in a and b[m][:3] == a[m][:3] and b[m][3] > 0]
print(f"models in both samples with the same class and tiny config: {len(common)}")
if len(common) < 20:
    sys.exit(0)
sb = sum(b[m][3] for m in common)
sa = sum(a[m][3] for m in common)
ratios = [a[m][3] / b[m][3] for m in common]
print(f"  summed: before {sb / 1000:.1f} s, after {sa / 1000:.1f} s, after/before {sa / sb:.3f}")
print(f"  per-model after/before: median {statistics.median(ratios):.3f}, "
      f"p10 {q(ratios, .1):.3f}, p90 {q(ratios, .9):.3f}")
fams = {}
for m in common:
    fams.setdefault(b[m][1], []).append(m)
print("  per family (>= 5 models): median ratio, summed ratio, models")
out = []
for fam, ms in fams.items():
    if len(ms) >= 5:
        out.append((statistics.median(a[m][3] / b[m][3] for m in ms),
                    sum(a[m][3] for m in ms) / sum(b[m][3] for m in ms), len(ms), fam))
for med, tot, n, fam in sorted(out):
    print(f"    {fam:32s} {med:6.3f} {tot:6.3f} {n:5d}")
print("  stages summed over those models (s): before, after, after/before")
for k in sorted({k for m in common for side in (a, b) for k in side[m][4]}):
    x = sum(b[m][4].get(k, 0) for m in common) / 1000
    y = sum(a[m][4].get(k, 0) for m in common) / 1000
    print(f"    {k:24s} {x:8.1f} {y:8.1f} {y / x if x else float('nan'):7.3f}")
PY
}

passes=1
[[ ${TS_PAIR_WARM:-0} == 1 ]] && passes=2
for ((pass = 1; pass <= passes; pass++)); do
  sweep before "$before" $pass & pb=$!
  sweep after "$after" $pass & pa=$!
  wait $pb
  wait $pa
  for side in before after; do
    psql -d "$side" -c "SELECT model_id, arch, family, config_hash, total_ms,
        array_to_string(timing_names, ','), array_to_string(timing_ms, ',')
      FROM model_runs WHERE run = 1 AND sweep_id = (SELECT max(sweep_id) FROM model_runs)
      ORDER BY model_id" > "$work/$side.$pass.runs.tsv"
  done
  if ((pass == 1)); then echo "== pass 1 (cold)"; else echo "== pass $pass (warm: again)"; fi
  compare $pass
done
