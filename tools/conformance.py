"""The ONNX backend node tests through the whole pipeline.

Each case is imported, lowered with `onnx-to-forge`, printed as Forge
Python, run on the Forge stand-in and compared with the outputs the case
ships, with the case's own tolerances. Integer inputs (shapes, axes, sizes,
indices) are compiled as constants, as Forge needs static shapes (onnx-mlir's
CONSTANT_INPUT mode). A second figure runs the cases that fail whole
through the split path: device sub-models where Forge can, CPU ones on
onnxruntime elsewhere.

    python -m forge_opt.tools.conformance            # print the totals
    python -m forge_opt.tools.conformance --executor xla   # the same cases run as StableHLO on XLA CPU
    python -m forge_opt.tools.conformance --write    # regenerate docs/supported_ops.md and
                                                     # tests/conformance_*expectations.txt
                                                     # (run from the checkout's root)
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Paths in a checkout of forge-opt (run the tool from its root).
EXPECTATIONS = Path("tests") / "conformance_expectations.txt"
SPLIT_EXPECTATIONS = Path("tests") / "conformance_split_expectations.txt"
TABLE = Path("docs") / "supported_ops.md"


@dataclass
class Result:
    name: str
    op_type: str
    opset: int
    passed: bool
    reason: str = ""
    forge_ops: set[str] = field(default_factory=set)
    float32: bool = True


def node_cases() -> list:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return sorted(collect_testcases(None), key=lambda c: c.name)


_ALIASES = {"sce": "SoftmaxCrossEntropyLoss", "nllloss": "NegativeLogLikelihoodLoss"}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _op_type(case) -> str:
    """The op a case tests: its single node's, or for an expanded function
    body the op named by the case (`test_layer_normalization_..._expanded`)."""
    import onnx.defs

    nodes = [n for n in case.model.graph.node if n.op_type != "Constant"] or list(case.model.graph.node)
    if len(nodes) == 1:
        return nodes[0].op_type
    rest = case.name.removeprefix("test_")
    for alias, op in _ALIASES.items():
        if rest.startswith(alias + "_"):
            return op
    names = sorted((s.name for s in onnx.defs.get_all_schemas()), key=lambda n: -len(_snake(n)))
    for name in names:
        if rest == _snake(name) or rest.startswith(_snake(name) + "_"):
            return name
    return nodes[0].op_type


def _float32_only(case) -> bool:
    """float32 cases: every tensor float32, int32/64 or bool, one float32."""
    from onnx import TensorProto

    values = [*case.model.graph.input, *case.model.graph.output]
    elems = [vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0 for vi in values]
    allowed = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL)
    return all(e in allowed for e in elems) and TensorProto.FLOAT in elems


def _reason(message: str) -> str:
    """A failure message without the node's name and numbers, to group by."""
    message = message.splitlines()[0] if message else "unknown"
    message = re.sub(r"node '[^']*' \(([^)]*)\)", r"\1", message)
    return message[:160]


def _array(x):
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(x) if isinstance(x, TensorProto) else x


def _prepare(case):
    """The case's Result so far, its model with integer inputs frozen, the
    feeds of the other inputs and the expected outputs; or a failed Result."""
    from onnx import TensorProto

    from forge_opt.diagnostics import ForgeOptError
    from forge_opt.frontends.onnx import freeze_inputs

    model = case.model
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    result = Result(case.name, _op_type(case), opset, False, float32=_float32_only(case))
    if any(n.domain not in ("", "ai.onnx") for n in model.graph.node):
        result.reason = "not a default-domain model"
        return result
    if not case.data_sets:
        result.reason = "the case has no data"
        return result
    inputs, expected = case.data_sets[0]
    try:  # ONNX's loader leaves what numpy lacks as TensorProto: ml_dtypes holds it
        inputs, expected = ([_array(x) for x in xs] for xs in (inputs, expected))
    except (TypeError, ValueError) as e:
        result.reason = f"element types numpy does not hold: {e}"
        return result
    names = [i.name for i in model.graph.input]
    feeds = dict(zip(names, inputs))
    # Inputs Forge needs static: integer tensors (shapes, axes, sizes,
    # indices), scalars (pad values, clip bounds) and float operands that
    # say how to compute (Resize's roi and scales).
    configuring = {
        name
        for node in model.graph.node
        for k, name in enumerate(node.input)
        if k in _STATIC_OPERANDS.get(node.op_type, ())
    }
    integer = [  # in graph order, so results do not depend on hashing
        i.name
        for i in model.graph.input
        if i.name in feeds
        and i.type.HasField("tensor_type")
        and (
            i.type.tensor_type.elem_type in (TensorProto.INT64, TensorProto.INT32)
            or np.asarray(feeds[i.name]).size == 1
            or i.name in configuring
        )
    ]
    if integer:
        try:
            model = freeze_inputs(model, {n: feeds[n] for n in integer})
        except ForgeOptError as e:
            result.reason = "does not compile: " + _reason(str(e))
            return result
    rest = {n: v for n, v in feeds.items() if n not in integer}
    return result, model, rest, expected


