"""ONNX importer: a ModelProto becomes a `builtin.module` of `onnx` ops.

One `func.func` per graph (named after it), one op per node in topological
order, values typed from ONNX shape inference run on the graph without its
large weights, initializers as `onnx.Constant` ops whose value shares the
protobuf's raw bytes, node names as op locations.
"""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import onnx.parser
import onnx.shape_inference
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnrankedTensorType,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, text
from forge_opt.dialects.onnx import INITIALIZER_ATTR, OPS_BY_TYPE, CustomOp, YieldOp
from forge_opt.dialects.onnx_base import OnnxOp
from forge_opt.frontends.onnx.adapters import adapt_node, schema_version
from forge_opt.frontends.onnx.functions import expandable
from forge_opt.frontends.onnx.graph import describe_node, node_label, node_reads
from forge_opt.frontends.onnx.inference import infer
from forge_opt.frontends.onnx.names import ssa_name
from forge_opt.frontends.onnx.resolve import RESOLVED_OPS, resolve
from forge_opt.frontends.onnx.resolved import Resolved
from forge_opt.frontends.onnx.shapes import InputShapes, clear_negative_dims, dim_names, specialise
from forge_opt.frontends.onnx.toposort import check_text, toposort
from forge_opt.frontends.onnx.values import (
    attribute_value,
    mlir_type,
    tensor_attr,
    tensor_type,
)
from forge_opt.frontends.onnx.weights import WeightMap, load_without_weights
from forge_opt.xdsl_internals import name_loc, set_name

#: A graph input's symbols, one per dim ("" where the size is known).
INPUT_DIMS_ATTR = "onnx.dims"

#: Initializers with more elements than this are hidden from shape inference:
#: inference serializes the whole model, and only small tensors (shapes,
#: axes, sizes) carry information it can use.
INFERENCE_INITIALIZER_LIMIT = 1024


# -- loading ----------------------------------------------------------------


def load_model(source: str | os.PathLike | bytes | ModelProto) -> tuple[ModelProto, Path | None]:
    """A ModelProto and the folder external data is read from."""
    if isinstance(source, ModelProto):
        return source, None
    if isinstance(source, bytes):
        return parse_bytes(source, "<bytes>"), None
    path = Path(source)
    if not path.exists():
        raise ForgeOptError(f"{path}: no such file")
    if path.is_dir():
        raise ForgeOptError(f"{path}: is a folder, not a model file (.onnx or .onnxtxt)")
    if path.suffix == ".onnxtxt":
        return parse_text(path.read_text(), str(path)), path.parent
    data = path.read_bytes()
    return parse_bytes(data, str(path)), path.parent


def load_model_lazily(path: Path) -> tuple[ModelProto, Path | None, WeightMap | None]:
    """Like `load_model` for a file, with large weights left in the file
    (`weights`) until the importer reads each once."""
    if path.suffix == ".onnxtxt" or not path.is_file():
        model, base = load_model(path)
        return model, base, None
    try:
        model, weights = load_without_weights(path)
    except Exception:  # not well-formed: the full parser says why
        model, base = load_model(path)
        return model, base, None
    if not model.HasField("graph"):
        raise ForgeOptError(f"{path}: not an ONNX model (it has no graph)")
    return model, path.parent, weights


def parse_bytes(data: bytes, what: str) -> ModelProto:
    """A serialized model, or an error naming `what` if it is none."""
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError or RuntimeError
        raise ForgeOptError(f"{what}: not a readable ONNX model ({e})") from None
    if not model.HasField("graph"):
        raise ForgeOptError(f"{what}: not an ONNX model (it has no graph)")
    return model


def parse_text(text: str, what: str = "<text>") -> ModelProto:
    """A model in ONNX's textual syntax (`onnx.parser`)."""
    try:
        return onnx.parser.parse_model(text)
    except Exception as e:
        detail = e.args[0] if e.args else e
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        detail = "; ".join(line.strip() for line in str(detail).splitlines() if line.strip())
        raise ForgeOptError(f"{what}: not a valid ONNX text model: {detail}") from None


def freeze_inputs(model: ModelProto, values: dict[str, np.ndarray]) -> ModelProto:
    """A copy of the model where the named graph inputs are initializers with
    the given values (how shape-carrying inputs such as Split's `split`
    become static for Forge)."""
    frozen = ModelProto()
    frozen.CopyFrom(model)
    names = {i.name for i in model.graph.input}
    for name in values:
        if name not in names:
            raise ForgeOptError(f"cannot freeze '{name}': the graph has no input of that name")
    keep = [i for i in frozen.graph.input if i.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(keep)
    for name, value in values.items():
        frozen.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(value), name))
    return frozen


