#!/usr/bin/env python3
"""Cross-checks the zoo against transformers (issue 17 item 5; workers/zoo/FIDELITY.md).

For every folder `touchstone zoo export` wrote under EXPORTS (config.json, model.safetensors,
inputs.safetensors, outputs.safetensors), builds the transformers class that config.json names
(fp32, attn_implementation="eager"), loads the weights with strict=True (a strict failure is
reported as missing / unexpected keys and the load retried non-strictly, so one class never
stops the run), runs the inputs and compares each of the zoo's outputs with transformers' on the
attended positions: max|zoo - hf| / max|hf| < 1e-4 passes.

Writes a markdown table (class, max error, key mismatches) to --table, the details to --json,
and with --keys the transformers state_dict keys and shapes of every class (item 2's table).

Needs torch and transformers (4.x or 5.x); the safetensors files are read by a small reader here
(no safetensors package needed). Exit status: 0 when every class ran and passed, 1 otherwise, 2 on bad usage.

  python3 clients/python/hf_crosscheck.py --exports build/hf-export \\
      --table fidelity.md --json fidelity.json --keys hf_state_dict_keys.json
"""

import argparse
import json
import os
import signal
import struct
import sys
import time
import traceback

TOLERANCE = 1e-4

_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
}


def read_safetensors(path):
    """{name: tensor} and the metadata of one safetensors file."""
    import torch

    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dtype = getattr(torch, _DTYPES[e["dtype"]])
        buf = bytearray(data[begin:end])
        t = torch.frombuffer(buf, dtype=dtype) if buf else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(e["shape"]).clone()
    return out, meta


class Timeout(Exception):
    pass


def _alarm(_sig, _frame):
    raise Timeout("timed out")


def build_hf(folder):
    """The transformers model config.json names, fp32, eager attention, in eval mode."""
    import torch
    import transformers

    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    arch = cfg["architectures"][0]
    cls = getattr(transformers, arch)
    try:
        config = transformers.AutoConfig.from_pretrained(folder)
    except Exception:
        config = transformers.AutoConfig.for_model(**cfg)
    torch.manual_seed(0)
    try:
        model = cls._from_config(config, attn_implementation="eager")
    except TypeError:
        config._attn_implementation = "eager"
        model = cls(config)
    return arch, model.float().eval()


def attended(name, t, inputs):
    """The rows of output `name` at attended positions, when it is per position ([B, S, ...]
    with a mask of [B, S]; [B, S] only for the QA start/end logits)."""
    if t.dim() < 3 and name not in ("start_logits", "end_logits"):
        return t
    masks = ("attention_mask",) if name.startswith("encoder_") else (
        "decoder_attention_mask", "attention_mask")
    for mask_name in masks:
        m = inputs.get(mask_name)
        if m is not None and tuple(t.shape[:2]) == tuple(m.shape):
            return t[m.bool()]
    return t


def hf_output(out, name):
    if isinstance(out, dict) or hasattr(out, "keys"):
        if name in out.keys():
            return out[name]
    if hasattr(out, name) and getattr(out, name) is not None:
        return getattr(out, name)
    raise KeyError("output '%s' not among the model's %s" % (
        name, list(out.keys()) if hasattr(out, "keys") else type(out).__name__))


def check_one(folder, want_keys):
    import torch

    row = {"folder": os.path.basename(folder), "class": os.path.basename(folder)}
    arch, model = build_hf(folder)
    row["class"] = arch
    sd = model.state_dict()
    if want_keys:
        row["keys"] = {k: list(v.shape) for k, v in sd.items()}
    weights, _ = read_safetensors(os.path.join(folder, "model.safetensors"))
    row["shape_mismatch"] = sorted(
        "%s %s vs %s" % (k, list(v.shape), list(sd[k].shape))
        for k, v in weights.items() if k in sd and tuple(sd[k].shape) != tuple(v.shape))
    try:
        model.load_state_dict(weights, strict=True)
        row["missing"], row["unexpected"] = [], []
    except RuntimeError as e:
        # Report, then load what fits (a size mismatch raises even when not strict).
        row["strict_error"] = str(e).splitlines()[0][:300]
        fits = {k: v for k, v in weights.items()
                if k not in sd or tuple(sd[k].shape) == tuple(v.shape)}
        res = model.load_state_dict(fits, strict=False)
        row["missing"] = sorted(res.missing_keys)
        row["unexpected"] = sorted(res.unexpected_keys)
    inputs, _ = read_safetensors(os.path.join(folder, "inputs.safetensors"))
    outputs, meta = read_safetensors(os.path.join(folder, "outputs.safetensors"))
    order = [n for n in meta.get("outputs", "").split(",") if n] or sorted(outputs)
    with torch.no_grad():
        out = model(**inputs)
    errors = {}
    for name in order:
        try:
            ref = hf_output(out, name)
        except KeyError as e:
            errors[name] = str(e).strip("'\"")
            continue
        if isinstance(ref, (tuple, list)):
            ref = ref[0]
        got = outputs[name]
        if tuple(ref.shape) != tuple(got.shape):
            errors[name] = "shape %s vs transformers %s" % (list(got.shape), list(ref.shape))
            continue
        r = attended(name, ref.float(), inputs)
        g = attended(name, got.float(), inputs)
        scale = r.abs().max().item()
        diff = (r - g).abs().max().item()
        errors[name] = diff / scale if scale > 0 else diff
    row["errors"] = errors
    numeric = [v for v in errors.values() if isinstance(v, float)]
    row["max_error"] = max(numeric) if numeric else None
    row["ok"] = all(isinstance(v, float) and v < TOLERANCE for v in errors.values())
    return row


