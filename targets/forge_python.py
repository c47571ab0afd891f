"""`-t forge-python`: print a module of `forge` ops as a Forge Python module,
in the format of Forge's own generator: a `ForgeModule` subclass named after
the graph; `__init__` declaring parameters and constants; `forward` with one
`forge.op.X("<node>", ...)` call per op; `process_framework_parameters`
loading the ONNX initializers by name. Constants the compiler computed are
saved beside the module in `<module>_constants.npz` (named for the module's
file: two models of one graph name in one folder keep theirs apart; the
graph's name where the module has no file); one repeated value is
written as `torch.full`, and a single number is written inline."""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import cast

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, StringAttr, TensorType, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, SSAValue

from forge_opt import dtypes
from forge_opt.data_formats import BFLOAT16_MAX, FORMATS, SATURATED_WEIGHTS_ATTR, WEIGHT_FORMAT_ATTR
from forge_opt.diagnostics import ForgeOptError, describe, node_name
from forge_opt.dialects import forge
from forge_opt.dialects.elements import attr_to_array, fill_value
from forge_opt.dialects.forge_functions import Call, ForgeRuleError
from forge_opt.dialects.forge_op import checked_type
from forge_opt.files import marked, save_npz

_RESERVED = {"forge", "self", "ForgeModule", "torch", "np", "onnx", "os", "CONSTANTS"}

_TORCH_DTYPES = {
    "float32": "float32", "float64": "float64", "float16": "float16", "int64": "int64",
    "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool", "bfloat16": "bfloat16",
}

_DATA_FORMATS = {"float32": "Float32", "float16": "Float16", "bfloat16": "Float16_b"}


# Python source for a string, in double quotes: json.dumps's own encoder,
# without json.dumps's per-call set-up (one call per emitted op).
_quote = encode_basestring_ascii
_NON_WORD = re.compile(r"\W")


def class_name(graph_name: str) -> str:
    """Forge's rule, `name.title().replace("_", "")`, on a safe identifier."""
    safe = _NON_WORD.sub("_", graph_name) or "model"
    name = safe.title().replace("_", "")
    if not name or name[0].isdigit():
        name = "Model" + name
    return name


def identifier(onnx_name: str) -> str:
    """Forge's rule for ONNX names: `.`, `/`, `:` become `_`; a name starting
    with a digit becomes `input__<name>`."""
    name = _NON_WORD.sub("_", onnx_name)
    if not name:
        return "value"
    if name[0].isdigit():
        name = "input__" + name
    if keyword.iskeyword(name) or name in _RESERVED:
        name += "_"
    return name



