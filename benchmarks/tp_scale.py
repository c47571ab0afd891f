"""Tensor parallelism at LLM scale: a LLaMA-architecture decoder of about 1B
parameters in float16 with external data, as Optimum exports it, compiled
for P devices (`forge-opt MODEL -p 'onnx-to-forge{devices=P}' -o DIR/`).
Prints wall time and peak RSS (medians of `--runs`) against copying the
weight file once (the floor a compile that writes every weight once must
pay) and against compiling for one device.

    python benchmarks/tp_scale.py MODEL.onnx [--devices 8] [--runs 3] [--dim NAME=N ...] [--sync]
        [--baseline CHECKOUT]

`--baseline` adds the P-device compile of another checkout (`git worktree
add /tmp/baseline main~3`) to the same interleaved rounds: on a shared
machine whose disk and CPU drift from one minute to the next, only runs
taken in turn show a change.

The model is built locally, not checked in (1.8 GB): with the export venv of
tests/data/models/make_llm_decoders.py and `onnxruntime==1.32.0` (Optimum's
`--dtype fp16` runs it to fix the dynamic axes),

    transformers.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8)
    -> LlamaForCausalLM(config).half().save_pretrained(DIR)
    optimum-cli export onnx --model DIR --task text-generation-with-past --dtype fp16 OUT
    onnx.save(onnx.load(OUT/model.onnx), MODEL.onnx, save_as_external_data=True)

The Llama-3.1-8B-shaped recipe (2 of its layers at full width, its 128,256-token vocabulary,
untied head: 2,900 MB; ~5 min to build) is the same with

    transformers.LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=2, num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=2048)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from statistics import median

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import importing, whole_process

_FORGE_OPT = "from forge_opt.tools.forge_opt import main\nsys.argv = ['forge-opt', sys.argv[1], {args}]\nmain()"


def _weight_file(model: Path) -> Path:
    """The one external-data file the model's weights are in (onnx.save names it
    after a fresh UUID unless given `location=`)."""
    index = onnx.load(str(model), load_external_data=False)
    places = {e.value for t in index.graph.initializer for e in t.external_data if e.key == "location"}
    if len(places) != 1:
        sys.exit(f"{model}: expected its weights in one external-data file, found {sorted(places) or 'none'}")
    return model.parent / places.pop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dim", action="append",
                        default=["batch_size=1", "sequence_length=1", "past_sequence_length=16"])
    parser.add_argument("--sync", action="store_true",
                        help="time each process until what it wrote is on disk (os.sync before it exits), "
                             "not only in the page cache")
    parser.add_argument("--baseline", type=Path, help="a checkout of forge-opt to compare against")
    args = parser.parse_args()
    weights = _weight_file(args.model)
    data_mb = weights.stat().st_size / 2**20
    dims = ", ".join(f"'--dim', '{d}'" for d in args.dim)
    out = "os.path.join(sys.argv[2], 'out')"
    bodies = {
        "copy the weight file": f"import shutil\nshutil.copyfile({str(weights)!r}, {out})",
        "forge-opt, 1 device": _FORGE_OPT.format(
            args=f"{dims}, '-p', 'onnx-to-forge', '-t', 'forge-python', '-o', {out}"),
        f"forge-opt, {args.devices} devices": _FORGE_OPT.format(
            args=f"{dims}, '-p', 'onnx-to-forge{{devices={args.devices}}}', '-t', 'forge-python', '-o', {out} + '/'"),
    }
    if args.baseline is not None:
        links = tempfile.TemporaryDirectory()  # removed when the script ends
        prefix = importing(args.baseline, Path(links.name) / "baseline")
        bodies[f"baseline, {args.devices} devices"] = prefix + bodies[f"forge-opt, {args.devices} devices"]
    if args.sync:  # forge-opt leaves by os._exit: sync on the way out
        bodies = {label: "_leave = os._exit\nos._exit = lambda code: (os.sync(), _leave(code))\n" + body + "\nos.sync()"
                  for label, body in bodies.items()}
    samples: dict[str, list[tuple[float, float]]] = {label: [] for label in bodies}
    # Rounds interleave the processes. Each writes into an empty folder with the page cache's
    # dirty pages flushed first, untimed: a run must not pay for the last one's writes or removal.
    for _ in range(args.runs):
        for label, body in bodies.items():
            with tempfile.TemporaryDirectory() as tmp:
                os.sync()
                samples[label].append(whole_process(body, args.model, tmp))
            os.sync()
    rows = {label: (median(w for w, _ in s), median(r for _, r in s)) for label, s in samples.items()}
    floor = rows["copy the weight file"][0]
    until = "on disk" if args.sync else "in the page cache"
    print(f"{args.model.name}: {data_mb:,.0f} MB of weights; median of {args.runs}; timed until written {until}")
    print(f"{'process':<24} {'wall s':>8} {'x copy':>7} {'peak RSS MB':>12} {'x weights':>10}")
    for label, (wall, rss) in rows.items():
        print(f"{label:<24} {wall:>8.2f} {wall / floor:>7.2f} {rss:>12.0f} {rss / data_mb:>10.3f}")


if __name__ == "__main__":
    main()
