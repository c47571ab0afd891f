"""How far forge-check's verdict can be trusted, measured both ways.

False matches: wrong programs the checker calls a match. Each model's
emitted program is mutated (one op swapped for a neighbour of the same
signature, the largest weight or computed constant perturbed by 1% (each
element times 1 + 0.01·N(0, 1): a uniform scale would vanish in the next
normalization), two
outputs of one shape swapped, one device's block of a tensor-parallel
plan perturbed, a split's converted module edited) and checked against the
oracle with the verdict rules `forge-check` uses. A mutant is equivalent,
and not counted, when its outputs differ from the unmutated program's by
no more than float32 onnxruntime's own distance to the float64 run (no
checker with a float32 oracle can see such a change; a 1% weight before a
normalization makes one), or, where there is no float64 run, not at all.

False mismatches: the unmutated program against references that differ by
rounding alone (onnxruntime with its graph optimizations on, on one and on
two threads; the model run in float64), each of which must still match.

    python benchmarks/checker_trust.py            # every model of tests/data/models and the examples
    python benchmarks/checker_trust.py --light    # and the onnx package's 9 light models, random weights

Prints a table per model and the totals; nothing is timed. The goal is
0 false matches and 0 false mismatches.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from forge_opt.check.driver import compare_outputs, load_checked, measured
from forge_opt.check.float64 import QUANTIZED, float64_outputs
from forge_opt.check.options import Tolerances
from forge_opt.check.report import MATCH, verdict
from forge_opt.execution.engine import Compiled, compile_model, index_bounds, random_inputs, run_compiled
from forge_opt.execution.oracle import expected_outputs, onnxruntime_outputs
from forge_opt.frontends.onnx.shapes import symbol_names
from forge_opt.tools.gen_multichip import ENTRIES

ROOT = Path(__file__).resolve().parent.parent

#: each Forge function's neighbour of the same signature: the swap a wrong lowering could make
NEIGHBOUR = {
    "Add": "Subtract", "Subtract": "Add", "Multiply": "Add", "Divide": "Multiply", "Max": "Min", "Min": "Max",
    "Relu": "Sigmoid", "Sigmoid": "Tanh", "Tanh": "Sigmoid", "Exp": "Sigmoid", "Sqrt": "Abs", "Gelu": "Relu",
    "Reciprocal": "Sqrt", "Greater": "Less", "Less": "Greater", "ReduceSum": "ReduceAvg", "ReduceAvg": "ReduceSum",
    "Sine": "Cosine", "Cosine": "Sine",
}


@dataclasses.dataclass
class Tally:
    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    equivalents: list[str] = dataclasses.field(default_factory=list)
    false_matches: list[str] = dataclasses.field(default_factory=list)
    variants: int = 0
    false_mismatches: list[str] = dataclasses.field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.mutants += other.mutants
        self.killed += other.killed
        self.equivalent += other.equivalent
        self.equivalents += other.equivalents
        self.false_matches += other.false_matches
        self.variants += other.variants
        self.false_mismatches += other.false_mismatches


#: the sizes docs/multichip.md checks a family at, where 16 for every symbol would not do (GLPN's 3 channels)
FAMILY_DIMS = {e.file: dict(e.dims) for e in ENTRIES if e.dims}


def sizes_for(model: onnx.ModelProto) -> dict[str, int]:
    """Symbolic input sizes: 1 for a batch, 16 otherwise (a sum of symbols,
    Optimum's total length, is sized from its parts)."""
    symbols = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return {s: 1 if "batch" in s else 16 for s in symbols if symbol_names(s) == [s]}


def models(light: bool = False) -> list[tuple[str, Path | onnx.ModelProto]]:
    found: list[tuple[str, Path | onnx.ModelProto]] = []
    for path in sorted((ROOT / "tests" / "data" / "models").glob("*.onnx")):
        if not path.stem.endswith("_merged"):  # a run-time If: forge-split's, checked below as a split
            found.append((path.stem, path))
    found += [(p.stem, p) for p in sorted((ROOT / "examples").glob("*.onnxtxt"))]
    found += [("deep_cnn_sigmoid", deep_cnn_sigmoid()), ("qdq_cnn", qdq_cnn())]
    if light:  # with random weights: as shipped, every weight is one repeated number and most mutants change nothing
        from onnx.backend import test as backend_test

        sys.path.insert(0, str(ROOT / "tests"))
        from model_helpers import randomize_constant_weights  # pyright: ignore[reportMissingImports]

        for path in sorted((Path(backend_test.__file__).parent / "data" / "light").glob("*.onnx")):
            found.append((path.stem.removeprefix("light_"), randomize_constant_weights(onnx.load(str(path)))))
    return found


def deep_cnn_sigmoid(depth: int = 10, seed: int = 0) -> onnx.ModelProto:
    """A deep CNN (Conv, BatchNormalization, Relu) ending in the sigmoid of
    large negative logits: a near-constant map whose differences are
    rounding, the case a fixed PCC calls a mismatch."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    nodes, inits, x, c = [], [], "x", 3
    for k in range(depth):
        w = (rng.standard_normal((8, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}")]
        for name, value in (("scale", 1 + 0.1 * rng.standard_normal(8)), ("bias", 0.1 * rng.standard_normal(8)),
                            ("mean", 0.1 * rng.standard_normal(8)), ("var", 1 + 0.1 * rng.random(8))):
            inits.append(numpy_helper.from_array(value.astype(np.float32), f"{name}{k}"))
        nodes += [helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1], name=f"conv{k}"),
                  helper.make_node("BatchNormalization", [f"c{k}", f"scale{k}", f"bias{k}", f"mean{k}", f"var{k}"],
                                   [f"b{k}"], name=f"bn{k}"),
                  helper.make_node("Relu", [f"b{k}"], [f"r{k}"], name=f"relu{k}")]
        x, c = f"r{k}", 8
    inits += [numpy_helper.from_array((rng.standard_normal((1, 8, 1, 1)) * 0.05).astype(np.float32), "head"),
              numpy_helper.from_array(np.array([-12.0], np.float32), "head_bias")]
    nodes += [helper.make_node("Conv", [x, "head", "head_bias"], ["logits"], name="head"),
              helper.make_node("Sigmoid", ["logits"], ["map"], name="sigmoid")]
    graph = helper.make_graph(nodes, "deep_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("map", TensorProto.FLOAT, [1, 1, 32, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def qdq_cnn() -> onnx.ModelProto:
    """The tiny CNN quantized as onnxruntime's quantizer writes it: QDQ,
    per-channel int8 weights."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    source = ROOT / "tests" / "data" / "models" / "tiny_cnn_opset17.onnx"
    name = onnx.load(str(source)).graph.input[0].name
    shape = [d.dim_value or 1 for d in onnx.load(str(source)).graph.input[0].type.tensor_type.shape.dim]

    class Calibration(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.batches = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "qdq.onnx"
        quantize_static(str(source), str(out), Calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        return onnx.load(str(out))


def judge(model, base, feeds, want, got: dict[str, np.ndarray]) -> int:
    """forge-check's verdict of outputs `got` against the reference `want`,
    by the check driver itself."""
    results = compare_outputs(model, want, got, Tolerances(), base=base, feeds=feeds)
    return verdict(results, len(want))[0]


def judge_variant(model, other, want, exact, got: dict[str, np.ndarray]) -> int:
    """The verdict against a reference `other`, by the driver's rules with
    the float64 run `exact` made once: the fixed rules against `other`, then
    for a float32 output that fails them the budget, which measures the
    program against `exact` with float32 onnxruntime's (`want`'s) own
    error, whichever reference the fixed rules used."""
    results = compare_outputs(model, other, got, Tolerances())
    if exact is not None:
        results = measured(model, results, want, got, exact)
    return verdict(results, len(other))[0]


def program_mutants(compiled: Compiled, outputs: list[str]) -> list[tuple[str, Callable[[list], list[np.ndarray]]]]:
    """(name, run) for each mutant of one compiled program."""
    source = compiled.emitted.source
    mutants = []
    calls = re.findall(r"forge\.op\.(\w+)\(", source)
    for kind in dict.fromkeys(calls):
        if kind in NEIGHBOUR:
            spots = [m.start() for m in re.finditer(rf"forge\.op\.{kind}\(", source)]
            at = spots[len(spots) // 2]
            edited = source[:at] + source[at:].replace(f"forge.op.{kind}(", f"forge.op.{NEIGHBOUR[kind]}(", 1)
            emitted = dataclasses.replace(compiled.emitted, source=edited)
            mutants.append((f"{kind}->{NEIGHBOUR[kind]}", _runner(dataclasses.replace(compiled, emitted=emitted))))
    floats = [t for t in compiled.model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    if floats:
        largest = max(floats, key=lambda t: int(np.prod(t.dims)))
        model = onnx.ModelProto()
        model.CopyFrom(compiled.model)
        for t in model.graph.initializer:
            if t.name == largest.name:
                t.CopyFrom(numpy_helper.from_array(perturbed(numpy_helper.to_array(t)), t.name))
        mutants.append((f"weight {largest.name} perturbed 1%", _runner(dataclasses.replace(compiled, model=model))))
    constants = {k: v for k, v in compiled.emitted.constants.items() if v.dtype == np.float32 and v.size > 1}
    if constants:
        name = max(constants, key=lambda k: constants[k].size)
        changed = {**compiled.emitted.constants, name: perturbed(constants[name])}
        emitted = dataclasses.replace(compiled.emitted, constants=changed)
        mutants.append((f"constant {name} perturbed 1%", _runner(dataclasses.replace(compiled, emitted=emitted))))
    return mutants


def perturbed(values: np.ndarray, seed: int = 0) -> np.ndarray:
    """Each element times 1 + 0.01·N(0, 1)."""
    noise = np.random.default_rng(seed).standard_normal(values.shape)
    return (values * (1 + 0.01 * noise)).astype(values.dtype)


def _runner(compiled: Compiled) -> Callable[[list], list[np.ndarray]]:
    return lambda arrays: run_compiled(compiled, arrays)


def _distance(a, b) -> float:
    """The largest difference of two outputs where they are not equal (0 when
    equal, infinite when a NaN or an infinity stands against another value)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    if not (a.dtype.kind == "f" and b.dtype.kind == "f"):
        return 0.0 if np.array_equal(a, b) else float("inf")
    a, b = a.astype(np.float64), b.astype(np.float64)
    differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    if not differ.any():
        return 0.0
    with np.errstate(invalid="ignore"):
        return float(np.max(np.abs(a[differ] - b[differ])))


def swapped_outputs(names: list[str], got: list[np.ndarray]) -> list[np.ndarray] | None:
    """The program's outputs with the first two of one shape and dtype swapped."""
    for i in range(len(got)):
        for j in range(i + 1, len(got)):
            if got[i].shape == got[j].shape and got[i].dtype == got[j].dtype:
                out = list(got)
                out[i], out[j] = got[j], got[i]
                return out
    return None


def measure(name: str, source) -> Tally:
    tally = Tally()
    model = onnx.load(str(source), load_external_data=False) if isinstance(source, Path) and source.suffix == ".onnx" \
        else source
    dims = sizes_for(model) if isinstance(model, onnx.ModelProto) else {}
    dims.update(FAMILY_DIMS.get(name, {}))
    loaded = load_checked(source, None, dims=dims)
    model, base = loaded.model, loaded.base
    compiled = compile_model(model, base, shapes=loaded.sizes)
    arrays = random_inputs(compiled.module, 0, index_bounds(model))
    feeds = dict(zip(compiled.input_names, arrays))
    want = expected_outputs(model, base, feeds).outputs
    names = [o.name for o in model.graph.output]
    got = run_compiled(compiled, arrays)
    assert judge(model, base, feeds, want, dict(zip(names, got))) == MATCH, f"{name}: the program itself mismatches"
    exact = float64_outputs(model, base, feeds)[0]
    own = [_distance(w, x) for w, x in zip(want, exact)] if exact is not None else [0.0] * len(want)

    def mutant(label: str, outputs: list[np.ndarray] | None) -> None:
        if outputs is None:
            return
        tally.mutants += 1
        if all(_distance(a, b) <= d for a, b, d in zip(outputs, got, own)):
            tally.equivalent += 1
            tally.equivalents.append(f"{name}: {label}")
        elif judge_variant(model, want, want, exact, dict(zip(names, outputs))) == MATCH:  # the driver's rules
            tally.false_matches.append(f"{name}: {label}")
        else:
            tally.killed += 1

    for label, run in program_mutants(compiled, names):
        try:
            mutant(label, run(arrays))
        except Exception:  # a mutant Forge's rules refuse: killed before it runs
            tally.mutants += 1
            tally.killed += 1
    mutant("two outputs swapped", swapped_outputs(names, got))

    references = {
        "onnxruntime, 1 thread": lambda: onnxruntime_outputs(model, base, feeds, threads=1),
        "onnxruntime optimized, 1 thread": lambda: onnxruntime_outputs(model, base, feeds, optimized=True, threads=1),
        "onnxruntime optimized, 2 threads": lambda: onnxruntime_outputs(model, base, feeds, optimized=True, threads=2),
        "float64": lambda: float64_outputs(model, base, feeds)[0],
    }
    if any(n.op_type in QUANTIZED for n in model.graph.node):
        # onnxruntime's fused int8 kernels are not the model's semantics: on AVX2 without VNNI they
        # saturate 16-bit partial sums (26 quantization steps off on the tiny CNN). Not rounding: left out.
        del references["onnxruntime optimized, 1 thread"], references["onnxruntime optimized, 2 threads"]
    for label, reference in references.items():
        try:
            other = reference()
        except Exception:  # onnxruntime lacks what the model needs: this variant does not apply
            other = None
        if other is None:
            continue
        other = [np.asarray(o).astype(w.dtype) for o, w in zip(other, want)]
        tally.variants += 1
        if judge_variant(model, other, want, exact, dict(zip(names, got))) != MATCH:
            tally.false_mismatches.append(f"{name}: against {label}")
    return tally


def measure_plan(name: str, path: Path, devices: int = 2) -> Tally:
    """Mutants of a tensor-parallel plan: device 1's largest weight block
    perturbed by 1% in its weights file."""
    from forge_opt.split.api import tensor_parallel
    from forge_opt.split.runner import assemble, run_parallel

    tally = Tally()
    model = onnx.load(str(path))
    loaded = load_checked(path, None, dims=sizes_for(model))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tp"
        plan = tensor_parallel(path, folder, devices, shapes=loaded.sizes.shapes, dims=loaded.sizes.dims)
        compiled = compile_model(loaded.model, loaded.base, shapes=loaded.sizes)
        arrays = random_inputs(compiled.module, 0, index_bounds(loaded.model))
        feeds = dict(zip(compiled.input_names, arrays))
        want = expected_outputs(loaded.model, loaded.base, feeds).outputs
        index = onnx.load(str(folder / "dev1" / "weights.onnx"), load_external_data=False)
        # the largest block but the embedding's (random token ids may read none of device 1's rows)
        blocks = [t for t in index.graph.initializer if "emb" not in t.name and "wte" not in t.name]
        block = max(blocks, key=lambda t: int(np.prod(t.dims)))
        info = {e.key: e.value for e in block.external_data}
        data = np.memmap(folder / "dev1" / "weights.bin", np.float32, "r+", int(info.get("offset", 0)),
                         (int(info["length"]) // 4,))
        original, _ = assemble(plan, run_parallel(folder, feeds))
        data[:] = perturbed(np.asarray(data))
        data.flush()
        del data
        got, _ = assemble(plan, run_parallel(folder, feeds))
        tally.mutants += 1
        if all(np.array_equal(got[n], original[n]) for n in got):
            tally.equivalent += 1
            tally.equivalents.append(f"{name} (P={devices}): device 1's block {block.name}")
        elif judge(loaded.model, loaded.base, feeds, want, got) == MATCH:
            tally.false_matches.append(f"{name} (P={devices}): device 1's block {block.name} perturbed 1%")
        else:
            tally.killed += 1
    return tally


def measure_split(name: str, path: Path) -> Tally:
    """A mutant of a split: its first converted module computes a neighbour
    of its first swappable op."""
    from forge_opt.check.driver import model_feeds
    from forge_opt.split.api import convert, run_split, split_model

    tally = Tally()
    loaded = load_checked(path, None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "split"
        split_model(path, folder)
        modules = [m for m in convert(folder) if m.suffix == ".py"]
        feeds, _ = model_feeds(loaded.model, loaded.base, None, 0)
        want = expected_outputs(loaded.model, loaded.base, feeds).outputs
        for module in modules:
            text = module.read_text()
            kind = next((k for k in re.findall(r"forge\.op\.(\w+)\(", text) if k in NEIGHBOUR), None)
            if kind is None:
                continue
            from forge_opt.files import write_text

            write_text(module, text.replace(f"forge.op.{kind}(", f"forge.op.{NEIGHBOUR[kind]}(", 1))
            # the edit is the user's: the module must still be taken as converted from its sub-model
            got = run_split(folder, feeds)
            tally.mutants += 1
            if judge(loaded.model, loaded.base, feeds, want, got) == MATCH:
                tally.false_matches.append(f"{name} split: {module.name} {kind}->{NEIGHBOUR[kind]}")
            else:
                tally.killed += 1
            break
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--light", action="store_true", help="also the onnx package's light models")
    args = parser.parse_args(argv)
    total = Tally()
    print(f"{'model':<28} {'mutants':>8} {'killed':>7} {'equiv':>6} {'false match':>12} {'variants':>9} "
          f"{'false mismatch':>15}")
    runs = [(name, lambda name=name, source=source: measure(name, source)) for name, source in models(args.light)]
    runs += [("llm_llama plan", lambda: measure_plan("llm_llama", ROOT / "tests/data/models/llm_llama.onnx")),
             ("gpt2 plan", lambda: measure_plan("gpt2_opset17", ROOT / "tests/data/models/gpt2_opset17.onnx")),
             ("detector split", lambda: measure_split("detector", ROOT / "examples/detector.onnxtxt"))]
    for name, run in runs:
        try:
            tally = run()
        except Exception as e:  # a model the checker cannot take at all: named, not counted
            print(f"{name:<28} skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        total.add(tally)
        print(f"{name:<28} {tally.mutants:>8} {tally.killed:>7} {tally.equivalent:>6} {len(tally.false_matches):>12} "
              f"{tally.variants:>9} {len(tally.false_mismatches):>15}")
    print(f"{'total':<28} {total.mutants:>8} {total.killed:>7} {total.equivalent:>6} {len(total.false_matches):>12} "
          f"{total.variants:>9} {len(total.false_mismatches):>15}")
    for line in total.equivalents:
        print(f"equivalent: {line}")
    for line in total.false_matches:
        print(f"false match: {line}")
    for line in total.false_mismatches:
        print(f"false mismatch: {line}")
    return 1 if total.false_matches or total.false_mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