#: ops whose outputs are random draws: compared with the reference by shape and type alone (another draw
#: equal to the reference's by chance made an expected failure pass, now and then)
RANDOM_OPS = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}


def _compare(result: Result, case, expected, actual, formats: bool = True) -> Result:
    """With `formats`, each output's DataFormat must be the reference's too
    (Forge's `verify`); outputs the CPU computes have numpy's types."""
    from forge_opt.check.compare import compare_output

    if len(actual) != len(expected):
        result.reason = f"{len(actual)} outputs instead of {len(expected)}"
        return result
    drawn = _op_type(case) in RANDOM_OPS
    for want, got in zip(expected, actual):
        want, got = np.asarray(want), np.asarray(got)
        if drawn:
            if want.shape != got.shape or (formats and want.dtype != got.dtype):
                result.reason = f"wrong draw: {got.dtype}{list(got.shape)} for {want.dtype}{list(want.shape)}"
                return result
            continue
        verdict = compare_output("", want, got, rtol=case.rtol, atol=case.atol, formats=formats, scaled=False)
        if not verdict.ok:
            result.reason = "wrong " + (verdict.reason or "values")
            return result
    result.passed = True
    return result


def _guarded(result: Result, run):
    """`run()`'s outputs, or None with the reason in `result`."""
    from forge_opt.diagnostics import ForgeOptError
    from forge_opt.interpreters.forge_standin import ForgeCallError

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return run()
    except ForgeOptError as e:
        result.reason = "does not compile: " + _reason(str(e))
    except ForgeCallError as e:
        result.reason = "Forge rejects a call: " + _reason(str(e))
    except Exception as e:  # a bug of ours: keep it visible
        result.reason = f"crash: {type(e).__name__}: " + _reason(str(e))
    return None


#: Operand positions of float inputs that configure an op rather than carry data.
_STATIC_OPERANDS = {"Resize": (1, 2, 3), "Upsample": (1,)}


def _judged(case, run, formats: bool = True) -> Result:
    """The prepared case's outputs as `run(result, model, feeds)` computes
    them, compared with those the case ships."""
    prepared = _prepare(case)
    if isinstance(prepared, Result):
        return prepared
    result, model, feeds, expected = prepared
    actual = _guarded(result, lambda: run(result, model, {n: np.asarray(v) for n, v in feeds.items()}))
    return result if actual is None else _compare(result, case, expected, actual, formats)


def run_case(case, executor: str = "standin") -> Result:
    """The case compiled whole to Forge and run on the stand-in (or, with
    `executor="xla"`, its StableHLO form on XLA CPU)."""
    from forge_opt.execution.engine import compile_model, run_compiled, run_compiled_on_xla
    from forge_opt.frontends.onnx.shapes import InputShapes

    run_program = run_compiled_on_xla if executor == "xla" else run_compiled

    def run(result, model, feeds):
        compiled = compile_model(model, shapes=InputShapes().with_arrays(model.graph, feeds))
        result.forge_ops = {op.name for op in compiled.module.walk() if op.name.startswith("forge.")}
        return run_program(compiled, [feeds[n] for n in compiled.input_names])

    return _judged(case, run)


def run_case_split(case) -> Result:
    """The case through the split path: device sub-models where Forge can,
    CPU ones (onnxruntime) elsewhere. `forge_ops` holds the devices used."""
    import tempfile

    from forge_opt.frontends.onnx.shapes import InputShapes
    from forge_opt.split.api import convert, run_split, split_model

    def run(result, model, feeds):
        with tempfile.TemporaryDirectory() as tmp:
            shapes = InputShapes().with_arrays(model.graph, feeds).shapes
            _, plan = split_model(model, Path(tmp) / "split", shapes=shapes)
            result.forge_ops = {g.device for g in plan.graphs}
            convert(Path(tmp) / "split")
            outputs = run_split(Path(tmp) / "split", feeds)
        return [outputs[o.name] for o in model.graph.output]

    # the runner gives each output its declared type back (the CPU has no DataFormats)
    return _judged(case, run, formats=False)


def run_case_parallel(case, devices: int = 2) -> Result:
    """The case compiled for `devices` devices (`onnx-to-forge{devices=P}`,
    its plan written and run, every device on the stand-in) and compared
    with the outputs the case ships. A refusal must name the node."""
    import tempfile

    from forge_opt.frontends.onnx import resolve_model
    from forge_opt.frontends.onnx.shapes import InputShapes
    from forge_opt.split.parallel import compile_parallel
    from forge_opt.split.runner import assemble, run_parallel
    from forge_opt.targets.devices import write_parallel
    from forge_opt.transforms.compile_options import CompileOptions

    def run(result, model, feeds):
        with tempfile.TemporaryDirectory() as tmp:
            resolved = resolve_model(model, InputShapes().with_arrays(model.graph, feeds))
            module = compile_parallel(resolved, CompileOptions(devices))
            plan = write_parallel(module, Path(tmp) / "tp")
            outputs, differ = assemble(plan, run_parallel(Path(tmp) / "tp", feeds))
        if differ:
            raise ValueError(f"the devices' outputs differ ({', '.join(differ)})")
        return [outputs[o.name] for o in model.graph.output]

    return _judged(case, run)


