#!/usr/bin/env python3
"""How many distinct computations a catalog's rows are at the tiny scale.

    bench/catalog_twins.py CATALOG.jsonl [BUNDLE_KIB]

Each row of `touchstone catalog generate` carries the tiny config the zoo builds. Rows with the
same class, task and tiny config run the same model shape; what still sets them apart is the
engine's per-row fine-tune perturbation of the weights (engine.cc, ModelWeights: seeded by the
model id), so their references differ. Prints the rows, the distinct (class, task, tiny config)
triples, the largest groups, and, given a mean bundle size in KiB (bench/RESULTS.md, refs_bench),
what a store keyed by the computation alone would hold: the size a catalog's bundles would take
without per-row weights.
"""
import collections
import json
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    groups = collections.Counter()
    rows = 0
    with open(sys.argv[1]) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                key = (r["arch"], r["task"], json.dumps(r["tiny_config"], sort_keys=True))
            except (ValueError, KeyError) as e:
                sys.exit(f"{sys.argv[1]}:{n}: not a catalog row ({e})")
            groups[key] += 1
            rows += 1
    print(f"rows: {rows}; distinct (class, task, tiny config): {len(groups)} "
          f"({rows / max(1, len(groups)):.1f} rows each)")
    for (arch, task, _), c in groups.most_common(5):
        print(f"  {c:6d} rows  {arch} ({task})")
    if len(sys.argv) == 3:
        kib = float(sys.argv[2])
        print(f"at {kib:.1f} KiB a bundle: per row {rows * kib / 2**20:.2f} GiB, "
              f"per distinct computation {len(groups) * kib / 2**20:.2f} GiB")


if __name__ == "__main__":
    main()