def _literal(value: object) -> str:
    """Python source for a keyword value, strings in double quotes."""
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + (",)" if len(value) == 1 else ")")
    if isinstance(value, Attribute):  # an element type: Cast's dtype
        return "torch." + _torch_dtype(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        if math.isnan(value):
            return "float('nan')"
    return repr(value)


def _torch_dtype(element_type: Attribute) -> str:
    name = np.dtype(dtypes.numpy_dtype(element_type)).name
    return _TORCH_DTYPES.get(name, "float32")


class _Names:
    """Unique Python identifiers."""

    def __init__(self) -> None:
        self.taken: set[str] = set(_RESERVED)

    def claim(self, wanted: str) -> str:
        name, n = wanted, 0
        while name in self.taken or keyword.iskeyword(name):
            n += 1
            name = f"{wanted}_{n}"
        self.taken.add(name)
        return name


@dataclass
class ForgePythonModule:
    """The emitted module: its source and the computed constants it loads."""

    source: str
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    constants_file: str = ""


def input_names(func: FuncOp) -> list[str]:
    """The ONNX names of a function's inputs (`input_<i>` where it has none)."""
    return _onnx_names(func.arg_attrs, len(func.body.block.args), "input")


def output_names(func: FuncOp) -> list[str]:
    """The ONNX names of a function's results (`output_<i>` where it has none)."""
    return _onnx_names(func.res_attrs, len(func.function_type.outputs.data), "output")


def _onnx_names(attrs, count: int, prefix: str) -> list[str]:
    names = [f"{prefix}_{i}" for i in range(count)]
    if attrs is not None:
        for i, d in enumerate(attrs.data):
            name = d.data.get("onnx.name") if isinstance(d, DictionaryAttr) else None
            if isinstance(name, StringAttr):
                names[i] = name.data
    return names


def _is_inline_scalar(op: forge.ConstantOp) -> bool:
    """A float32 constant of one number, written as a float literal where
    used: Forge wraps it in `Constant`, a float32 of shape (1,) that reads
    its number as a float, so an int or another dtype cannot be inline; nor
    can a use whose call Forge rejects, or types otherwise, with a (1,)
    operand there (a Concatenate of rank 3)."""
    if op.value is None:
        return False
    t = op.output.type
    if not isinstance(t, TensorType) or t.element_type != f32 or math.prod(t.get_shape()) != 1:
        return False
    return all(isinstance(u.operation, forge.ForgeOp) and _takes_wrapped(u.operation, op.output)
               for u in op.output.uses)


def _takes_wrapped(user: forge.ForgeOp, value: SSAValue) -> bool:
    """Whether Forge types `user` as it is with `value` given as a float
    (by its rules: a `Constant` of shape (1,))."""
    call = forge.rule_call(user)
    shapes = [(1,) if v is value else s for v, s in zip(user.forge_operands(), call.shapes)]
    try:
        wrapped = checked_type(Call(call.fn, shapes, call.dtypes, call.keywords))
    except ForgeRuleError:
        return False
    return wrapped == user.results[0].type


def _scalar_literal(op: forge.ConstantOp) -> str:
    value = attr_to_array(op.value).reshape(-1)[0]
    if np.issubdtype(value.dtype, np.floating):
        return _literal(float(value))
    if value.dtype == np.bool_:
        return repr(bool(value))
    return repr(int(value))


def _compiler_config(module: ModuleOp) -> list[str]:
    """`compiler_config()`, for `forge.compile(..., compiler_cfg=)`, where
    the module was compiled for block-float weights: tt-forge-fe passes its
    MLIRConfig's custom config to tt-mlir's pipeline, whose
    `experimental-weight-dtype` converts the matmul weights."""
    fmt = module.attributes.get(WEIGHT_FORMAT_ATTR)
    if not isinstance(fmt, forge.DataFormatAttr):
        return []
    option = FORMATS[fmt.data].mlir_weight_dtype
    return [
        "",
        "",
        "# compile with forge.compile(module, inputs, compiler_cfg=compiler_config()): tt-mlir then stores",
        f"# each Matmul's second operand computed from weights alone in {fmt.data.value}",
        "def compiler_config():",
        "    config = forge.config.CompilerConfig()",
        f"    config.mlir_config = forge.config.MLIRConfig().set_custom_config(\"experimental-weight-dtype={option}\")",
        "    return config",
    ]


class _Emitter:
    def __init__(self, func: FuncOp, laid_out: Collection[str] = (), stem: str = "", tail: Sequence[str] = (),
                 saturated: Collection[str] = ()):
        self.func = func
        self.saturated = saturated  # weights saturated to bfloat16's range as they load (`tir-data-format`)
        self.tail = tail  # module-level lines after the class
        self.stem = stem  # the module file's name without .py, which names its constants file
        self.laid_out = laid_out  # weights stored in their parameter's layout already
        self.graph = func.sym_name.data
        self.names = _Names()
        self.expr: dict[SSAValue, str] = {}
        self.init: list[str] = []
        self.load: list[str] = []
        self.fills: list[str] = []
        self.parameters: list[str] = []
        self.weight_constants: list[str] = []
        self.constants: dict[str, np.ndarray] = {}
        self.forward: list[str] = []
        self.weight_names: set[str] = set()
        # bfloat16 values: torch.from_numpy cannot read ml_dtypes' arrays, so
        # they travel as float32 (exactly) and become bfloat16 in torch
        self.narrow: dict[str, str] = {}
        self.layouts: dict[str, list[tuple[str, tuple[int, ...]]]] = {}  # a weight's load-time steps
        self.op_labels: dict[str, int] = {}
        self.uses_torch = False

    def weight_name(self, wanted: str) -> str:
        name, n = wanted, 0
        while name in self.weight_names:
            n += 1
            name = f"{wanted}_{n}"
        self.weight_names.add(name)
        return name

    def run(self) -> ForgePythonModule:
        block = self.func.body.block
        args = []
        for arg, onnx_name in zip(block.args, input_names(self.func)):
            name = self.names.claim(identifier(onnx_name))
            self.expr[arg] = name
            args.append(name)
        calls: set[type] = set()  # op classes known to be Forge calls: one isinstance per class
        for counter, op in enumerate(block.ops, 1):
            if type(op) in calls:
                self._call(cast(forge.ForgeOp, op), counter)
            elif isinstance(op, ReturnOp):
                outs = [self.expr[v] for v in op.arguments]
                self.forward.append(f"return {', '.join(outs)}" if outs else "return")
            elif isinstance(op, forge.ParameterOp):
                self._parameter(op)
            elif isinstance(op, forge.ConstantOp):
                self._constant(op)
            elif isinstance(op, forge.ForgeOp):
                calls.add(type(op))
                self._call(op, counter)
            else:
                raise ForgeOptError(f"{describe(op)}: is not a forge op; run '-p onnx-to-forge' first")
        return self._module(args)

    def _parameter(self, op: forge.ParameterOp) -> None:
        name = op.parameter_name.data
        t = op.output.type
        shape = tuple(t.get_shape())
        dtype = np.dtype(dtypes.numpy_dtype(t.element_type)).name
        # Forge's rule: a weight is a parameter unless it is a scalar (or not
        # a float); those are constants, loaded by name all the same.
        if dtype in _DATA_FORMATS and math.prod(shape) > 1:
            self.init.append(
                f"self.add_parameter({_quote(name)}, forge.Parameter(*{shape!r}, requires_grad=True, "
                f"dev_data_format=forge.DataFormat.{_DATA_FORMATS[dtype]}))"
            )
            self.parameters.append(name)
            self.expr[op.output] = f"self.get_parameter({_quote(name)})"
        else:
            self.uses_torch = True
            dtype = _torch_dtype(t.element_type)
            self.init.append(f"self.add_constant({_quote(name)}, shape={shape!r}, dtype=torch.{dtype})")
            self.weight_constants.append(name)
            self.expr[op.output] = f"self.get_constant({_quote(name)})"
        self.weight_names.add(name)
        if op.layout is not None and name not in self.laid_out:
            self.layouts[name] = op.steps()
        if dtypes.is_narrow_float(dtypes.numpy_dtype(t.element_type)):
            self.narrow[name] = _torch_dtype(t.element_type)

    def _constant(self, op: forge.ConstantOp) -> None:
        if _is_inline_scalar(op):
            self.expr[op.output] = _scalar_literal(op)
            return
        self.uses_torch = True
        t = op.output.type
        shape = tuple(t.get_shape())
        name = self.weight_name(op.constant_name.data)
        torch_dtype = _torch_dtype(t.element_type)
        self.init.append(f"self.add_constant({_quote(name)}, shape={shape!r}, dtype=torch.{torch_dtype})")
        if op.fill is not None:
            fill = f"torch.full({shape!r}, {_literal(fill_value(op.fill))}, dtype=torch.{torch_dtype})"
            self.fills.append(f"self.set_constant({_quote(name)}, {fill})")
        else:
            value = np.array(attr_to_array(op.value))
            if dtypes.is_narrow_float(value.dtype):
                self.narrow[name] = torch_dtype
                value = value.astype(np.float32)
            self.constants[name] = value
        self.expr[op.output] = f"self.get_constant({_quote(name)})"

    def _call(self, op: forge.ForgeOp, counter: int) -> None:
        label = node_name(op) or f"{op.FUNCTION.name.lower()}_{counter}"
        seen = self.op_labels.get(label, 0)
        self.op_labels[label] = seen + 1
        if seen:
            label = f"{label}.{seen}"
        operands = [self.expr[v] for v in op.forge_operands()]
        given = op.forge_keywords()
        keywords = [f"{k}={_literal(v)}" for k, v in given.items()]
        if any(isinstance(v, Attribute) for v in given.values()):
            self.uses_torch = True
        args = ", ".join([_quote(label), *operands, *keywords])
        r = op.results[0]
        result = self.names.claim(identifier(r.name_hint or f"{op.FUNCTION.name.lower()}_{counter}"))
        self.expr[r] = result
        self.forward.append(f"{result} = forge.op.{op.FUNCTION.name}({args})")

    def _module(self, args: list[str]) -> ForgePythonModule:
        constants_file = f"{self.stem or identifier(self.graph)}_constants.npz" if self.constants else ""
        header = [f"# Generated by forge-opt from the ONNX graph '{self.graph}'."]
        if constants_file:
            header += ["import os", ""]
        if constants_file or self.narrow:
            header.append("import numpy as np")
        if self.parameters or self.weight_constants:
            header.append("import onnx.numpy_helper")
        if self.uses_torch or self.parameters:
            header.append("import torch")
        if len(header) > 1:
            header.append("")
        header += ["import forge", *(["import forge.config"] if self.tail else []), "import forge.op",
                   "from forge import ForgeModule"]
        if constants_file:
            header += [
                "",
                f"CONSTANTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), {_quote(constants_file)})",
            ]
        narrow_constants = {n: d for n, d in self.narrow.items() if n in self.constants}
        if narrow_constants:
            pairs = ", ".join(f"{_quote(n)}: torch.{d}" for n, d in narrow_constants.items())
            header += ["# saved as float32 (numpy has no bfloat16), held in this dtype", f"NARROW = {{{pairs}}}"]
        load = []
        weights = [(n, "parameter") for n in self.parameters] + [(n, "constant") for n in self.weight_constants]
        if weights:
            load.append("initializers = {t.name: t for t in model.graph.initializer}")
            for name, kind in weights:
                array = f"onnx.numpy_helper.to_array(initializers[{_quote(name)}])" + "".join(
                    f".{kind}({ints!r})" for kind, ints in self.layouts.get(name, ()))
                if name in self.narrow and name in self.saturated:
                    # finite values past bfloat16's range held at its extremes, as the program holds them
                    wide = f"(w := {array}.astype(np.float32))"
                    limit = f"{BFLOAT16_MAX!r}"
                    value = f"torch.from_numpy(np.where(np.isinf({wide}), w, w.clip(-{limit}, {limit})))" \
                        f".to(torch.{self.narrow[name]})"
                elif name in self.narrow:
                    value = f"torch.from_numpy({array}.astype(np.float32)).to(torch.{self.narrow[name]})"
                else:  # torch.tensor copies: the array may be a read-only view of the model's bytes
                    value = f"torch.tensor({array})"
                load.append(f"self.set_{kind}({_quote(name)}, {value})")
        if constants_file:
            load.append("with np.load(CONSTANTS) as constants:")
            load.append("    for name in constants.files:")
            if narrow_constants:
                load.append("        value = torch.from_numpy(constants[name])")
                load.append("        self.set_constant(name, value.to(NARROW[name]) if name in NARROW else value)")
            else:
                load.append("        self.set_constant(name, torch.from_numpy(constants[name]))")
        load += self.fills
        lines = [
            *header,
            "",
            "",
            f"class {class_name(self.graph)}(ForgeModule):",
            "    def __init__(self, name):",
            "        super().__init__(name)",
            *(f"        {line}" for line in self.init),
            "",
            f"    def forward(self, {', '.join(args)}):" if args else "    def forward(self):",
            *(f"        {line}" for line in self.forward),
            "",
            "    def process_framework_parameters(self, model):",
            *(f"        {line}" for line in (load or ["pass"])),
            *self.tail,
        ]
        return ForgePythonModule("\n".join(lines) + "\n", self.constants, constants_file)


def emit_module(module: ModuleOp, laid_out: Collection[str] = (), stem: str = "") -> ForgePythonModule:
    """The Forge Python module; `laid_out` names weights whose file holds
    them in their parameter's layout already (tensor-parallel weight
    files), which load without its steps; `stem`, the name of the module's
    file without `.py`, names its constants file."""
    if any(op.name == "shard.grid" for op in module.ops):
        raise ForgeOptError("a program for several devices is a folder of modules, one per device and segment: "
                            "write it with -t 'forge-python{folder=\"DIR\"}' (forge-opt: -o DIR/), or "
                            "forge_opt.tensor_parallel(model, folder, devices)")
    funcs = [op for op in module.ops if isinstance(op, FuncOp)]
    if len(funcs) != 1:
        raise ForgeOptError(f"forge-python prints one function; the module has {len(funcs)}")
    names = module.attributes.get(SATURATED_WEIGHTS_ATTR)
    saturated = {n.data for n in names.data} if isinstance(names, ArrayAttr) else set()
    return _Emitter(funcs[0], laid_out, stem, _compiler_config(module), saturated).run()


def emit_forge_python(module: ModuleOp) -> str:
    """The Forge Python module for a module of `forge` ops, as text (see
    `emit_module` for the constants it loads)."""
    return emit_module(module).source


#: the comment of a constants file forge-opt wrote, which a later run may replace
CONSTANTS_MARK = b"forge-opt: the computed constants of a Forge Python module"


def save_constants(emitted: ForgePythonModule, folder: Path) -> Path | None:
    """The module's computed constants, beside it; a file of that name that
    forge-opt did not write (the user's own) is an error, never replaced."""
    if not emitted.constants:
        return None
    path = folder / emitted.constants_file
    if (path.exists() or path.is_symlink()) and not marked(path, CONSTANTS_MARK):
        raise ForgeOptError(f"{path}: exists and holds no constants forge-opt wrote: not replaced (move it, or "
                            "name the output otherwise with -o)")
    save_npz(path, emitted.constants, CONSTANTS_MARK)
    return path
