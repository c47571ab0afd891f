"""Running a split (AutoSplit's AutoRunner): the sub-models one after
another, CPU ones on onnxruntime and device ones compiled to Forge and run
on the stand-in, each fed only tensors `graph_infos.json` lists.

`mode="cpu"` runs the device sub-models' ONNX on onnxruntime too, which
tells a partitioning bug (the outputs differ in this mode) from a lowering
bug (they differ only in the device mode).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from forge_opt.check.engine import compile_model, expected_outputs, run_compiled
from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.folder import read_split
from forge_opt.split.plan import DEVICE


def _with_weights(model: onnx.ModelProto, folder: Path) -> onnx.ModelProto:
    """A copy of `model` with its external weights read in (by offset and
    length from the split folder's files, as onnxruntime reads them: onnx's
    own reader refuses the hard links a split makes to the model's data)."""
    loaded = onnx.ModelProto()
    loaded.CopyFrom(model)
    for t in loaded.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in t.external_data}
        with open(folder / entries["location"], "rb") as f:
            f.seek(int(entries.get("offset", 0)))
            length = entries.get("length")
            t.raw_data = f.read(int(length)) if length is not None else f.read()
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT
    return loaded


def run_split(folder: Path, inputs: dict[str, np.ndarray], mode: str = "device") -> dict[str, np.ndarray]:
    """The model's outputs (by name) from its split in `folder`."""
    if mode not in ("device", "cpu"):
        raise ForgeOptError(f"mode '{mode}' is neither 'device' nor 'cpu'")
    infos, graphs = read_split(folder)
    tensors = infos["tensors"]
    wanted = [name for name, t in tensors.items() if t["attr"] == "input"]
    missing = [name for name in wanted if name not in inputs]
    if missing:
        raise ForgeOptError(f"no value given for the model input '{missing[0]}'")
    values = {name: np.asarray(inputs[name]) for name in wanted}
    for g in graphs:
        # the weights stay in their files: onnxruntime and the importer read them there
        model = onnx.load(g.model_path, load_external_data=False)
        feeds = {x: values[x] for x in g.inputs}
        if g.device == DEVICE and mode == "device":
            compiled = compile_model(model, g.model_path.parent)
            compiled.model = _with_weights(model, g.model_path.parent)  # what Forge loads its parameters from
            outputs = run_compiled(compiled, [feeds[x] for x in compiled.input_names])
        else:
            # onnxruntime, or ONNX's reference implementation where onnxruntime cannot
            outputs = expected_outputs(model, g.model_path.parent, feeds).outputs
        for name, value in zip(g.outputs, outputs):
            # Forge holds int64 and bool as int32: the next graph gets the declared type back
            values[name] = np.asarray(value).astype(tensors[name]["dtype"], copy=False)
    return {name: values[name] for name, t in tensors.items() if t["attr"] == "output"}
