"""An LLM's accuracy and memory in each format Tenstorrent hardware runs it
in: `forge-check MODEL --decode N --devices P` with the model as exported,
in bfloat16, and in bfloat16 with bfp8_b or bfp4_b matmul weights. Prints,
per format, the teacher-forced top-1 and top-5 agreement with onnxruntime's
tokens, the smallest PCC of the logits over the steps, the bytes each
device stores and the wall time of the check.

    python benchmarks/llm_formats.py MODEL.onnx [--devices 8] [--steps 16] [--prompt 8]

The model of `benchmarks/tp_scale.py` (the 0.85B LLaMA, float16, built
locally) is the one `benchmarks/README.md` reports. Its weights are random:
near-uniform logits make ties, so agreement is lower than a trained model's.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
import onnx

from forge_opt.check.decode import check_decode
from forge_opt.execution.engine import index_bounds

FORMATS = [("float32", ""), ("bfloat16", ""), ("bfloat16", "bfp8_b"), ("bfloat16", "bfp4_b")]  # (data, weights)


def prompt_feeds(model_path: Path, prompt: int) -> dict[str, np.ndarray]:
    """A prefill as Optimum's runtime passes it: `prompt` random token ids
    (seeded), a mask of ones, positions from 0, an empty past."""
    model = onnx.load(model_path, load_external_data=False)
    vocab = index_bounds(model).get("input_ids", 1000)
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    for i in model.graph.input:
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        elem = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, vocab, (1, prompt)).astype(elem)
        elif i.name == "attention_mask":
            feeds[i.name] = np.ones((1, prompt), elem)
        elif i.name == "position_ids":
            feeds[i.name] = np.arange(prompt, dtype=elem)[None, :]
        else:  # past_key_values.*: [batch, kv heads, 0, head size]
            feeds[i.name] = np.zeros((1, dims[1], 0, dims[3]), elem)
    return feeds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--formats", nargs="+", default=[f"{d}/{w}" if w else d for d, w in FORMATS],
                        help="DATA or DATA/WEIGHTS, e.g. bfloat16/bfp8_b (default: all four)")
    args = parser.parse_args()
    feeds = prompt_feeds(args.model, args.prompt)
    print(f"{args.model.name}: {args.steps} greedy steps after a prompt of {args.prompt}, {args.devices} devices")
    print(f"{'data format':<12} {'weights':<9} {'top-1':>7} {'top-5':>7} {'min pcc':>9} {'bytes per device':>17} "
          f"{'verdict':>8} {'seconds':>8}")
    for data, _, weights in (f.partition("/") for f in args.formats):
        start = time.perf_counter()
        report = check_decode(args.model, args.steps, feeds, devices=args.devices, data_format=data,
                              weight_format=weights)
        seconds = time.perf_counter() - start
        text = report.format()
        accuracy = re.search(r"top-1 (\d+/\d+) \(\d+%\), top-5 (\d+/\d+)", text)
        if accuracy is None:  # as exported: greedy and teacher-forced agree while the tokens do
            equal = re.search(r"decode: (\d+/\d+) tokens equal", text)
            top1 = top5 = equal.group(1) if equal else "-"
        else:
            top1, top5 = accuracy.groups()
        pccs = [r.pcc for r in report.outputs if r.name.startswith("logits") and r.pcc == r.pcc]
        device0 = next((line.split() for line in report.summary.splitlines() if line.startswith("0 ")), None)
        stored = int(device0[-1].replace(",", "")) if device0 else 0
        verdict = ("match", "mismatch", "error")[report.status]
        label = "as exported" if data == "float32" else data  # float32 converts nothing: a float16 export stays
        print(f"{label:<12} {weights or 'same':<9} {top1:>7} {top5:>7} {min(pccs, default=float('nan')):>9.5f} "
              f"{stored:>17,} {verdict:>8} {seconds:>8.0f}", flush=True)
        if report.status == 2:
            print(f"  {report.error}")
        failed = [r for r in report.outputs if not r.ok]
        for r in failed[:3]:
            held = f"tolerance {r.tolerance:.3g}" if r.tolerance else f"pcc {r.pcc:.6f}"
            print(f"  {r.name}: {r.reason or 'values'} (max abs error {r.max_abs_error:.3g}, {held})")
        if len(failed) > 3:
            print(f"  and {len(failed) - 3} more")


if __name__ == "__main__":
    main()