class Importer:
    def __init__(
        self,
        model: ModelProto,
        base: Path | None,
        inferred: ModelProto,
        weights: WeightMap | None = None,
        resolved: bool = False,
    ):
        """`resolved`: the graph's nodes are those of `inferred`, rewritten
        by compile-time resolution, with the constants it computed."""
        self.model = model
        self.inferred = inferred
        self.resolved = resolved
        self.base = base
        self.weights = weights
        self.opsets = {o.domain or "": o.version for o in model.opset_import}
        if "ai.onnx" in self.opsets:
            self.opsets[""] = self.opsets.pop("ai.onnx")
        self.types: MutableMapping[str, TypeProto] = _own_types(inferred.graph)
        # a graph has few distinct types: convert each once, keyed by its bytes
        self._converted: dict[bytes, Attribute] = {}
        self._by_name: dict[str, Attribute] = {}
        self.unresolved = False  # some value's type has unknown sizes, or no elements

    def value_type(self, name: str, what: str | Callable[[], str]) -> Attribute:
        """The type of value `name`; `what` names it in an error (a callable
        builds that text only for the error)."""
        converted = self._by_name.get(name)
        if converted is not None:
            return converted
        tp = self.types.get(name)
        if tp is None:
            converted = _unknown_type()
            self.unresolved = True
        else:
            key = tp.SerializeToString()
            converted = self._converted.get(key)
            if converted is None:
                converted = self._converted[key] = mlir_type(tp, what if isinstance(what, str) else what())
                if not _static_and_filled(converted):
                    self.unresolved = True
        self._by_name[name] = converted
        return converted

    def needs_resolution(self) -> bool:
        """Whether the main graph has control flow or sequences, values
        whose sizes inference left unknown, or tensors of no elements
        (`resolve`). Converts the types the import needs anyway, so a
        static model pays one dict."""
        opset = self.opsets.get("", 1)
        for i in self.inferred.graph.input:
            self.value_type(i.name, f"graph input '{i.name}'")
        for node in self.inferred.graph.node:
            if node.op_type in RESOLVED_OPS or (not node.domain and expandable(node.op_type, opset)):
                return True
            for out in node.output:
                if out:
                    self.value_type(out, lambda node=node, out=out: f"{describe_node(node)}, output '{out}'")
        return self.unresolved

    # -- graphs

    def import_main(self) -> FuncOp:
        g = self.model.graph
        initializers = {t.name for t in g.initializer}
        inputs = [i for i in g.input if i.name not in initializers]
        arg_types = [self.value_type(i.name, f"graph input '{i.name}'") for i in inputs]
        block = Block(arg_types=arg_types)
        env: dict[str, SSAValue] = {}
        for arg, i in zip(block.args, inputs):
            set_name_hint(arg, i.name)
            env[i.name] = arg
        resolved = self.inferred.graph if self.resolved else None
        # the inferred copy's nodes: their subgraphs carry the inferred types of their own values
        results = self._import_body(g, block, env, outer=set(), resolved=resolved, typed=self.inferred.graph)
        block.add_op(ReturnOp(*results))
        func = FuncOp(
            text(g.name) or "main",
            (arg_types, [r.type for r in results]),
            Region(block),
            arg_attrs=ArrayAttr([DictionaryAttr(self._input_attrs(i.name)) for i in inputs]),
            res_attrs=ArrayAttr([DictionaryAttr({"onnx.name": StringAttr(text(o.name))}) for o in g.output]),
        )
        return func

    def _input_attrs(self, name: str) -> dict[str, Attribute]:
        """`onnx.name`, and `onnx.dims` (each dim's symbol, "" where its size
        is known) while some size is unknown, for the diagnostic that asks
        the user to choose them."""
        attrs: dict[str, Attribute] = {"onnx.name": StringAttr(text(name))}
        tp = self.types.get(name)
        names = dim_names(tp) if tp is not None else None
        if names is not None:
            attrs[INPUT_DIMS_ATTR] = ArrayAttr([StringAttr(n) for n in names])
        return attrs

    def _import_body(
        self,
        g: GraphProto,
        block: Block,
        env: dict[str, SSAValue],
        outer: set[str],
        resolved: GraphProto | None = None,
        typed: GraphProto | None = None,
    ) -> list[SSAValue]:
        """`g`'s initializers and nodes into `block`; for the main graph, the
        nodes as resolution left them (`resolved`), with the constants it
        made, or else as `typed` (the inferred copy of `g`) has them."""
        from forge_opt.dialects.onnx_ops import ConstantOp

        initializers = list(g.initializer)
        nodes = g.node if typed is None else typed.node
        made = 0  # the last `made` initializers are constants resolution computed, not the model's
        if resolved is not None:
            nodes = resolved.node
            have = {t.name for t in initializers}
            computed = [t for t in resolved.initializer if t.name not in have]
            # the model's weights that folding left unread stay out of the IR
            read = {n for node in nodes for n in node_reads(node)} | {o.name for o in g.output}
            initializers = [t for t in initializers if t.name in read] + computed
            made = len(computed)
        for i, t in enumerate(initializers):
            what = f"initializer '{t.name}'"
            model_owned = i < len(initializers) - made
            op = ConstantOp.build(
                result_types=[tensor_type(t, what)],
                properties={"value": tensor_attr(t, self.base, what, self.weights)},
                attributes={INITIALIZER_ATTR: StringAttr(text(t.name))} if model_owned else {},
            )
            op.location = name_loc(text(t.name))
            block.add_op(op)
            set_name_hint(op.results[0], t.name)
            env[t.name] = op.results[0]
        known = set(env) | outer
        for node in toposort(list(nodes), known, g.name):
            for op in self._import_node(node, env):
                block.add_op(op)
        missing = [o.name for o in g.output if o.name not in env]
        if missing:
            raise ForgeOptError(
                f"graph '{g.name}': output '{missing[0]}' is not produced by any node, input or initializer"
            )
        return [env[o.name] for o in g.output]

    def _import_node(self, node: NodeProto, env: dict[str, SSAValue]) -> list[Operation]:
        domain = node.domain
        if domain and domain != "ai.onnx":
            return [self._custom(node, env, describe_node(node))]
        opset = self.opsets.get("", 1)
        since = schema_version(node.op_type, opset)
        if since is None:
            what = describe_node(node)
            if node.op_type in OPS_BY_TYPE:
                raise ForgeOptError(f"{what}: op {node.op_type} does not exist at opset {opset}")
            raise ForgeOptError(f"{what}: unknown op '{node.op_type}' in the default ONNX domain")
        newest = schema_version(node.op_type)
        if newest is None or since >= newest:  # the latest form: nothing to adapt
            return [self._build(node, env)]
        return [self._build(n, env) for n in adapt_node(node, since, self.types, describe_node(node))]

    def _build(self, node: NodeProto, env: dict[str, SSAValue]) -> Operation:
        # Error texts name the node; they are built only for an error.
        op_type = node.op_type
        cls = OPS_BY_TYPE[op_type]
        operands: list[SSAValue | None] = []
        for name in node.input:
            if not name:
                operands.append(None)
            elif name not in env:
                raise ForgeOptError(f"{describe_node(node)}: input '{name}' is not defined")
            else:
                operands.append(env[name])
        inputs = cls.ONNX_INPUTS
        if len(operands) > len(inputs) and (not inputs or inputs[-1][1] != "variadic"):
            raise ForgeOptError(
                f"{describe_node(node)}: has {len(operands)} inputs, but {op_type} takes at most {len(inputs)}"
            )
        for i, (pname, kind) in enumerate(inputs):
            if kind == "single" and (i >= len(operands) or operands[i] is None):
                raise ForgeOptError(f"{describe_node(node)}: required input '{pname}' is missing")
        props: dict[str, Attribute] = {}
        regions: list[Region] = []
        if node.attribute:
            props, regions = self._attributes(node, cls, env)
        out_names = list(node.output)
        result_types: list[Attribute | None] = [
            self.value_type(o, lambda o=o: f"{describe_node(node)}, output '{o}'") if o else None for o in out_names
        ]
        if op_type == "Constant" and "value" in props and not isinstance(result_types[0], TensorType):
            result_types[0] = dtypes.tensor(getattr(props["value"], "type", props["value"]))
        outputs = cls.ONNX_OUTPUTS
        if len(result_types) > len(outputs) and (not outputs or outputs[-1][1] != "variadic"):
            raise ForgeOptError(
                f"{describe_node(node)}: has {len(result_types)} outputs, but {op_type} has at most {len(outputs)}"
            )
        try:
            op = cls.build(
                operands=cls.group_by_param(inputs, operands),
                result_types=cls.group_by_param(outputs, result_types),
                properties=props,
                regions=regions,
            )
        except Exception as e:
            raise ForgeOptError(f"{describe_node(node)}: {e}") from None
        op.location = name_loc(node_label(node))
        for name, value in zip([o for o in out_names if o], op.results):
            set_name_hint(value, name)
            env[name] = value
        return op

    def _attributes(
        self, node: NodeProto, cls: type[OnnxOp], env: dict[str, SSAValue]
    ) -> tuple[dict[str, Attribute], list[Region]]:
        """The node's attributes as properties, and its graphs as regions."""
        what = describe_node(node)
        props: dict[str, Attribute] = {}
        graphs = {a.name: a for a in node.attribute if a.type == AttributeProto.GRAPH}
        for a in node.attribute:
            if a.type == AttributeProto.GRAPH:
                if a.name not in cls.ONNX_GRAPHS:
                    raise ForgeOptError(f"{what}: {node.op_type} has no graph attribute '{a.name}'")
                continue
            if a.name not in cls.ONNX_ATTRIBUTES:
                raise ForgeOptError(
                    f"{what}: attribute '{a.name}' is not an attribute of {node.op_type} "
                    f"(opset {cls.ONNX_SINCE_VERSION})"
                )
            props[a.name] = attribute_value(a, self.base, what)
        regions: list[Region] = []
        for gname in cls.ONNX_GRAPHS:
            if gname not in graphs:
                raise ForgeOptError(f"{what}: graph attribute '{gname}' is missing")
            regions.append(self._subgraph(graphs[gname].g, env, what))
        return props, regions

    def _subgraph(self, g: GraphProto, env: dict[str, SSAValue], what: str) -> Region:
        check_text((), _graph_names(g))
        # the subgraph's value types over its enclosing scope's, while it is imported
        outer_types, outer_names = self.types, self._by_name
        self.types, self._by_name = ChainMap(_own_types(g), outer_types), {}
        try:
            arg_types = [self.value_type(i.name, f"{what}, subgraph input '{i.name}'") for i in g.input]
            block = Block(arg_types=arg_types)
            inner = dict(env)
            for arg, i in zip(block.args, g.input):
                set_name_hint(arg, i.name)
                inner[i.name] = arg
            results = self._import_body(g, block, inner, outer=set(env))
        finally:
            self.types, self._by_name = outer_types, outer_names
        block.add_op(YieldOp.build(operands=[results]))
        return Region(block)

    def _custom(self, node: NodeProto, env: dict[str, SSAValue], what: str) -> Operation:
        operands = []
        for name in node.input:
            if name:
                if name not in env:
                    raise ForgeOptError(f"{what}: input '{name}' is not defined")
                operands.append(env[name])
        attrs: dict[str, Attribute] = {}
        for a in node.attribute:
            try:
                attrs[a.name] = attribute_value(a, self.base, what)
            except ForgeOptError:
                attrs[a.name] = StringAttr(f"<{AttributeProto.AttributeType.Name(a.type)}>")
        outs = [o for o in node.output if o]
        op = CustomOp.build(
            operands=[operands],
            result_types=[[self.value_type(o, f"{what}, output '{o}'") for o in outs]],
            properties={"domain": StringAttr(node.domain), "op_type": StringAttr(node.op_type)},
            attributes=attrs,
        )
        op.location = name_loc(node_label(node))
        for name, value in zip(outs, op.results):
            set_name_hint(value, name)
            env[name] = value
        return op


