#!/usr/bin/env python3
"""A stand-in for `touchstone catalog generate` where the CLI (torch) is not built: 104,909
catalog rows (id, task, arch, family, config) over the (pipeline tag, class) pairs of
../shared/data/transformers_task_classes_*.csv, with a skewed number of models per class, so that
bench/query_fill and bench/dashboard_bench run on a services-only build. Not the seed catalog:
the classes and tasks come from the same reference table, the per-class counts do not.

usage: bench/stand_in_catalog.py DATA_DIR OUT.jsonl [--count 104909] [--seed 1]
"""
import csv
import glob
import json
import random
import sys


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    data, out = args[0], args[1]
    count = int(args[args.index('--count') + 1]) if '--count' in args else 104909
    rng = random.Random(int(args[args.index('--seed') + 1]) if '--seed' in args else 1)
    pairs = {}
    for path in glob.glob(data + '/transformers_task_classes_*.csv'):
        with open(path) as f:
            for row in csv.DictReader(f):
                if row['pipeline_tag'] and row['architecture_class'] and row['model_type']:
                    pairs.setdefault(row['architecture_class'], (row['pipeline_tag'], row['model_type']))
    classes = sorted(pairs)
    # Zipf-like weights: a few classes hold most models, as on the Hub.
    weights = [1.0 / (1 + rank) ** 0.9 for rank in range(len(classes))]
    rng.shuffle(weights)
    with open(out, 'w') as f:
        for i in range(count):
            arch = classes[i] if i < len(classes) else rng.choices(classes, weights)[0]
            task, family = pairs[arch]
            row = {'id': 'stand-in/%s-%d' % (family, i), 'task': task, 'arch': arch,
                   'family': family, 'config': {'model_type': family, 'architectures': [arch]}}
            f.write(json.dumps(row, separators=(',', ':')) + '\n')


if __name__ == '__main__':
    main()
