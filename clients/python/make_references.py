#!/usr/bin/env python3
"""Reference bundles from another implementation: transformers, on CUDA or the CPU (issue 31).

For every run folder `touchstone refs inputs` wrote under RUNS (config.json, model.safetensors,
inputs.safetensors, labels.safetensors, run.json), builds the class config.json names with
transformers (attn_implementation="eager"), loads the run's weights with strict=True (a folder
whose weights do not load strictly is reported and skipped: a reference built on other weights
would be no reference), and computes what a reference bundle of that run holds
(workers/refs/README.md):

  forward.outputs.<i>   the outputs at --dtype (float32 with TF32 off, or bfloat16), in the order
                        run.json names them
  forward.golden.<i>    the same in float64 (on the device, else on the CPU): the reference's own
                        noise, against which the engine judges whether this reference and its own
                        agree
  train.loss.reference  the loss before each of run.json's train_steps SGD steps (learning_rate)
                        on the run's batch, at --dtype

and writes it as a bundle file OUT/<sha256>.safetensors whose key is the run's (run.json) with
this producer's device (`cuda:<name>` or `cpu`), dtype, implementation and torch version.
`touchstone refs import OUT` loads them; a sweep then judges each mode against both references.

--model-module FILE.py builds the model from FILE's `build(config: dict) -> torch.nn.Module`
(named by its IMPLEMENTATION string) instead of transformers (tests/refs/vit_model.py writes
one by hand: Debian has no transformers package). Needs only torch; safetensors are read and
written here.

  python3 clients/python/make_references.py --runs RUNS --out OUT [--device cuda|cpu]
      [--dtype float32|bfloat16] [--no-train] [--model-module FILE.py] [--summary FILE.json]

Exit status: 0 when every run produced a bundle, 1 when some did not, 2 on bad usage.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import struct
import sys
import time
import traceback

# Run as a script from clients/python: its folder is on sys.path. The safetensors reader, the
# dtype table and the output lookup are the cross-check's (one copy of each).
import hf_crosscheck
from hf_crosscheck import _DTYPES

METADATA_ENTRY = "touchstone.reference_bundle"  # workers/refs/format.h
FORMAT_VERSION = 1


def read_safetensors(path):
    """name -> tensor of a safetensors file (hf_crosscheck's reader, without the metadata)."""
    return hf_crosscheck.read_safetensors(path)[0]


def encode_safetensors(tensors, metadata):
    """The bytes of a safetensors file: names sorted, buffers 8-byte aligned, little-endian."""
    import torch

    header, bufs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        dt = next((code for code, tname in _DTYPES.items() if t.dtype == getattr(torch, tname)),
                  None)
        if dt is None:
            raise ValueError("tensor %s: dtype %s has no safetensors name" % (name, t.dtype))
        # Bytes of the buffer: through uint8 views (bfloat16 has no numpy type).
        b = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        bufs.append(b)
    header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(bufs)


def bundle_bytes(key, outputs, golden, losses, provenance):
    """A reference bundle (workers/refs/bundle.h): forward outputs and fp64 golden (undefined
    outputs left out), and train's reference loss curve when given."""
    import torch

    tensors = {}
    meta = {"format": FORMAT_VERSION, "key": key, "provenance": provenance}
    lists = {"outputs": [], "golden": []}
    for i, t in enumerate(outputs):
        if t is None:
            continue
        tensors["forward.outputs.%d" % i] = t
        lists["outputs"].append(i)
    for i, t in enumerate(golden or []):
        if t is None:
            continue
        tensors["forward.golden.%d" % i] = t.to(torch.float64)
        lists["golden"].append(i)
    if not golden:
        del lists["golden"]
    meta["forward"] = {"status": "", "error": "", "outputs": len(outputs), "lists": lists}
    if losses is not None:
        tensors["train.loss.reference"] = torch.tensor(losses, dtype=torch.float64)
        meta["train"] = {"status": "", "error": "", "curves": ["reference"], "lists": {},
                         "golden": "absent", "declared_is_reference": False,
                         "declared_digests": {}}
    return encode_safetensors(tensors, {METADATA_ENTRY: json.dumps(meta, separators=(",", ":"),
                                                                   sort_keys=True)})


def loss_of(out):
    loss = hf_crosscheck.hf_output(out, "loss")
    return loss[0] if isinstance(loss, (tuple, list)) else loss


def build_transformers(config):
    import torch
    import transformers

    arch = config["architectures"][0]
    cls = getattr(transformers, arch)
    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    try:
        return cls._from_config(cfg, attn_implementation="eager"), "transformers " + transformers.__version__
    except TypeError:
        cfg._attn_implementation = "eager"
        return cls(cfg), "transformers " + transformers.__version__


def load_module(path):
    spec = importlib.util.spec_from_file_location("reference_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pad_for_last_token_pooling(config, inputs):
    """transformers' decoder *ForSequenceClassification pools the last token that is not
    pad_token_id and refuses a batch of two without one; the zoo pools the last attended token.
    Without a pad id: the smallest id no attended token holds, put at the padded positions (which
    attend to nothing), so both pool the same token (as workers/zoo/export.cc names one)."""
    arch = config["architectures"][0]
    if not arch.endswith("ForSequenceClassification") or config.get("pad_token_id") is not None:
        return config, inputs
    ids, mask = inputs.get("input_ids"), inputs.get("attention_mask")
    if ids is None or mask is None:
        return config, inputs
    used = set(ids[mask.bool()].tolist())
    pad = 0
    while pad in used:
        pad += 1
    inputs = dict(inputs)
    inputs["input_ids"] = ids.masked_fill(~mask.bool(), pad)
    return dict(config, pad_token_id=pad), inputs


def to(tensors, device, dtype):
    """Float tensors to `dtype` on `device`, the others (ids, masks) to `device`."""
    return {k: (v.to(device, dtype) if v.is_floating_point() else v.to(device))
            for k, v in tensors.items()}


def forward(model, inputs, names):
    import torch

    with torch.no_grad():
        out = model(**inputs)
    result = []
    for name in names:
        t = hf_crosscheck.hf_output(out, name)
        if isinstance(t, (tuple, list)):
            t = t[0]
        result.append(t.detach().to("cpu"))
    return result


def train_losses(model, inputs, labels, steps, lr):
    """The engine's recipe (workers/engine/engine.cc TrainLosses): the loss before each of
    `steps` plain SGD updates p -= lr * grad, on a fixed batch, from the loaded weights."""
    import torch

    losses = []
    params = [p for p in model.parameters() if p.requires_grad]
    for _ in range(steps):
        for p in params:
            p.grad = None
        loss = loss_of(model(**inputs, **labels))
        losses.append(float(loss.detach().to("cpu", torch.float64)))
        loss.backward()
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-lr)
    return losses


def make_one(folder, args, builder):
    import copy
    import torch

    with open(os.path.join(folder, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    inputs = read_safetensors(os.path.join(folder, "inputs.safetensors"))
    labels = read_safetensors(os.path.join(folder, "labels.safetensors"))
    weights = read_safetensors(os.path.join(folder, "model.safetensors"))
    config, inputs = pad_for_last_token_pooling(config, inputs)
    model, implementation = builder(config)
    model = model.float().eval()
    model.load_state_dict(weights, strict=True)  # raises: the run is reported and skipped
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    names = run["outputs"]
    golden_model = copy.deepcopy(model)

    m = model.to(device, dtype)
    outputs = forward(m, to(inputs, device, dtype), names)
    try:  # fp64 on the device, else on the CPU
        golden = forward(golden_model.to(device, torch.float64),
                         to(inputs, device, torch.float64), names)
    except RuntimeError:
        golden = forward(golden_model.to("cpu", torch.float64),
                         to(inputs, "cpu", torch.float64), names)
    for t in outputs:
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError("outputs are not finite at %s" % args.dtype)
    losses = None
    if not args.no_train:
        m.train(False)  # no dropout: the engine's models have none
        losses = train_losses(m, to(inputs, device, dtype), to(labels, device, dtype),
                              int(run["train_steps"]), float(run["learning_rate"]))
    key = dict(run["key"])
    key["device"] = device_name(device)
    key["dtype"] = args.dtype
    key["zoo_version"] = implementation
    key["torch_version"] = torch.__version__
    key["numerics"] = "none"  # no declared-numerics references in a bundle from elsewhere
    key["modes"] = ["forward"] + ([] if args.no_train else ["train"])
    provenance = {"producer": "make_references.py", "implementation": implementation,
                  "tf32": False if device.type == "cuda" else None}
    return bundle_bytes(key, outputs, golden, losses, provenance), key


def device_name(device):
    import torch

    if device.type == "cuda":
        return "cuda:" + torch.cuda.get_device_name(device)
    return "cpu"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", required=True, help="folder of `touchstone refs inputs` run folders")
    p.add_argument("--out", required=True, help="folder for the bundle files")
    p.add_argument("--device", default=None, help="cuda (default when available) or cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--no-train", action="store_true", help="forward references only")
    p.add_argument("--model-module", help="FILE.py with build(config) -> torch.nn.Module")
    p.add_argument("--summary", help="per-run results (JSON)")
    p.add_argument("--budget-s", type=float, default=0, help="stop starting runs after this (0: none)")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print("make_references: needs torch (%s)" % e, file=sys.stderr)
        return 2
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device.startswith("cuda"):
        # fp32 means fp32: no TF32 in matmuls or convolutions.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.model_module:
        mod = load_module(args.model_module)
        implementation = "python " + getattr(mod, "IMPLEMENTATION",
                                             os.path.basename(args.model_module))
        builder = lambda config: (mod.build(config), implementation)
    else:
        try:
            import transformers
            transformers.logging.set_verbosity_error()
        except ImportError as e:
            print("make_references: needs transformers, or --model-module (%s)" % e, file=sys.stderr)
            return 2
        builder = build_transformers
    folders = sorted(d for d in os.listdir(args.runs)
                     if os.path.isfile(os.path.join(args.runs, d, "run.json")))
    if not folders:
        print("make_references: no run folders under %s" % args.runs, file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    start, rows, made = time.time(), [], 0
    for name in folders:
        row = {"run": name}
        if args.budget_s and time.time() - start > args.budget_s:
            row["error"] = "not run: time budget spent"
            rows.append(row)
            continue
        t0 = time.time()
        try:
            data, key = make_one(os.path.join(args.runs, name), args, builder)
            digest = hashlib.sha256(data).hexdigest()
            tmp = os.path.join(args.out, ".%s.part" % digest)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, os.path.join(args.out, digest + ".safetensors"))
            row.update({"bundle": digest, "arch": key["arch"], "model_id": key["model_id"],
                        "bytes": len(data)})
            made += 1
        except Exception as e:  # one run never stops the others
            # Every line of it, joined: load_state_dict names the keys on the lines after its first.
            text = " ".join(line.strip() for line in str(e).splitlines() if line.strip())
            row["error"] = "%s: %s" % (type(e).__name__, text[:300])
            row["trace"] = traceback.format_exc()[-1500:]
        row["seconds"] = round(time.time() - t0, 3)
        rows.append(row)
        print("%-60s %s" % (name, row.get("bundle", "ERROR " + row.get("error", ""))[:200]), flush=True)
    note = "%d of %d runs made bundles (%s, %s, torch %s) in %.0f s" % (
        made, len(folders), device_name(torch.device(args.device)), args.dtype, torch.__version__,
        time.time() - start)
    print(note)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"note": note, "rows": rows}, f, indent=1, sort_keys=True)
    return 0 if made == len(folders) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
