#!/usr/bin/env python3
"""May we ship? A release script over Touchstone's Query API.

    release_check.py --scheduler HOST:PORT --token-file FILE --sweep HEAD [--baseline BASE]
                     [--rules rules.json]

Prints the per-task table, what changed since the baseline, the ops that block the most
models, and the gate's verdict with its reasons. Exit 0: ship; 1: the gate failed; 2: bad
arguments or a request the server refused.
"""

import argparse
import json
import sys

import grpc

from touchstone_client import Client, passed

DEFAULT_RULES = {"min": {"eager": 99.0}, "forbid": ["crash", "timeout"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scheduler", required=True)
    p.add_argument("--token-file")
    p.add_argument("--tls-ca")
    p.add_argument("--sweep", type=int, required=True)
    p.add_argument("--baseline", type=int, default=0)
    p.add_argument("--rules", help="gate rules JSON file (default: eager >= 99%%, no crash)")
    a = p.parse_args()
    rules = DEFAULT_RULES
    if a.rules:
        with open(a.rules, encoding="utf-8") as f:
            rules = json.load(f)
    if a.baseline:
        rules = dict(rules, baseline=a.baseline)
    try:
        with Client(a.scheduler, token_file=a.token_file, ca_file=a.tls_ca) as c:
            s = c.summary(a.sweep)
            print(f"{'task':40} {'models':>7} {'eager%':>7} {'opcov%':>7} {'compile%':>8}")
            for r in list(s.rows) + [s.total]:
                print(f"{r.group:40} {r.models:7d} {r.eager_pct:7.1f} {r.opcov_pct:7.1f}"
                      f" {r.compile_pct:8.1f}")
            if a.baseline:
                first, changes = c.compare(a.baseline, a.sweep)
                print(f"vs sweep {a.baseline}: {first.regressed} regressed, {first.fixed} fixed")
            for op in c.ops(a.sweep, limit=5):
                print(f"op {op.op}: blocks {op.models_blocked} models, {op.blocks_alone} alone")
            verdict = c.gate(a.sweep, rules)
    except grpc.RpcError as e:
        print(f"release_check: {e.code().name}: {e.details()}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"release_check: rules: {e}", file=sys.stderr)
        return 2
    ok = passed(verdict)
    print("gate:", "PASS" if ok else "FAIL")
    for f in verdict.failures:
        print(f"  {f.rule} {f.group or '(all)'}: measured {f.measured:g}, limit {f.limit:g}"
              f" {f.detail}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
