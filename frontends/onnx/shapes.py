"""Static sizes for a model's symbolic input dimensions.

Exporters name the dimensions a model may vary in (`batch`, `sequence`);
Forge needs every size fixed. The user fixes them by symbol
(`--dim batch=1`, every dimension of that name) or by input
(`--shape input_ids=1,128`), as onnx-mlir's `--shapeInformation` does by
input. The importer applies the result to the graph's inputs, outputs and
recorded value types before ONNX shape inference runs.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from onnx import GraphProto, TensorShapeProto, TypeProto, ValueInfoProto

from forge_opt.diagnostics import ForgeOptError


def is_known(d: TensorShapeProto.Dimension) -> bool:
    """A dim of known size. PaddlePaddle's exporter writes an unknown size
    as `dim_value: -1`, which is as unknown as an unnamed dim."""
    return d.HasField("dim_value") and d.dim_value >= 0


def tensor_shape(types: Mapping[str, TypeProto], name: str) -> list[int] | None:
    """The shape of tensor `name` as `types` give it (-1 for a size not
    known), or None where its rank is not known."""
    tp = types.get(name)
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else -1 for d in tp.tensor_type.shape.dim]


def value_types(graph: GraphProto) -> dict[str, TypeProto]:
    """Every value's type the graph declares (after inference: every one it
    typed), by name."""
    return {v.name: v.type for v in (*graph.input, *graph.output, *graph.value_info)}


def clear_negative_dims(values: Iterable[ValueInfoProto]) -> None:
    """Make `dim_value: -1` (and any negative size) an unnamed unknown dim,
    in place, so inference and the importer see one form of unknown."""
    for v in values:
        tp = v.type
        if tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.HasField("shape"):
            for d in tp.tensor_type.shape.dim:
                if d.HasField("dim_value") and d.dim_value < 0:
                    d.ClearField("dim_value")


@dataclass(frozen=True)
class InputShapes:
    """Sizes the user chose: whole shapes by graph input, sizes by symbol."""

    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    dims: Mapping[str, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.shapes or self.dims)

    @staticmethod
    def parse(shapes: Iterable[str] = (), dims: Iterable[str] = ()) -> InputShapes:
        """From `NAME=D0,D1,…` and `SYMBOL=N` texts (the command-line flags)."""
        by_input: dict[str, tuple[int, ...]] = {}
        for spec in shapes:
            name, sizes = _split(spec, "--shape", "NAME=D0,D1,...")
            by_input[name] = tuple(_size(s, f"--shape {spec}") for s in sizes.split(",")) if sizes else ()
        by_symbol = {}
        for spec in dims:
            name, size = _split(spec, "--dim", "SYMBOL=N")
            by_symbol[name] = _size(size, f"--dim {spec}")
        return InputShapes(by_input, by_symbol)

    def with_arrays(self, graph: GraphProto, arrays: Mapping[str, object]) -> InputShapes:
        """These sizes, and the arrays' shapes for the graph inputs whose
        sizes are not all known and that these do not size (`forge-check
        --inputs`: the data fixes the shapes)."""
        initializers = {t.name for t in graph.initializer}
        shapes = {}
        for i in graph.input:
            value = arrays.get(i.name)
            tt = i.type.tensor_type if i.type.WhichOneof("value") == "tensor_type" else None
            if value is None or tt is None or i.name in initializers or i.name in self.shapes:
                continue
            if not tt.HasField("shape") or any(not is_known(d) for d in tt.shape.dim):
                shapes[i.name] = tuple(getattr(value, "shape", ()))
        return InputShapes({**shapes, **self.shapes}, self.dims) if shapes else self

    @staticmethod
    def of(shapes: Mapping[str, Iterable[int]] | None = None, dims: Mapping[str, int] | None = None) -> InputShapes:
        """From the Python API's keyword arguments."""
        return InputShapes(
            {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()},
            {k: int(v) for k, v in (dims or {}).items()},
        )


def _split(spec: str, flag: str, form: str) -> tuple[str, str]:
    name, eq, value = spec.partition("=")
    if not eq or not name.strip():
        raise ForgeOptError(f"{flag} {spec}: expected {form}")
    return name.strip(), value.strip()


def _size(text: str, what: str) -> int:
    try:
        size = int(text)
    except ValueError:
        raise ForgeOptError(f"{what}: '{text}' is not a size") from None
    if size < 0:
        raise ForgeOptError(f"{what}: a size cannot be negative")
    return size


def symbolic_dims(tp: TypeProto) -> list[str]:
    """The names of a tensor type's unknown dims, `?` for an unnamed one."""
    if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return []
    return [d.dim_param or "?" for d in tp.tensor_type.shape.dim if not is_known(d)]


def dim_names(tp: TypeProto) -> list[str] | None:
    """Per dim, its symbol ("" where the size is known); None when every
    size is known or the type has no shape."""
    if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
        return None
    dims = tp.tensor_type.shape.dim
    if all(is_known(d) for d in dims):
        return None
    return ["" if is_known(d) else (d.dim_param or "?") for d in dims]