def read_expectations(path: Path) -> dict[str, str]:
    expected: dict[str, str] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, _, reason = line.partition(":")
                expected[name.strip()] = reason.strip()
    return expected


def run_split_figure(cases, results: list[Result]) -> list[Result]:
    """Each case through the split path. One that passes whole passes there
    too, as one device sub-model (placement asks the same lowering); the
    others are split and run."""
    return [whole if whole.passed else run_case_split(case) for case, whole in zip(cases, results)]


def write_expectations(results: list[Result], path: Path = EXPECTATIONS, what: str = "") -> None:
    lines = [
        f"# ONNX backend node test cases that do not pass yet{what}, with the reason.",
        "# Generated by `python -m forge_opt.tools.conformance --write`; a case that",
        "# passes while listed here fails the conformance test, so the list stays true.",
    ]
    lines += [f"{r.name}: {r.reason}" for r in results if not r.passed]
    path.write_text("\n".join(lines) + "\n")


def write_table(results: list[Result], split: list[Result], path: Path = TABLE) -> None:
    import onnx

    by_op: dict[str, list[Result]] = collections.defaultdict(list)
    for r in results:
        by_op[r.op_type].append(r)
    full = [op for op, rs in by_op.items() if all(r.passed for r in rs if r.float32) and any(r.float32 for r in rs)]
    passed = sum(r.passed for r in results)
    split_of = {r.name: r for r in split}
    lines = [
        "# Supported ONNX ops",
        "",
        f"Measured by running every ONNX backend node test (onnx {onnx.__version__}) through",
        "`onnx-to-forge`, printing Forge Python, running it on the Forge stand-in and comparing",
        "with the case's outputs and tolerances (`python -m forge_opt.tools.conformance --write`;",
        "integer inputs are compiled as constants). Nothing here is annotated by hand.",
        "",
        f"- cases passed: **{passed} of {len(results)}**",
        f"- op types whose float32 cases all pass: **{len(full)}** of {len(by_op)}",
        "- cases passed through the split path (`forge-check --fallback`: device sub-models where",
        f"  Forge can, CPU ones on onnxruntime elsewhere): **{sum(r.passed for r in split)} of {len(split)}**",
        "",
        "Per op, *on device* counts the cases Forge runs whole and *with CPU* those that pass only",
        "through the split path.",
        "",
        "| op | opsets tested | passed / cases | on device / with CPU | Forge ops | first limitation |",
        "|---|---|---|---|---|---|",
    ]
    for op in sorted(by_op):
        rs = by_op[op]
        opsets = sorted({r.opset for r in rs})
        forge_ops = sorted({f.removeprefix("forge.") for r in rs for f in r.forge_ops})
        failing = [r.reason for r in rs if not r.passed]
        limitation = collections.Counter(failing).most_common(1)[0][0] if failing else ""
        limitation = limitation.replace("|", "\\|")
        with_cpu = sum(split_of[r.name].passed and not r.passed for r in rs)
        lines.append(
            f"| {op} | {', '.join(map(str, opsets))} | {sum(r.passed for r in rs)} / {len(rs)} "
            f"| {sum(r.passed for r in rs)} / {with_cpu} | {', '.join(forge_ops)} | {limitation} |"
        )
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true", help="regenerate the table and the expectations")
    parser.add_argument("-k", help="only cases whose name contains this")
    parser.add_argument("--table", type=Path, default=TABLE, help=f"where --write puts the table ({TABLE})")
    parser.add_argument(
        "--expectations", type=Path, default=EXPECTATIONS,
        help=f"where --write puts the expected failures ({EXPECTATIONS})",
    )
    parser.add_argument(
        "--split-expectations", type=Path, default=SPLIT_EXPECTATIONS,
        help=f"where --write puts the expected failures of the split path ({SPLIT_EXPECTATIONS})",
    )
    from forge_opt.execution.engine import EXECUTORS

    parser.add_argument("--executor", choices=EXECUTORS, default="standin",
                        help="what runs each program: the stand-in (the default) or XLA CPU; with xla the "
                        "split figure is left out and --write refused")
    args = parser.parse_args(argv)
    cases = [c for c in node_cases() if not args.k or args.k in c.name]
    results = [run_case(c, args.executor) for c in cases]
    if args.executor == "xla":
        if args.write:
            parser.error("--write records the stand-in's results: leave out --executor xla")
        print(f"{sum(r.passed for r in results)} of {len(results)} cases pass on XLA CPU")
        for reason, n in collections.Counter(r.reason for r in results if not r.passed).most_common(25):
            print(f"{n:5d}  {reason}")
        return 0
    split = run_split_figure(cases, results)
    passed = sum(r.passed for r in results)
    print(f"{passed} of {len(results)} cases pass; {sum(r.passed for r in split)} through the split path")
    for reason, n in collections.Counter(r.reason for r in results if not r.passed).most_common(25):
        print(f"{n:5d}  {reason}")
    if args.write:
        write_table(results, split, args.table)
        write_expectations(results, args.expectations)
        write_expectations(split, args.split_expectations, " through the split path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