def keys_only(folder):
    arch, model = build_hf(folder)
    return arch, {k: list(v.shape) for k, v in model.state_dict().items()}


def mismatch_text(row):
    parts = []
    for what in ("missing", "unexpected", "shape_mismatch"):
        keys = row.get(what) or []
        if keys:
            shown = ", ".join("`%s`" % k for k in keys[:3])
            more = " +%d" % (len(keys) - 3) if len(keys) > 3 else ""
            parts.append("%s %d: %s%s" % (what, len(keys), shown, more))
    return "; ".join(parts) or "none"


def markdown(rows, header_note):
    lines = [header_note, "", "| class | max error | result | key mismatches |", "|---|---|---|---|"]
    for row in rows:
        if "exception" in row:
            lines.append("| %s | - | error: %s | - |" % (row["class"], row["exception"].replace("|", "/")))
            continue
        err = row.get("max_error")
        err_text = "%.2e" % err if err is not None else "-"
        bad = {k: v for k, v in row["errors"].items() if not (isinstance(v, float) and v < TOLERANCE)}
        result = "pass" if row["ok"] else "FAIL " + ", ".join(
            "%s %s" % (k, ("%.2e" % v) if isinstance(v, float) else v) for k, v in bad.items())
        lines.append("| %s | %s | %s | %s |" % (row["class"], err_text, result.replace("|", "/"),
                                               mismatch_text(row)))
    return "\n".join(lines) + "\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--exports", required=True, help="folder of exported class folders")
    p.add_argument("--table", help="markdown table output")
    p.add_argument("--json", help="details output (JSON)")
    p.add_argument("--keys", help="transformers state_dict keys and shapes per class (JSON)")
    p.add_argument("--keys-only", action="store_true", help="only the key table, no comparison")
    p.add_argument("--only", help="comma-separated class folders to run")
    p.add_argument("--per-class-timeout", type=int, default=30)
    p.add_argument("--budget-s", type=float, default=240.0, help="stop starting classes after this")
    args = p.parse_args(argv)

    try:
        import torch
        import transformers
    except ImportError as e:
        print("hf_crosscheck: needs torch and transformers (%s)" % e, file=sys.stderr)
        return 2
    torch.manual_seed(0)
    torch.set_grad_enabled(False)
    try:
        transformers.logging.set_verbosity_error()
    except Exception:
        pass

    folders = sorted(d for d in os.listdir(args.exports)
                     if os.path.isfile(os.path.join(args.exports, d, "config.json")))
    if args.only:
        wanted = set(args.only.split(","))
        folders = [f for f in folders if f in wanted]
    if not folders:
        print("hf_crosscheck: no exported folders under %s" % args.exports, file=sys.stderr)
        return 2

    signal.signal(signal.SIGALRM, _alarm)
    start = time.time()
    rows, keys = [], {}

    def flush(final):
        """Writes what is known so far (a run killed from outside still leaves its results)."""
        passed = sum(1 for r in rows if r.get("ok"))
        note = ("transformers %s, torch %s, %s; %d/%d classes within max|Δ|/max|ref| < %g (fp32, "
                "eager, attended positions)%s; %.0f s") % (
            transformers.__version__, torch.__version__,
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), passed, len(rows), TOLERANCE,
            "" if final else " [partial: %d of %d folders]" % (len(rows), len(folders)),
            time.time() - start)
        if args.table:
            with open(args.table, "w") as f:
                f.write(markdown(rows, note))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"note": note, "rows": rows}, f, indent=1, sort_keys=True)
        if args.keys and (final or len(rows) % 25 == 0):
            with open(args.keys, "w") as f:
                json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                           "classes": keys}, f, indent=0, sort_keys=True)
        return passed, note

    for name in folders:
        folder = os.path.join(args.exports, name)
        if time.time() - start > args.budget_s:
            rows.append({"class": name, "exception": "not run: time budget spent"})
            continue
        signal.alarm(args.per_class_timeout)
        try:
            if args.keys_only:
                arch, k = keys_only(folder)
                keys[arch] = k
                row = {"class": arch, "errors": {}, "ok": True, "max_error": None}
            else:
                row = check_one(folder, bool(args.keys))
                if "keys" in row:
                    keys[row["class"]] = row.pop("keys")
        except BaseException as e:  # one class never stops the run
            if isinstance(e, KeyboardInterrupt):
                raise
            msg = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            row = {"class": name, "exception": msg[:300], "trace": traceback.format_exc()[-2000:]}
            # The key table still wants the class when only the comparison failed.
            if args.keys and name not in keys:
                try:
                    arch, k = keys_only(folder)
                    keys[arch] = k
                except BaseException:
                    pass
        finally:
            signal.alarm(0)
        rows.append(row)
        status = "ok" if row.get("ok") else ("ERROR " + row["exception"] if "exception" in row else "FAIL")
        print("%-55s %-10s %s" % (row["class"], "%.1e" % row["max_error"] if row.get("max_error") is not None else "-",
                                  status), flush=True)
        flush(False)

    passed, note = flush(True)
    print(note)
    if args.keys_only:
        return 0 if all("exception" not in r for r in rows) else 1
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
