"""Touchstone's Query API for release tooling written in Python.

    from touchstone_client import Client
    c = Client("127.0.0.1:7300", token_file=".touchstone/tokens")
    table = c.summary(42)                      # touchstone.v1.Summary
    verdict = c.gate(42, {"min": {"eager": 99}, "forbid": ["crash"]})
    for op in c.ops(42, mode="compile", limit=10): print(op.op, op.blocks_alone)

Answers are the generated protobuf messages of proto/touchstone/v1/query.proto (stubs built by
CMake next to this file: put build/clients/python on PYTHONPATH). Errors are
grpc.RpcError from the server (INVALID_ARGUMENT naming the field, NOT_FOUND, ...) or
ValueError for a rules dict or tokens file this module refuses before calling.
"""

import grpc

from touchstone.v1 import query_pb2, query_pb2_grpc, result_pb2

_GROUP_BY = {
    "task": query_pb2.GROUP_BY_TASK,
    "family": query_pb2.GROUP_BY_FAMILY,
    "arch": query_pb2.GROUP_BY_ARCH,
}
_MODES = {"eager": result_pb2.MODE_EAGER, "compile": result_pb2.MODE_COMPILE}
_THRESHOLD_KEYS = ("eager", "compile", "train", "opcov")
_RULE_KEYS = ("baseline", "min", "min_by_task", "min_by_class", "max_new_failures", "forbid",
              "must_pass")


