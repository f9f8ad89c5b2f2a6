#!/usr/bin/env python3
"""The Python client against a live scheduler (run by tests/query_e2e_test.cc, which made two
sweeps, BASE on a defect-free profile and HEAD on sim-2.1 with BASE as baseline, and serves
them). Checks the client's answers against the `touchstone` CLI's JSON for the same calls, and
the example release script's exit codes. Exit 0 when every check holds."""

import argparse
import json
import os
import subprocess
import sys

import touchstone_client as tc

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def cli(a, *args):
    r = subprocess.run([a.touchstone, *args, "--scheduler", a.scheduler, "--token-file",
                        a.token_file, "--format", "json"], capture_output=True, text=True,
                       timeout=120)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


def main():
    p = argparse.ArgumentParser()
    for flag in ("--scheduler", "--token-file", "--touchstone"):
        p.add_argument(flag, required=True)
    p.add_argument("--base", type=int, required=True)
    p.add_argument("--head", type=int, required=True)
    a = p.parse_args()

    with tc.Client(a.scheduler, token_file=a.token_file) as c:
        ids = [s.sweep_id for s in c.sweeps()]
        check(a.base in ids and a.head in ids, f"sweeps() lists both sweeps: {ids}")
        check(ids == sorted(ids, reverse=True), f"sweeps() newest first: {ids}")

        s = c.summary(a.head)
        rc, j, err = cli(a, "summary", str(a.head))
        check(rc == 0, f"cli summary: {err}")
        check(len(s.rows) == len(j["rows"]), "summary: as many rows as the CLI's")
        for mine, theirs in zip(list(s.rows) + [s.total, s.class_weighted],
                                j["rows"] + [j["total"], j["classWeighted"]]):
            check(mine.group == theirs["group"] and mine.models == int(theirs["models"]) and
                  abs(mine.eager_pct - theirs["eagerPct"]) < 1e-9 and
                  abs(mine.compile_pct - theirs["compilePct"]) < 1e-9 and
                  abs(mine.opcov_pct - theirs["opcovPct"]) < 1e-9,
                  f"summary row {mine.group} equals the CLI's")
        check(s.total.models > 0, "summary: models counted")

        for mode in ("eager", "compile"):
            ops = c.ops(a.head, mode=mode, limit=1000)
            rc, j, err = cli(a, "ops", str(a.head), "--mode", mode, "--limit", "1000")
            check(rc == 0, f"cli ops: {err}")
            theirs = [(o["op"], int(o["modelsBlocked"]), int(o["blocksAlone"]))
                      for o in j.get("ops", [])]
            check([(o.op, o.models_blocked, o.blocks_alone) for o in ops] == theirs,
                  f"ops({mode}) equals the CLI's")

        first, changes = c.compare(a.base, a.head)
        check(first.regressed + first.fixed ==
              sum(1 for ch in changes if ch.kind in (1, 2)), "compare: counts match changes")
        check(first.regressed > 0, "compare: sim-2.1 regressed something")

        lenient = {"forbid": ["crash", "timeout"], "min": {"eager": 99}}
        check(tc.passed(c.gate(a.base, lenient)), "gate: the clean sweep passes")
        strict = dict(lenient, baseline=a.base, min={"eager": 100, "compile": 100})
        verdict = c.gate(a.head, strict)
        check(not tc.passed(verdict), "gate: the regressed sweep fails")
        check(any(f.rule == "min.eager" and f.measured < f.limit for f in verdict.failures),
              f"gate: min.eager named with its measured value: {verdict.failures}")

        # Alerts (the scheduler detects the head sweep by itself, and the e2e test ran detect).
        alerts = c.alerts()
        rc, j, err = cli(a, "alerts")
        check(rc == 0, f"cli alerts: {err}")
        check([x.alert_id for x in alerts] == [int(x["alertId"]) for x in j.get("alerts", [])],
              "alerts() lists the CLI's alerts in its order")
        check(c.quarantine() == [], "quarantine(): nothing flaked twice")
        first_update = next(iter(c.watch_alerts(interval_ms=100)))
        check(first_update.snapshot and len(first_update.alerts) == len(alerts),
              f"watch_alerts(): a snapshot of the {len(alerts)} alerts first")

    example = os.path.join(os.path.dirname(tc.__file__), "release_check.py")
    common = [sys.executable, example, "--scheduler", a.scheduler, "--token-file", a.token_file]
    ok = subprocess.run(common + ["--sweep", str(a.base)], capture_output=True, text=True)
    check(ok.returncode == 0, f"release_check on the clean sweep: {ok.stdout}{ok.stderr}")
    bad = subprocess.run(common + ["--sweep", str(a.head), "--baseline", str(a.base)],
                         capture_output=True, text=True)
    check(bad.returncode == 1 and "gate: FAIL" in bad.stdout,
          f"release_check on the regressed sweep: {bad.returncode} {bad.stdout}{bad.stderr}")
    print(f"python client e2e: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