def specialise(graph: GraphProto, inputs: list[ValueInfoProto], chosen: InputShapes) -> list[ValueInfoProto]:
    """Copies of `inputs` with the chosen sizes, after checking every name
    and size against the graph; the graph's outputs and value infos (in
    place: `graph` is the importer's own copy) take the sizes of the symbols."""
    by_name = {i.name: i for i in inputs}
    for name in chosen.shapes:
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise ForgeOptError(f"--shape {name}=…: the graph has no input '{name}' (its inputs: {known})")
    symbols = {n for i in inputs for s in symbolic_dims(i.type) for n in symbol_names(s)}
    for symbol in chosen.dims:
        if symbol not in symbols:
            named = ", ".join(sorted(s for s in symbols if s != "?")) or "none"
            raise ForgeOptError(
                f"--dim {symbol}=…: no input dimension is named '{symbol}' (the symbols: {named})"
            )
    out = []
    for i in inputs:
        fixed = ValueInfoProto()
        fixed.CopyFrom(i)
        if i.name in chosen.shapes:
            _set_shape(fixed, chosen.shapes[i.name])
        _set_symbols(fixed.type, chosen.dims)
        out.append(fixed)
    for value in [*graph.output, *graph.value_info]:
        _set_symbols(value.type, chosen.dims)
    return out


def _set_shape(value: ValueInfoProto, sizes: tuple[int, ...]) -> None:
    tp = value.type
    if tp.WhichOneof("value") != "tensor_type":
        raise ForgeOptError(f"--shape {value.name}=…: the input is not a tensor")
    tt = tp.tensor_type
    if tt.HasField("shape"):
        dims = tt.shape.dim
        if len(dims) != len(sizes):
            raise ForgeOptError(
                f"--shape {value.name}={','.join(map(str, sizes))}: the input has rank {len(dims)}, not {len(sizes)}"
            )
        for i, (d, size) in enumerate(zip(dims, sizes)):
            if is_known(d) and d.dim_value != size:
                raise ForgeOptError(
                    f"--shape {value.name}={','.join(map(str, sizes))}: dim {i} of the input is {d.dim_value}, "
                    f"not {size}"
                )
    tt.ClearField("shape")
    for size in sizes:
        tt.shape.dim.add().dim_value = size
    if not sizes:
        tt.shape.SetInParent()


def _set_symbols(tp: TypeProto, sizes: Mapping[str, int]) -> None:
    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        _set_symbols(tp.sequence_type.elem_type, sizes)
    elif kind == "optional_type":
        _set_symbols(tp.optional_type.elem_type, sizes)
    elif kind == "tensor_type" and sizes:
        for d in tp.tensor_type.shape.dim:
            if d.HasField("dim_param") and (size := dim_size(d.dim_param, sizes)) is not None:
                d.dim_value = size


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def _expression(symbol: str) -> ast.expr | None:
    """`symbol` as integer arithmetic over names, as Optimum writes the
    total length (`past_sequence_length + sequence_length`); None otherwise."""
    try:
        tree = ast.parse(symbol, mode="eval").body
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.BinOp, ast.Name, ast.Constant, ast.Load, *_ARITHMETIC)):
            return None
        if isinstance(node, ast.Constant) and type(node.value) is not int:
            return None
    return tree


def symbol_names(symbol: str) -> list[str]:
    """The plain symbols `symbol` is made of: itself, or the names in its
    arithmetic."""
    tree = _expression(symbol)
    if tree is None or isinstance(tree, ast.Name):
        return [symbol]
    return list(dict.fromkeys(n.id for n in ast.walk(tree) if isinstance(n, ast.Name)))


def dim_size(symbol: str, sizes: Mapping[str, int]) -> int | None:
    """The size of the dim named `symbol` given the sizes by symbol: a
    chosen one, or the value of its arithmetic when every name in it is
    chosen; None when not known."""
    if symbol in sizes:
        return sizes[symbol]
    tree = _expression(symbol)
    if tree is None or isinstance(tree, ast.Name):
        return None

    def value(node: ast.expr) -> int | None:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, int) else None
        if isinstance(node, ast.Name):
            return sizes.get(node.id)
        assert isinstance(node, ast.BinOp)
        a, b = value(node.left), value(node.right)
        if a is None or b is None or (isinstance(node.op, ast.FloorDiv) and b == 0):
            return None
        return _ARITHMETIC[type(node.op)](a, b)

    return value(tree)


def symbols_hint(inputs: Iterable[tuple[str, list[str | int]]]) -> str:
    """The diagnostic for inputs left with unknown sizes: each input's dims
    (a size, or its symbol, `?` if unnamed), and the flags that fix them."""
    inputs = list(inputs)
    listed = "; ".join(f"'{name}' [{', '.join(map(str, dims))}]" for name, dims in inputs)
    symbols = list(dict.fromkeys(
        n for _, dims in inputs for s in dims if isinstance(s, str) and s not in ("?", "...") for n in symbol_names(s)
    ))
    unnamed = [name for name, dims in inputs if "?" in dims]
    fixes = [f"--dim {s}=N" for s in symbols] + [f"--shape {name}=D0,D1,..." for name in unnamed]
    return (
        f"the model's inputs have unknown sizes, which Forge cannot take: {listed}; "
        f"choose them with {' '.join(fixes)} (forge-opt, forge-check, forge-split; "
        f"dims=/shapes= in the Python API)"
    )