def read_token(path, roles=("reader", "admin")):
    """The token of the first of `roles` in a tokens file (`role token` lines, '#' comments;
    one bare token is that token), else the file's first token."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) == 1:
                entries.append(("", words[0]))
            elif len(words) == 2:
                entries.append((words[0], words[1]))
            else:
                raise ValueError(f"{path}:{n}: expected 'role token'")
    if not entries:
        raise ValueError(f"{path}: holds no token")
    for role in roles:
        for r, token in entries:
            if r == role:
                return token
    return entries[0][1]


def _thresholds(d, path, out):
    if not isinstance(d, dict):
        raise ValueError(f"{path}: must be an object like {{\"eager\": 99.0}}")
    for key, value in d.items():
        if key not in _THRESHOLD_KEYS:
            raise ValueError(f"{path}.{key}: unknown key; expected one of "
                             + ", ".join(_THRESHOLD_KEYS))
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not 0 <= value <= 100:
            raise ValueError(f"{path}.{key}: must be a number in [0, 100]")
        setattr(out, key, float(value))


def gate_rules(rules):
    """A rules dict (the `touchstone gate --rules` JSON) -> touchstone.v1.GateRules."""
    if not isinstance(rules, dict):
        raise ValueError("rules: must be a dict")
    out = query_pb2.GateRules()
    for key, value in rules.items():
        if key not in _RULE_KEYS:
            raise ValueError(f"{key}: unknown key; expected one of " + ", ".join(_RULE_KEYS))
        if key == "baseline":
            out.baseline_sweep_id = int(value)
        elif key == "min":
            _thresholds(value, "min", out.min)
        elif key in ("min_by_task", "min_by_class"):
            if not isinstance(value, dict):
                raise ValueError(f"{key}: must be an object of name -> thresholds")
            for name, t in value.items():
                _thresholds(t, f'{key}["{name}"]', getattr(out, key)[name])
        elif key == "max_new_failures":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError("max_new_failures: must be a non-negative integer")
            out.max_new_failures = value
        else:
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{key}: must be a list of non-empty strings")
            getattr(out, key).extend(value)
    return out


def passed(gate_response):
    """GateResponse.pass (a keyword in Python, so not an attribute you can write)."""
    return getattr(gate_response, "pass")


class Client:
    """One channel to a scheduler's Query service."""

    def __init__(self, target, token=None, token_file=None, ca_file=None, timeout_s=60):
        if token is None and token_file:
            token = read_token(token_file)
        self._metadata = [("authorization", "Bearer " + token)] if token else []
        if ca_file:
            with open(ca_file, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(target, creds)
        else:
            self._channel = grpc.insecure_channel(target)
        self._stub = query_pb2_grpc.QueryStub(self._channel)
        self._timeout = timeout_s

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        return getattr(self._stub, method)(request, metadata=self._metadata,
                                           timeout=self._timeout)

    def sweeps(self, profile="", state="", name_contains="", limit=50):
        """Sweeps, newest first (up to `limit`)."""
        out, token = [], ""
        while len(out) < limit:
            page = self._call("ListSweeps", query_pb2.ListSweepsRequest(
                profile=profile, state=state, name_contains=name_contains,
                page_size=min(1000, limit - len(out)), page_token=token))
            out.extend(page.sweeps)
            token = page.next_page_token
            if not token:
                break
        return out[:limit]

    def summary(self, sweep_id, group_by="task", tasks=(), families=(), archs=()):
        """The conformance table (touchstone.v1.Summary)."""
        if group_by not in _GROUP_BY:
            raise ValueError("group_by: one of " + ", ".join(_GROUP_BY))
        req = query_pb2.GetSummaryRequest(sweep_id=sweep_id, group_by=_GROUP_BY[group_by])
        req.filter.tasks.extend(tasks)
        req.filter.families.extend(families)
        req.filter.archs.extend(archs)
        return self._call("GetSummary", req)

    def model(self, model_id, last=10):
        return self._call("GetModel", query_pb2.GetModelRequest(model_id=model_id, last=last))

    def ops(self, sweep_id, mode="eager", limit=50):
        """Ops ranked by the models they block (a list of OpDemandRow, up to `limit`)."""
        if mode not in _MODES:
            raise ValueError("mode: eager or compile")
        out, token = [], ""
        while len(out) < limit:
            page = self._call("OpDemand", query_pb2.OpDemandRequest(
                sweep_id=sweep_id, mode=_MODES[mode], page_size=min(1000, limit - len(out)),
                page_token=token))
            out.extend(page.ops)
            token = page.next_page_token
            if not token:
                break
        return out[:limit]

    def compare(self, base_sweep_id, head_sweep_id, group_by="task"):
        """Every change between two sweeps: (first page's response, all changes)."""
        if group_by not in _GROUP_BY:
            raise ValueError("group_by: one of " + ", ".join(_GROUP_BY))
        req = query_pb2.CompareSweepsRequest(base_sweep_id=base_sweep_id,
                                             head_sweep_id=head_sweep_id,
                                             group_by=_GROUP_BY[group_by])
        first, changes = None, []
        while True:
            page = self._call("CompareSweeps", req)
            first = first or page
            changes.extend(page.changes)
            if not page.next_page_token:
                return first, changes
            req.page_token = page.next_page_token

    def gate(self, sweep_id, rules):
        """The release gate (touchstone.v1.GateResponse; `passed(answer)` reads its verdict:
        `pass` is a Python keyword); `rules` is a dict or GateRules."""
        if isinstance(rules, dict):
            rules = gate_rules(rules)
        return self._call("Gate", query_pb2.GateRequest(sweep_id=sweep_id, rules=rules))

    def alerts(self, state="", limit=1000):
        """Regression alerts (touchstone.v1.Alert), newest first, up to `limit`; `state` one of
        open, acknowledged, resolved, or "" for any."""
        out, token = [], ""
        while len(out) < limit:
            page = self._call("ListAlerts", query_pb2.ListAlertsRequest(
                state=state, page_size=min(1000, limit - len(out)), page_token=token))
            out.extend(page.alerts)
            token = page.next_page_token
            if not token:
                break
        return out[:limit]

    def quarantine(self):
        """Quarantined models and modes (a list of touchstone.v1.QuarantineEntry)."""
        return list(self._call("ListQuarantine", query_pb2.ListQuarantineRequest()).entries)

    def watch_alerts(self, state="", interval_ms=1000):
        """Yields touchstone.v1.AlertsUpdate: first the snapshot of the alerts in `state`, then
        each batch of changed alerts, until the caller stops iterating (the stream is
        cancelled) or the scheduler ends it."""
        stream = self._stub.WatchAlerts(
            query_pb2.WatchAlertsRequest(state=state, interval_ms=interval_ms),
            metadata=self._metadata)
        try:
            for update in stream:
                yield update
        finally:
            stream.cancel()
