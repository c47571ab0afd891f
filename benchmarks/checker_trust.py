"""How far forge-check's verdict can be trusted, measured both ways.

False matches: wrong programs the checker calls a match. Each model's
emitted program is mutated (one op swapped for a neighbour of the same
signature, the largest weight or computed constant perturbed by 1% (each
element times 1 + 0.01·N(0, 1): a uniform scale would vanish in the next
normalization), two
outputs of one shape swapped, one device's block of a tensor-parallel
plan perturbed, a split's converted module edited) and judged by
`forge-check`'s own driver (`run_check`: the fixed rules, the float64
budget and the ill-conditioning probes, position by position), every exit
status counted. A mutant is equivalent, and not counted, when at every
position its outputs differ from the unmutated program's by no more than
float32 onnxruntime's own distance to the float64 run there
(`compare.own_error`; no checker with a float32 oracle can see such a
change; a 1% weight before a normalization makes one), or, where there is
no float64 run, not at all. One whose change is larger somewhere but, at
every position, within what the verdict grants a float32 program's
rounding (the fixed tolerance, or BUDGET_FACTOR times that own distance) is
counted apart, as rounding-sized: the rule cannot tell it from rounding by
design. A mutant called a match otherwise is a false match; one called
ill-conditioned (exit 3) is a wrong program called ill-conditioned.

False mismatches: programs that differ from the oracle by rounding alone
(the unmutated one, and onnxruntime with its graph optimizations on, on one
and on two threads, and on the inputs moved by a few units in the last
place; the model run in float64), each judged by the driver as a program:
a mismatch (exit 1) is a false one.

The set: every model of tests/data/models and the examples (the merged
decoders and detectors, which decide a size or a branch at run time, as
`--fallback` splits), and models whose outputs hold near-ties
(`tie_models`: an ArgMax, a Gather by it, TopK).

    python benchmarks/checker_trust.py            # every model of tests/data/models and the examples
    python benchmarks/checker_trust.py --light    # and the onnx package's 9 light models, random weights

Prints a table per model and the totals; nothing is timed. The goal is
0 false matches, 0 wrong programs called ill-conditioned and 0 false
mismatches.
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

from forge_opt.check.compare import ATOL, BUDGET_FACTOR, RTOL, own_error
from forge_opt.check.driver import load_checked
from forge_opt.check.options import CheckOptions
from forge_opt.check.report import ILL_CONDITIONED, MATCH, MISMATCH
from forge_opt.check.run import Ran, run_check
from forge_opt.check.wide import wide_outputs
from forge_opt.execution.engine import Compiled, compile_model, index_bounds, random_inputs, run_compiled
from forge_opt.execution.oracle import expected_outputs, onnxruntime_outputs
from forge_opt.frontends.onnx.shapes import symbol_names
from forge_opt.tools.gen_multichip import ENTRIES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trust_models import deep_cnn_sigmoid, qdq_cnn, tie_models

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
    rounding: list[str] = dataclasses.field(default_factory=list)  # matched, and within the rounding allowance
    false_matches: list[str] = dataclasses.field(default_factory=list)
    called_ill: list[str] = dataclasses.field(default_factory=list)  # wrong programs called ill-conditioned
    variants: int = 0
    false_mismatches: list[str] = dataclasses.field(default_factory=list)

    def add(self, other: Tally) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def record(self, wrong: str, status: int) -> None:
        """A wrong program's verdict: killed (a mismatch, or it did not
        run), a false match, or called ill-conditioned."""
        if status == MATCH:
            self.false_matches.append(wrong)
        elif status == ILL_CONDITIONED:
            self.called_ill.append(wrong)
        else:
            self.killed += 1


class Given:
    """A program whose outputs are given (a mutant's, a reference's), for
    the check driver to judge as it judges any strategy's."""

    mode = "checker_trust"
    takes = frozenset()
    failed = "the given program failed"
    forge_python = ""

    def __init__(self, outputs: dict[str, np.ndarray]):
        self.outputs = outputs

    def prepare(self, loaded):
        return loaded

    def module(self):
        return None

    def run(self, prepared, feeds, reference, folder) -> Ran:
        return Ran(dict(self.outputs))