def _own_types(g: GraphProto) -> dict[str, TypeProto]:
    """The types of `g`'s own values. A subgraph's are scoped to it
    (`_subgraph`): the branches of an If reuse names with other shapes."""
    return {vi.name: vi.type for vi in (*g.input, *g.output, *g.value_info) if vi.type.WhichOneof("value")}


def _static_and_filled(t: Attribute) -> bool:
    """A tensor type of known sizes, none 0, or a value without sizes
    (sequences). Unknown sizes and empty tensors are for `resolve`."""
    if isinstance(t, UnrankedTensorType):
        return False
    if isinstance(t, TensorType):
        return all(d > 0 for d in t.get_shape())
    return True


def _unknown_type() -> Attribute:
    """A value ONNX inference could not type: a tensor of unknown rank whose
    element type later passes must find."""
    from xdsl.dialects.builtin import NoneType

    return UnrankedTensorType(NoneType())


def set_name_hint(value: SSAValue, name: str) -> None:
    """Name the SSA value after the ONNX value, by the one naming rule."""
    hint = ssa_name(name)
    if hint is not None:
        set_name(value, hint)


# -- shape inference ----------------------------------------------------------------


def _without_large_weights(model: ModelProto, chosen: InputShapes | None = None) -> ModelProto:
    """A copy of the model for shape inference: small initializers kept (they
    feed Reshape/Slice/Split shapes), large ones turned into typed inputs,
    the user's chosen sizes applied."""
    g = model.graph
    lite = ModelProto()
    # Before IR 4 inference ignores initializers that are not also inputs.
    lite.ir_version = max(model.ir_version, 4)
    lite.opset_import.extend(model.opset_import)
    lg = lite.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.output.extend(g.output)
    inputs = {i.name for i in g.input}
    # an input's type is its declaration's (and the user's sizes): a value_info of the same name would override it
    lg.value_info.extend(v for v in g.value_info if v.name not in inputs)
    lg.input.extend(specialise(lg, list(g.input), chosen) if chosen else g.input)
    clear_negative_dims([*lg.input, *lg.output, *lg.value_info])
    lite.functions.extend(model.functions)
    for t in g.initializer:
        count = int(np.prod(t.dims, dtype=np.int64))
        if count <= INFERENCE_INITIALIZER_LIMIT and t.data_location != TensorProto.EXTERNAL:
            lg.initializer.append(t)
        elif t.name not in inputs:
            lg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return lite


