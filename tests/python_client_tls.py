#!/usr/bin/env python3
"""The Python client's TLS path against a scheduler serving TLS (run by tests/tls_e2e_test.cc,
which made the CA and one done sweep of MODELS models). With ca_file the client lists the sweep
and reads its summary; without it, or trusting another CA, the call is refused (UNAVAILABLE).
Exit 0 when every check holds."""

import argparse
import sys

import grpc

import touchstone_client as tc

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def refused(a, ca_file):
    try:
        with tc.Client(a.scheduler, token_file=a.token_file, ca_file=ca_file, timeout_s=10) as c:
            c.sweeps()
    except grpc.RpcError as e:
        return e.code() == grpc.StatusCode.UNAVAILABLE
    return False


def main():
    p = argparse.ArgumentParser()
    for flag in ("--scheduler", "--token-file", "--ca", "--other-ca"):
        p.add_argument(flag, required=True)
    p.add_argument("--sweep", type=int, required=True)
    p.add_argument("--models", type=int, required=True)
    a = p.parse_args()

    with tc.Client(a.scheduler, token_file=a.token_file, ca_file=a.ca) as c:
        ids = [s.sweep_id for s in c.sweeps()]
        check(ids == [a.sweep], f"sweeps() over TLS lists the sweep: {ids}")
        s = c.summary(a.sweep)
        check(s.total.models == a.models, f"summary over TLS: {s.total.models} models")
    check(refused(a, None), "plaintext to the TLS scheduler is refused")
    check(refused(a, a.other_ca), "a client trusting another CA is refused")
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("python client over TLS: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