def judged(source, feeds: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> int:
    """forge-check's exit status for a program that returns `outputs` on
    `feeds`: the driver's whole verdict, ill-conditioning included."""
    return run_check(source, CheckOptions(dict(feeds)), Given(outputs)).status


def change(mutant: list[np.ndarray], got: list[np.ndarray], want: list[np.ndarray], exact: list | None,
           tied: Callable[[int, np.ndarray], np.ndarray | None] = lambda i, m: None) -> str:
    """How far a mutant's outputs are from the unmutated program's, position
    by position: "equivalent" (within float32 onnxruntime's own distance to
    the float64 run everywhere; unchanged where there is no float64 run),
    "rounding" (within the allowance the verdict grants a float32 program's
    rounding everywhere: the fixed tolerance, or BUDGET_FACTOR times that
    own distance; for an index, only choices `tied(i, indices)` calls
    near-ties, values equal to float32 rounding), "wrong" otherwise."""
    worst = "equivalent"
    for i, (m, g, w) in enumerate(zip(mutant, got, want)):
        m, g, w = np.asarray(m), np.asarray(g), np.asarray(w)
        if m.shape != g.shape:
            return "wrong"
        if not (m.dtype.kind == "f" and g.dtype.kind == "f"):
            if not np.array_equal(m, g):
                near = tied(i, m)
                if near is None or not np.all(near[m != g]):
                    return "wrong"
                worst = "rounding"
            continue
        m64, g64 = m.astype(np.float64), g.astype(np.float64)
        differ = ~((m64 == g64) | (np.isnan(m64) & np.isnan(g64)))
        if not differ.any():
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            moved = np.where(np.isfinite(m64) & np.isfinite(g64), np.abs(m64 - g64), np.inf)[differ]
            own = own_error(w, exact[i])[differ] if exact is not None and np.shape(exact[i]) == w.shape else \
                np.zeros(moved.shape)
            finite = np.abs(w.astype(np.float64)[np.isfinite(w)])
            scale = float(finite.max()) if finite.size else 0.0
        if np.all(moved <= own):
            continue
        allowance = np.maximum(ATOL + RTOL * scale, BUDGET_FACTOR * own + 2 * float(np.finfo(np.float32).eps) * scale)
        if not np.all(moved <= allowance):
            return "wrong"
        worst = "rounding"
    return worst


#: the sizes docs/multichip.md checks a family at, where 16 for every symbol would not do (GLPN's 3 channels)
FAMILY_DIMS = {e.file: dict(e.dims) for e in ENTRIES if e.dims}


def sizes_for(model: onnx.ModelProto) -> dict[str, int]:
    """Symbolic input sizes: 1 for a batch, 16 otherwise (a sum of symbols,
    Optimum's total length, is sized from its parts)."""
    symbols = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return {s: 1 if "batch" in s else 16 for s in symbols if symbol_names(s) == [s]}


def models(light: bool = False) -> list[tuple[str, Path | onnx.ModelProto]]:
    found: list[tuple[str, Path | onnx.ModelProto]] = []
    found += [(path.stem, path) for path in sorted((ROOT / "tests" / "data" / "models").glob("*.onnx"))]
    found += [(p.stem, p) for p in sorted((ROOT / "examples").glob("*.onnxtxt"))]
    found += [("deep_cnn_sigmoid", deep_cnn_sigmoid()), ("qdq_cnn", qdq_cnn()), *tie_models()]
    if light:  # with random weights: as shipped, every weight is one repeated number and most mutants change nothing
        from onnx.backend import test as backend_test

        sys.path.insert(0, str(ROOT / "tests"))
        from model_helpers import randomize_constant_weights  # pyright: ignore[reportMissingImports]

        for path in sorted((Path(backend_test.__file__).parent / "data" / "light").glob("*.onnx")):
            found.append((path.stem.removeprefix("light_"), randomize_constant_weights(onnx.load(str(path)))))
    return found


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
    exact = wide_outputs(model, base, feeds)[0]
    tally.add(_references(name, source, model, base, feeds, want, got))

    def mutant(label: str, outputs: list[np.ndarray] | None) -> None:
        if outputs is not None:
            tally.add(_judge_mutant(f"{name}: {label}", source, model, base, feeds, outputs, got, want, exact, names))

    for label, run in program_mutants(compiled, names):
        try:
            mutant(label, run(arrays))
        except Exception:  # a mutant Forge's rules refuse: killed before it runs
            tally.mutants += 1
            tally.killed += 1
    mutant("two outputs swapped", swapped_outputs(names, got))
    return tally


def _judge_mutant(label: str, source, model: onnx.ModelProto, base, feeds, outputs, got, want, exact, names
                  ) -> Tally:
    """One mutant's tally: equivalent, rounding-sized, killed, called
    ill-conditioned or a false match (`change`, then the driver)."""
    from forge_opt.check.ties import near_tied_rows

    tally = Tally(mutants=1)
    moved = change(outputs, got, want, exact,
                   lambda i, m: near_tied_rows(model, base, feeds, names[i], np.asarray(want[i]), m))
    if moved == "equivalent":
        tally.equivalent += 1
        tally.equivalents.append(label)
        return tally
    status = judged(source, feeds, dict(zip(names, outputs)))
    if moved == "rounding" and status != MISMATCH:  # the rule cannot tell it from rounding
        tally.rounding.append(label)
    else:
        tally.record(label, status)
    return tally


def _references(name: str, source, model: onnx.ModelProto, base, feeds, want, got) -> Tally:
    """The unmutated program `got`, and the oracle's own variants, each
    judged as a program: a mismatch is a false one."""
    tally = Tally()
    names = [o.name for o in model.graph.output]
    programs = {
        "the unmutated program": lambda: got,
        "onnxruntime, 1 thread": lambda: onnxruntime_outputs(model, base, feeds, threads=1),
        "onnxruntime optimized, 1 thread": lambda: onnxruntime_outputs(model, base, feeds, optimized=True, threads=1),
        "onnxruntime optimized, 2 threads": lambda: onnxruntime_outputs(model, base, feeds, optimized=True, threads=2),
        "onnxruntime on inputs moved by 1 unit in the last place": lambda: onnxruntime_outputs(
            model, base, _moved_by_one_ulp(feeds)),
        "the model run wider": lambda: wide_outputs(model, base, feeds)[0],
    }
    for label, program in programs.items():
        try:
            other = program()
        except Exception:  # onnxruntime lacks what the model needs: this variant does not apply
            other = None
        if other is None:
            continue
        other = [np.asarray(o).astype(w.dtype) for o, w in zip(other, want)]
        tally.variants += 1
        if judged(source, feeds, dict(zip(names, other))) == MISMATCH:
            tally.false_mismatches.append(f"{name}: {label}")
    return tally


def _moved_by_one_ulp(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The float inputs one unit in the last place up or down (at random):
    a program that reads its inputs as rounded otherwise."""
    rng = np.random.default_rng(7)
    return {k: (v + rng.choice(np.array([-1, 1], v.dtype), v.shape) * np.spacing(v)).astype(v.dtype)
            if v.dtype.kind == "f" else v for k, v in feeds.items()}


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
        else:
            tally.record(f"{name} (P={devices}): device 1's block {block.name} perturbed 1%", judged(path, feeds, got))
    return tally


def measure_split(name: str, path: Path) -> Tally:
    """A split (`--fallback`) as forge-check judges it, and a mutant of it:
    the first converted module that computes something these inputs reach
    computes a neighbour of its first swappable op, judged by forge-check's
    own `--fallback` (which verifies each device sub-model on its inputs)."""
    from forge_opt.check.driver import model_feeds
    from forge_opt.check.split import check_fallback
    from forge_opt.split.api import convert, run_split, split_model

    tally = Tally(variants=1)
    loaded = load_checked(path, None, dims=sizes_for(onnx.load(str(path), load_external_data=False))
                          if path.suffix == ".onnx" else None)
    feeds, _ = model_feeds(loaded.model, loaded.base, None, 0, loaded.sizes)
    if check_fallback(str(path), feeds).status == MISMATCH:
        tally.false_mismatches.append(f"{name}: the unmutated split")
    names = [o.name for o in loaded.model.graph.output]
    want = expected_outputs(loaded.model, loaded.base, feeds).outputs
    exact = wide_outputs(loaded.model, loaded.base, feeds)[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "split"
        split_model(loaded.model, folder, base=loaded.base, shapes=loaded.sizes.shapes, dims=loaded.sizes.dims)
        modules = [m for m in convert(folder) if m.suffix == ".py"]
        original = run_split(folder, feeds)
        for module in modules:
            text = module.read_text()
            kind = next((k for k in re.findall(r"forge\.op\.(\w+)\(", text) if k in NEIGHBOUR), None)
            if kind is None:
                continue
            edit = (f"forge.op.{kind}(", f"forge.op.{NEIGHBOUR[kind]}(")
            module.write_text(text.replace(*edit, 1))
            got = run_split(folder, feeds)
            module.write_text(text)
            wrong = f"{name} split: {module.relative_to(folder)} {kind}->{NEIGHBOUR[kind]}"
            tally.mutants += 1
            if all(np.array_equal(got[n], original[n], equal_nan=got[n].dtype.kind == "f") for n in got):
                tally.equivalent += 1  # (a branch these inputs do not take)
                tally.equivalents.append(wrong)
                continue
            status = _fallback_with(path, feeds, module.relative_to(folder), edit)
            moved = change([got[n] for n in names], [original[n] for n in names], want, exact)
            if moved == "rounding" and status != MISMATCH:  # the rule cannot tell it from rounding
                tally.rounding.append(wrong)
            else:
                tally.record(wrong, status)
            break
    return tally


def _fallback_with(path: Path, feeds: dict[str, np.ndarray], module: Path, edit: tuple[str, str]) -> int:
    """forge-check --fallback's status where its split's converted `module`
    (relative to the split) has `edit` made: the user's edit of what ships,
    which its run and its verification both see."""
    import forge_opt.check.split as check
    from forge_opt.split.api import convert

    def edited(folder, *args, **kwargs):
        written = convert(folder, *args, **kwargs)
        target = Path(folder) / module
        target.write_text(target.read_text().replace(*edit, 1))
        return written

    check.convert = edited
    try:
        return check.check_fallback(str(path), feeds).status
    finally:
        check.convert = convert


def measure_any(name: str, source) -> Tally:
    """A model on one device, or, where it decides a size or a branch at run
    time (a detector's NMS, a merged decoder's If), as `--fallback` splits it."""
    from forge_opt.diagnostics import ForgeOptError

    try:
        return measure(name, source)
    except ForgeOptError:
        if not isinstance(source, Path):
            raise
        return measure_split(name, source)


COLUMNS = f"{'model':<28} {'mutants':>8} {'killed':>7} {'equiv':>6} {'rounding':>9} {'false match':>12} " \
          f"{'called ill':>11} {'variants':>9} {'false mismatch':>15}"


def row(name: str, t: Tally) -> str:
    return f"{name:<28} {t.mutants:>8} {t.killed:>7} {t.equivalent:>6} {len(t.rounding):>9} " \
           f"{len(t.false_matches):>12} {len(t.called_ill):>11} {t.variants:>9} {len(t.false_mismatches):>15}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--light", action="store_true", help="also the onnx package's light models")
    parser.add_argument("--only", default="", help="only the models whose name holds this")
    args = parser.parse_args(argv)
    total = Tally()
    print(COLUMNS)
    runs = [(name, lambda name=name, source=source: measure_any(name, source)) for name, source in models(args.light)]
    runs += [("llm_llama plan", lambda: measure_plan("llm_llama", ROOT / "tests/data/models/llm_llama.onnx")),
             ("gpt2 plan", lambda: measure_plan("gpt2_opset17", ROOT / "tests/data/models/gpt2_opset17.onnx")),
             ("detector split", lambda: measure_split("detector", ROOT / "examples/detector.onnxtxt"))]
    for name, run in runs:
        if args.only not in name:
            continue
        try:
            tally = run()
        except Exception as e:  # a model the checker cannot take at all: named, not counted
            print(f"{name:<28} skipped: {type(e).__name__}: {str(e).splitlines()[0][:80]}", flush=True)
            continue
        total.add(tally)
        print(row(name, tally), flush=True)
    print(row("total", total))
    for what, lines in (("equivalent", total.equivalents), ("rounding-sized", total.rounding),
                        ("false match", total.false_matches), ("called ill-conditioned", total.called_ill),
                        ("false mismatch", total.false_mismatches)):
        for line in lines:
            print(f"{what}: {line}")
    return 1 if total.false_matches or total.called_ill or total.false_mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