def infer_types(model: ModelProto, chosen: InputShapes | None = None) -> ModelProto:
    """The model without its large weights, its types inferred; where shapes
    stay unknown or control flow can be decided, resolved at compile time
    (`resolve`)."""
    return _importer(model, None, None, chosen).inferred


def _importer(
    model: ModelProto, base: Path | None, weights: WeightMap | None, chosen: InputShapes | None
) -> Importer:
    """The importer of the model with its types inferred and, where needed,
    its graph resolved at compile time."""
    inferred = infer(_without_large_weights(model, chosen))
    importer = Importer(model, base, inferred, weights)
    if importer.needs_resolution():
        resolved = resolve(inferred, infer)
        if resolved is not inferred:
            return Importer(model, base, resolved, weights, resolved=True)
    return importer


def check_opsets(model: ModelProto) -> None:
    newest = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version > newest:
            raise ForgeOptError(
                f"the model needs opset {o.version} of the default domain; "
                f"the installed onnx {onnx.__version__} knows up to {newest}"
            )
        if o.domain in ("", "ai.onnx") and o.version < 1:
            raise ForgeOptError(f"the model's default-domain opset {o.version} is not valid")
    no_default_opset = not any(o.domain in ("", "ai.onnx") for o in model.opset_import)
    if no_default_opset and any((n.domain or "") in ("", "ai.onnx") for n in model.graph.node):
        raise ForgeOptError("the model does not import an opset of the default domain")


