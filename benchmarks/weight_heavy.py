"""Compile cost of weight-heavy models against the `onnx.load` floor.

Models, built here (no downloads):

- mlp:  a 24-layer MLP with 2048x2048 float32 weights (384 MB; smaller with
        --layers/--width);
- bert: BERT-base (12 layers, hidden 768, 110M parameters, 418 MB) with
        random weights, exported by PyTorch's TorchScript exporter at
        opset 17. Needs torch and transformers, which forge-opt does not;
        skipped with a note when they are missing.

For each it times whole processes (medians of --runs), each against the
floor measured in the same run:

- floor:   python, `import onnx`, `onnx.load(model)`
- import:  `forge-opt MODEL -o /dev/null` (load, shape inference, import,
           print with weights elided)
- compile: `forge-opt MODEL -p onnx-to-forge -t forge-python -o model.py`

and prints peak RSS against the file size and an in-process breakdown by
stage.

    python benchmarks/weight_heavy.py [--models mlp bert] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import PROCESSES, medians, print_stages, stages


def mlp(path: Path, layers: int, width: int) -> str:
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32)
        b = rng.standard_normal((width,), dtype=np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"add{i}"),
            helper.make_node("Relu", [f"add{i}"], [f"h{i}"], name=f"relu{i}"),
        ]
        x = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return f"{layers}-layer MLP, {width}x{width} f32 weights"


def bert_base(path: Path) -> str:
    import torch  # pyright: ignore[reportMissingImports]  (optional: only to export the model)
    import transformers  # pyright: ignore[reportMissingImports]

    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig()).eval()  # the defaults are BERT-base

    class LastHiddenState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = model

        def forward(self, input_ids):
            return self.bert(input_ids)[0]

    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState(), (torch.randint(0, 30522, (1, 128)),), str(path),
            input_names=["input_ids"], output_names=["last_hidden_state"],
            opset_version=17, dynamo=False, do_constant_folding=False,
        )
    return "BERT-base (torch export, opset 17, sequence 128)"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["mlp", "bert"], choices=["mlp", "bert"])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    breakdown = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path = Path(tmp) / f"{name}.onnx"
            if name == "mlp":
                title = mlp(path, args.layers, args.width)
            else:
                try:
                    title = bert_base(path)
                except ImportError as e:
                    print(f"bert: skipped, {e.name} is not installed (pip install torch transformers)\n")
                    continue
            size = path.stat().st_size / 2**20
            rows = {label: medians(body, path, args.runs) for label, body in PROCESSES.items()}
            floor = rows["onnx.load (floor)"][0]
            nodes = len(onnx.load(path, load_external_data=False).graph.node)
            print(f"{name}: {title}; {size:.0f} MB, {nodes} nodes; median of {args.runs}")
            print(f"{'process':<20} {'wall s':>8} {'x floor':>8} {'peak RSS MB':>12} {'x file':>7}")
            for label, (wall, rss, _) in rows.items():
                print(f"{label:<20} {wall:>8.2f} {wall / floor:>8.2f} {rss:>12.0f} {rss / size:>7.2f}")
            print()
            breakdown.append((name, stages(path)))
    if breakdown:
        print_stages(breakdown)


if __name__ == "__main__":
    main()
