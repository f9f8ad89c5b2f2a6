#!/usr/bin/env bash
# References from elsewhere, end to end with real processes (issue 31; ctest `refs_external`,
# label e2e): `touchstone refs inputs` exports three ViT catalog rows' runs;
# clients/python/make_references.py builds them with tests/refs/vit_model.py (ViT written by
# hand in torch: Debian has no transformers, and nothing stands in for it) and writes bundles;
# `touchstone refs import` loads them; `touchstone sweep` judges every mode against both
# references, and `touchstone refs stats` and `touchstone model` report it. Then a second
# implementation that computes another function (GELU's tanh approximation) is imported: the
# next sweep puts the reference in question for the modes it disagrees in, and the verdicts
# against our reference are unchanged. Along the way: the second sweep takes every CPU
# reference from the bundles the first stored (100% hit rate) and `refs export` writes them.
#   tests/refs/external_test.sh BUILD_DIR [PYTHON]
# PYTHON: the interpreter with torch (ctest passes CMake's TS_PYTHON3, Debian's /usr/bin/python3
# whose python3-torch is 1.13; default python3). Exits 77 (skipped) when it has no torch
# (scripts/setup installs python3-torch).
set -euo pipefail
BUILD=$(cd "${1:?usage: external_test.sh BUILD_DIR}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${2:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: $PY has no torch (scripts/setup installs python3-torch)"
  exit 77
fi
TS="$BUILD/bin/touchstone"
T=$(mktemp -d /tmp/ts-refs-external-XXXXXX)
SERVE_PID=
cleanup() {
  if [[ -n "$SERVE_PID" ]]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
  if [[ -z "${KEEP_T:-}" ]]; then rm -rf "$T"; else echo "kept $T"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # expect FILE REGEX WHAT
  grep -Eq "$2" "$1" || { echo "--- $1"; cat "$1"; fail "$3"; }
}

DATA="$SRC/../shared/data"
"$TS" catalog generate --count 3000 --out "$T/all.jsonl" --data "$DATA" >/dev/null
grep -m 3 '"arch":"ViTForImageClassification"' "$T/all.jsonl" > "$T/cat.jsonl"
[[ $(wc -l < "$T/cat.jsonl") -eq 3 ]] || fail "the generated catalog has fewer than 3 ViT rows"
python3 - "$SRC/workers/simdevice/profiles/sim-2.0.json" "$T/clean.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); p.pop("defects", None); json.dump(p, open(sys.argv[2], "w"))
PY

# 1. The runs, and references from the hand-written implementation (and a wrong one).
"$TS" refs inputs --catalog "$T/cat.jsonl" --sample 3 --out "$T/runs" > "$T/inputs.txt"
expect "$T/inputs.txt" "wrote 3 run folder" "refs inputs"
for d in "$T"/runs/*; do
  for f in config.json model.safetensors inputs.safetensors labels.safetensors run.json; do
    [[ -s "$d/$f" ]] || fail "$d/$f missing"
  done
done
MAKE=("$PY" "$SRC/clients/python/make_references.py" --runs "$T/runs" --device cpu
      --model-module "$SRC/tests/refs/vit_model.py")
"${MAKE[@]}" --out "$T/bundles" --summary "$T/made.json" > "$T/made.txt"
expect "$T/made.txt" "^3 of 3 runs made bundles \(cpu, float32" "make_references.py"
TANH_GELU=1 "${MAKE[@]}" --out "$T/bundles-tanh" > "$T/made-tanh.txt"
expect "$T/made-tanh.txt" "^3 of 3 runs made bundles" "make_references.py (tanh)"

# A run whose weights do not load strictly makes no bundle (and says why).
cp -r "$T/runs" "$T/runs-bad"
bad=$(ls "$T/runs-bad" | head -1)
python3 - "$T/runs-bad/$bad/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_hidden_layers"] += 1; json.dump(c, open(sys.argv[1], "w"))
PY
if "$PY" "$SRC/clients/python/make_references.py" --runs "$T/runs-bad" --device cpu \
    --model-module "$SRC/tests/refs/vit_model.py" --out "$T/bundles-bad" > "$T/bad.txt" 2>&1; then
  fail "a run whose weights do not load strictly made a bundle"
fi
expect "$T/bad.txt" "^2 of 3 runs made bundles" "strict loading"
expect "$T/bad.txt" "Missing key" "strict loading names the keys"

# 2. Import, then a sweep judged against both references.
S="$T/state"
"$TS" refs import "$T/bundles" --state-dir "$S" > "$T/import.txt"
expect "$T/import.txt" "imported 3 bundle\(s\)" "refs import"
echo "not a bundle" > "$T/bundles-tanh/junk.safetensors"
if "$TS" refs import "$T/bundles-tanh" --state-dir "$T/other" > "$T/junk.txt" 2>&1; then
  fail "refs import took a file that is not a bundle"
fi
expect "$T/junk.txt" "junk.safetensors: bundle: " "refs import names the file it refused"
rm "$T/bundles-tanh/junk.safetensors"

SWEEP=("$TS" sweep --state-dir "$S" --catalog "$T/cat.jsonl" --sample 3 --workers 1
       --profile "$T/clean.json" --no-audit-ops --fast-unsafe)
"${SWEEP[@]}" > "$T/sweep1.txt" 2>&1 || { cat "$T/sweep1.txt"; fail "sweep 1"; }
"$TS" refs stats --state-dir "$S" > "$T/stats1.txt"
expect "$T/stats1.txt" "^6 bundles, " "3 CPU bundles computed and 3 imported"
expect "$T/stats1.txt" "last sweep 1: 0 of 3 models from stored bundles .* 3 computed" "sweep 1 computed"
expect "$T/stats1.txt" "^9 modes judged against references from elsewhere too; 0 with the reference in question" \
  "an implementation of the same function agrees in every mode"

# 3. The wrong implementation too: the reference in question, the verdicts unchanged.
"$TS" refs import "$T/bundles-tanh" --state-dir "$S" > /dev/null
"${SWEEP[@]}" > "$T/sweep2.txt" 2>&1 || { cat "$T/sweep2.txt"; fail "sweep 2"; }
"$TS" refs stats --state-dir "$S" > "$T/stats2.txt"
expect "$T/stats2.txt" "last sweep 2: 3 of 3 models from stored bundles \(100.0% hit rate\)" \
  "sweep 2 takes every CPU reference from the bundles sweep 1 stored"
expect "$T/stats2.txt" "^9 modes judged against references from elsewhere too; [6-9] with the reference in question" \
  "GELU's tanh approximation is found to disagree (eager and compile at least)"
"$TS" refs export --sweep 1 "$T/exported" --state-dir "$S" > "$T/export.txt"
expect "$T/export.txt" "exported 3 bundle\(s\) of sweep 1" "refs export"
[[ $(ls "$T/exported" | wc -l) -eq 3 ]] || fail "refs export wrote $(ls "$T/exported" | wc -l) files"

# 4. The record through the Query API: both references in each mode.
"$TS" serve --state-dir "$S" > "$T/serve.txt" 2>&1 &
SERVE_PID=$!
for _ in $(seq 1 600); do grep -q '^serving: ' "$T/serve.txt" && break; sleep 0.1; done
line=$(grep '^serving: ' "$T/serve.txt") || { cat "$T/serve.txt"; fail "touchstone serve"; }
grpc=$(sed -E 's/.*grpc=([^ ]+).*/\1/' <<<"$line")
tokens=$(sed -E 's/.*tokens=([^ ]+).*/\1/' <<<"$line")
model=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["id"])' "$T/cat.jsonl")
"$TS" model "$model" --scheduler "$grpc" --token-file "$tokens" --format json > "$T/model.json"
python3 - "$T/model.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))
newest = h["sweeps"][0]["result"]
assert newest["references"]["source"] == "stored", newest["references"]
for v in newest["modes"]:
    labels = sorted(c["label"] for c in v["references"])
    assert labels == ["external", "external_2"], (v["mode"], labels)
    by = {c["implementation"]: c for c in v["references"]}
    assert by["python vit_model.py"]["agrees"], (v["mode"], by)
    assert not by["python vit_model.py (tanh GELU)"].get("agrees") or v["mode"] == "MODE_TRAIN", by
    if v["mode"] != "MODE_TRAIN":
        assert v.get("referenceInQuestion"), v["mode"]
    assert v["status"] == "VERDICT_PASS", v
print("record: both references in every mode")
PY
echo "PASS"