def _graph_names(g: GraphProto) -> list[str | bytes]:
    return [g.name, *(v.name for v in [*g.input, *g.output]), *(t.name for t in g.initializer)]


def resolve_model(
    model: ModelProto,
    shapes: InputShapes | None = None,
    base: Path | None = None,
    weights: WeightMap | None = None,
) -> Resolved:
    """The model imported, once (`Resolved`): `shapes`, sizes for its
    symbolic input dims (`--dim`, `--shape`); `base`, the folder of its
    external data, or `weights` mapped from its file."""
    try:
        check_text((), _graph_names(model.graph))  # node names: as the importer orders the nodes
        check_opsets(model)
        importer = _importer(model, base, weights, shapes)
        module = ModuleOp([importer.import_main()])
        return Resolved(model, base, importer.inferred, importer.resolved, module, shapes)
    except UnicodeError:
        raise ForgeOptError("the model has a name or string that is not valid UTF-8") from None


def import_model(
    model: ModelProto,
    base: Path | None = None,
    weights: WeightMap | None = None,
    shapes: InputShapes | None = None,
) -> ModuleOp:
    """The model's import (`resolve_model`'s module)."""
    return resolve_model(model, shapes, base, weights).module


def import_onnx(
    source: str | os.PathLike | bytes | ModelProto,
    *,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> ModuleOp:
    """Import an ONNX model (a path, serialized bytes, a ModelProto, or a path
    to `.onnxtxt` text) as a module of `onnx` ops. `shapes` fixes whole input
    shapes by input name, `dims` the sizes of symbolic dims by symbol
    (`dims={"batch": 1}`)."""
    chosen = InputShapes.of(shapes, dims)
    if isinstance(source, str | os.PathLike):
        model, base, weights = load_model_lazily(Path(source))
        return import_model(model, base, weights, chosen)
    model, base = load_model(source)
    return import_model(model, base, shapes=chosen)
