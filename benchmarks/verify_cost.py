"""What a verdict costs: `forge-check MODEL` (compile, run on the stand-in,
onnxruntime as the oracle, and the wide run and probes where an output
needs them) against onnxruntime's own run of the model on the same inputs,
the floor any check with it as its oracle pays. Prints wall time and peak
RSS (medians of `--runs`, processes taken in turn) and their ratios; the
goal (issue 51) is at most 3 times the time and 1.5 times the memory.

    python benchmarks/verify_cost.py MODEL.onnx [--runs 3] [--dim NAME=N ...] [--baseline CHECKOUT]

Inputs are made once, as forge-check makes random ones (seed 0), and saved
for both processes: the same feeds for the oracle alone and for the check.

The model is built locally, not checked in (1.4 GB): the float16 LLaMA of
benchmarks/tp_scale.py's recipe at 12 layers (0.67B parameters with its
untied head), as Optimum exports it with `--dtype fp16` (the export venv of
tests/data/models/make_llm_decoders.py),

    transformers.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
        num_hidden_layers=12, num_attention_heads=32, num_key_value_heads=8)
    -> LlamaForCausalLM(config).half().save_pretrained(DIR)
    optimum-cli export onnx --model DIR --task text-generation-with-past --dtype fp16 OUT

    onnx.save(onnx.load(OUT/model.onnx), MODEL.onnx, save_as_external_data=True,
              location="model.onnx_data")

(the `model.onnx` and `model.onnx_data` Optimum writes over 2 GiB). The
script runs both processes from another folder than the model's: a check
must read external data where the model is.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from statistics import median

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import importing, whole_process

from forge_opt.files import save_arrays

_ORACLE = ("import numpy as np\nfrom forge_opt.execution.oracle import onnxruntime_outputs\n"
           "from forge_opt.frontends.onnx import load_model\n"
           "model, base = load_model(sys.argv[1])\n"
           "onnxruntime_outputs(model, base, dict(np.load(sys.argv[2])))")
_CHECK = ("from forge_opt.tools.forge_check import main\n"
          "sys.argv = ['forge-check', sys.argv[1], '--inputs', sys.argv[2]]\n"
          "try:\n    main()\nexcept SystemExit as done:\n"
          "    if done.code not in (0, 1, 3):  # no verdict: its cost is not a verdict's\n"
          "        raise SystemExit(f'forge-check reached no verdict (exit {done.code})')")


def feeds(model: Path, dims: list[str]) -> dict[str, np.ndarray]:
    """Seeded random inputs at the sizes `dims` give, as forge-check makes them."""
    from forge_opt.check.driver import load_checked, model_feeds
    from forge_opt.frontends.onnx.shapes import InputShapes

    chosen = InputShapes.parse((), dims)
    loaded = load_checked(str(model), None, dims=dict(chosen.dims))
    return model_feeds(loaded.model, loaded.base, None, 0, loaded.sizes)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dim", action="append",
                        default=["batch_size=1", "sequence_length=16", "past_sequence_length=16"])
    parser.add_argument("--baseline", type=Path, help="a checkout of forge-opt to compare against")
    args = parser.parse_args()
    model = args.model.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = Path(tmp) / "inputs.npz"
        save_arrays(inputs, feeds(model, args.dim))
        bodies = {"onnxruntime alone (oracle)": _ORACLE, "forge-check": _CHECK}
        if args.baseline is not None:
            prefix = importing(args.baseline, Path(tmp) / "baseline")
            bodies["baseline forge-check"] = prefix + _CHECK
        samples: dict[str, list[tuple[float, float]]] = {label: [] for label in bodies}
        os.chdir(tmp)  # not the model's folder
        for _ in range(args.runs):
            for label, body in bodies.items():
                samples[label].append(whole_process(body, model, str(inputs)))
    rows = {label: (median(w for w, _ in s), median(r for _, r in s)) for label, s in samples.items()}
    floor_time, floor_rss = rows["onnxruntime alone (oracle)"]
    print(f"{model.name}; median of {args.runs}; inputs {' '.join(args.dim)}")
    print(f"{'process':<28} {'wall s':>8} {'x oracle':>9} {'peak RSS MB':>12} {'x oracle':>9}")
    for label, (wall, rss) in rows.items():
        print(f"{label:<28} {wall:>8.2f} {wall / floor_time:>9.2f} {rss:>12.0f} {rss / floor_rss:>9.2f}")


if __name__ == "__main__":
    main()
