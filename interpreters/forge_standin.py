"""A stand-in for Forge's Python API, backed by the numpy kernels, to run
emitted Forge modules without Forge.

Every `forge.op` function has Forge's name, parameters, order and defaults
(they are built from the records of `dialects/forge_functions/`, which the
`forge` dialect's op classes are generated from too), and rejects calls Forge would reject. Nothing named `forge` is
installed: `standin_modules()` puts the stand-in (and a minimal `torch` with
the few names emitted modules use) in `sys.modules` only while a module is
loaded and run.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import enum
import hashlib
import inspect
import os
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np

from forge_opt import data_formats
from forge_opt.data_formats import BLOCK_FORMATS, FORMATS, device_values
from forge_opt.dialects.forge_functions import FUNCTIONS, REQUIRED, Call, ForgeFunction, ForgeRuleError


class ForgeCallError(Exception):
    """A call the real Forge would reject."""


class DataFormat(enum.IntEnum):
    Float32 = 0
    Float16 = 1
    Bfp8 = 2
    Bfp4 = 3
    Float16_b = 5
    Bfp8_b = 6
    Bfp4_b = 7
    Int32 = 8
    Lf8 = 10
    Bfp2 = 11
    UInt16 = 12
    Int8 = 14
    Bfp2_b = 15
    RawUInt8 = 0xF0
    RawUInt16 = 0xF1
    RawUInt32 = 0xF2
    Invalid = 0xFF


#: block-float conversions by content: the programs of a decode loop (one per input shape, each
#: loading the same weights) convert each weight once; the least recently used go past the budget
_CONVERTED: collections.OrderedDict[tuple, np.ndarray] = collections.OrderedDict()
_CONVERTED_BUDGET = 4 << 30
_CONVERTED_LOCK = threading.Lock()  # simulated devices are threads


def _converted(value: np.ndarray, fmt: data_formats.FormatName) -> np.ndarray:
    value = np.ascontiguousarray(value)
    digest = hashlib.blake2b(value.view(np.uint8).data if value.ndim else value.tobytes(), digest_size=16).digest()
    key = (fmt, value.shape, value.dtype.str, digest)
    with _CONVERTED_LOCK:
        found = _CONVERTED.get(key)
        if found is not None:
            _CONVERTED.move_to_end(key)
            return found
    found = device_values(value, fmt)  # outside the lock: devices convert their blocks at once
    with _CONVERTED_LOCK:
        _CONVERTED[key] = found
        held = sum(a.nbytes for a in _CONVERTED.values())
        while held > _CONVERTED_BUDGET and len(_CONVERTED) > 1:
            held -= _CONVERTED.popitem(last=False)[1].nbytes
    return found


class Tensor:
    """A value flowing through `forward`: a numpy array with a shape.
    `constant`: computed from weights alone (tt-mlir's weight conversions
    pick those)."""

    def __init__(self, value: np.ndarray, constant: bool = False):
        self._value = np.asarray(value)
        self.constant = constant
        self._blocks: tuple[data_formats.FormatName, np.ndarray] | None = None

    def as_block_float(self, fmt: data_formats.FormatName) -> np.ndarray:
        """The value in block float `fmt`, converted once per value."""
        if self._blocks is None or self._blocks[0] != fmt:
            self._blocks = (fmt, _converted(self._value, fmt))
        return self._blocks[1]

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    def value(self) -> np.ndarray:
        return self._value

    def set_value(self, value: np.ndarray) -> None:
        self._value = np.asarray(value)
        self._blocks = None

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self._value.dtype})"


class Parameter(Tensor):
    def __init__(self, *shape: int, requires_grad: bool = True, dev_data_format: DataFormat | None = None):
        if not all(isinstance(d, int) for d in shape):
            raise ForgeCallError(f"Parameter: the shape must be ints, got {shape}")
        super().__init__(np.zeros(shape, dtype=np.float32), constant=True)
        self.requires_grad = requires_grad
        self.dev_data_format = dev_data_format


def _array(fn: str, what: str, value: object) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.value()
    if isinstance(value, float):
        # Forge wraps Python numbers in forge.op.Constant, a float32 of shape (1,)
        # (forge/forge/op/common.py); op_constant.cpp reads the number as a float.
        return np.full((1,), value, dtype=np.float32)
    if isinstance(value, int) and not isinstance(value, bool):
        raise ForgeCallError(
            f"[attr-variant] {fn}: {what} is the int {value}; Forge wraps it in Constant, "
            "which reads a float (forge/forge/op/constant.py)"
        )
    raise ForgeCallError(f"{fn}: {what} must be a Tensor, got {type(value).__name__}")


def _signature(fn: ForgeFunction) -> inspect.Signature:
    P = inspect.Parameter
    params = [P("name", P.POSITIONAL_OR_KEYWORD)]
    for operand, kind in fn.operands:
        if kind == "variadic":
            params.append(P(operand, P.VAR_POSITIONAL))
        elif kind == "optional":
            params.append(P(operand, P.POSITIONAL_OR_KEYWORD, default=None))
        else:
            params.append(P(operand, P.POSITIONAL_OR_KEYWORD))
    keyword_only = fn.keyword_only or any(k == "variadic" for _, k in fn.operands)
    keyword_kind = P.KEYWORD_ONLY if keyword_only else P.POSITIONAL_OR_KEYWORD
    for name, default in fn.keywords:
        params.append(P(name, keyword_kind, default=P.empty if default is REQUIRED else default))
    return inspect.Signature(params)


def _make_function(fn: ForgeFunction):
    sig = _signature(fn)

    def call(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)  # TypeError for what Python would reject
        bound.apply_defaults()
        values = dict(bound.arguments)
        name = values.pop("name")
        if not isinstance(name, str):
            raise ForgeCallError(f"{fn.name}: the first argument (name) must be a str, got {type(name).__name__}")
        arrays, given = [], []
        for operand, kind in fn.operands:
            v = values.pop(operand)
            if kind == "variadic":
                arrays.extend(_array(fn.name, operand, x) for x in v)
                given.extend(v)
            elif v is None and kind == "optional":
                arrays.append(None)
            else:
                arrays.append(_array(fn.name, operand, v))
                given.append(v)
        weight_format = WEIGHT_FORMAT.get()
        i = fn.weight_operand
        if i is not None and weight_format is not None and _from_weights(given[i]):
            # tt-mlir's weight-dtype conversion: a matmul's B, as the device stores it
            arrays[i] = given[i].as_block_float(weight_format) if isinstance(given[i], Tensor) else \
                device_values(arrays[i], weight_format)
        if fn.name == "Cast" and not isinstance(values["dtype"], np.dtype):
            values["dtype"] = np.dtype(values["dtype"])
        call = Call(
            fn, [None if a is None else a.shape for a in arrays],
            [None if a is None else a.dtype for a in arrays], values,
        )
        try:
            fn.check(call)
        except ForgeRuleError as e:
            raise ForgeCallError(str(e)) from None
        value = fn.golden(arrays, values)
        if value.shape != (shape := fn.shape(call)):
            # Forge asserts it too (forge/forge/tensor.py TensorFromTrace.set_value)
            raise ForgeCallError(
                f"[shape-vs-eval] forge.op.{fn.name}: the golden's value has shape {list(value.shape)}, "
                f"but shape() gives {list(shape)}"
            )
        return Tensor(value, constant=all(_from_weights(v) for v in given))

    call.__name__ = call.__qualname__ = fn.name
    call.__signature__ = sig
    call.__doc__ = f"forge.op.{fn.name}{sig}"
    return call


def _from_weights(value: object) -> bool:
    """A weight, a number (Forge makes it a Constant) or computed from them."""
    return isinstance(value, float) or (isinstance(value, Tensor) and value.constant)


#: the block float tt-mlir stores matmul weights in, in the compile running
WEIGHT_FORMAT: contextvars.ContextVar[data_formats.FormatName | None] = contextvars.ContextVar(
    "weight_format", default=None)

OP_FUNCTIONS = {fn.name: _make_function(fn) for fn in FUNCTIONS}
Index = OP_FUNCTIONS["Index"]


class MLIRConfig:
    """tt-forge-fe's MLIRConfig (forge/csrc/passes/mlir_compiler.hpp): its
    custom config is appended to tt-mlir's pipeline options."""

    def __init__(self):
        self.custom_config = ""

    def set_custom_config(self, config: str) -> MLIRConfig:
        if not isinstance(config, str):
            raise ForgeCallError("MLIRConfig.set_custom_config takes a str")
        self.custom_config = config
        return self


class CompilerConfig:
    """The one field of tt-forge-fe's CompilerConfig (forge/forge/config.py)
    emitted modules set."""

    def __init__(self, mlir_config: MLIRConfig | None = None):
        self.mlir_config = mlir_config


#: tt-mlir's `experimental-weight-dtype` values (TTNNPipelines.h)
_WEIGHT_DTYPES = {"none": None, **{FORMATS[f].mlir_weight_dtype: f for f in BLOCK_FORMATS}}


def weight_format_of(config: object) -> data_formats.FormatName | None:
    """The block float a compiler config has tt-mlir store matmul weights
    in; an option the stand-in does not emulate is an error, not ignored."""
    if not isinstance(config, CompilerConfig):
        raise ForgeCallError(f"compiler_config() must give a forge.config.CompilerConfig, not {type(config).__name__}")
    found = None
    for option in (config.mlir_config.custom_config.split() if config.mlir_config is not None else ()):
        key, _, value = option.partition("=")
        if key != "experimental-weight-dtype" or value not in _WEIGHT_DTYPES:
            raise ForgeCallError(f"tt-mlir option '{option}': the stand-in emulates experimental-weight-dtype="
                                 f"{{{','.join(_WEIGHT_DTYPES)}}} only")
        found = _WEIGHT_DTYPES[value]
    return found


class ForgeModule:
    def __init__(self, name: str):
        if not isinstance(name, str):
            raise ForgeCallError("ForgeModule: name must be a str")
        self.name = name
        # the compile's (`compiler_config()`), set as the module loads
        self.weight_format: data_formats.FormatName | None = None
        self._parameters: dict[str, Parameter] = {}
        self._constants: dict[str, Tensor] = {}
        self._constant_shapes: dict[str, tuple | None] = {}

    def add_parameter(self, name: str, parameter: Parameter) -> None:
        if name in self._parameters:
            raise ForgeCallError(f"add_parameter: '{name}' is already a parameter")
        if not isinstance(parameter, Parameter):
            raise ForgeCallError(f"add_parameter: '{name}' must be a forge.Parameter")
        self._parameters[name] = parameter

    def add_constant(self, name: str, shape=None, dtype=None) -> None:
        if name in self._constants:
            raise ForgeCallError(f"add_constant: '{name}' is already a constant")
        self._constant_shapes[name] = tuple(shape) if shape is not None else None
        self._constants[name] = Tensor(np.zeros(shape or (), dtype=np.float32), constant=True)

    def get_parameter(self, name: str) -> Parameter:
        if name not in self._parameters:
            raise ForgeCallError(f"get_parameter: no parameter '{name}'")
        return self._parameters[name]

    def get_constant(self, name: str) -> Tensor:
        if name not in self._constants:
            raise ForgeCallError(f"get_constant: no constant '{name}'")
        return self._constants[name]

    def set_parameter(self, name: str, data) -> None:
        param = self.get_parameter(name)
        array = np.asarray(data)
        if array.shape != param.shape:
            raise ForgeCallError(f"set_parameter: '{name}' has shape {param.shape}, data has {array.shape}")
        param.set_value(array)

    def set_constant(self, name: str, data) -> None:
        self.get_constant(name)
        array = np.asarray(data)
        expected = self._constant_shapes.get(name)
        if expected is not None and array.shape != expected:
            raise ForgeCallError(f"set_constant: '{name}' has shape {expected}, data has {array.shape}")
        self._constants[name] = Tensor(array, constant=True)

    def forward(self, *args):
        raise NotImplementedError

    def __call__(self, *args):
        return self.forward(*args)


def _torch_shim() -> types.ModuleType:
    """The few `torch` names emitted modules use, over numpy."""
    torch = types.ModuleType("torch")
    torch.__doc__ = "forge-opt's stand-in for the torch names emitted modules use"
    for name in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        setattr(torch, name, np.dtype(name))
    torch.__dict__.update(
        bfloat16=np.dtype(ml_dtypes.bfloat16),
        from_numpy=_from_numpy,
        tensor=_from_numpy,  # a copy in torch; no stand-in op writes into its operands
        full=lambda shape, value, dtype=None: np.full(shape, value, dtype=dtype),
    )
    return torch


class _TorchTensor(np.ndarray):
    """What `torch.from_numpy` gives: an array with torch's `.to(dtype)`."""

    def to(self, dtype) -> np.ndarray:
        return np.asarray(self).astype(dtype)


def _from_numpy(a: np.ndarray) -> np.ndarray:
    """torch.from_numpy: numpy's own dtypes only, as torch; ml_dtypes'
    (bfloat16, float8) are opaque to it ("can't convert np.ndarray of type
    numpy.void")."""
    a = np.asarray(a)
    if a.dtype.kind == "V":
        raise TypeError(f"can't convert np.ndarray of type {a.dtype} (numpy.void) to a torch tensor")
    return a.view(_TorchTensor)


def _make_modules() -> dict[str, types.ModuleType]:
    forge = types.ModuleType("forge")
    forge.__doc__ = "forge-opt's stand-in for Forge's Python API"
    op = types.ModuleType("forge.op")
    for name, fn in OP_FUNCTIONS.items():
        setattr(op, name, fn)
    config = types.ModuleType("forge.config")
    config.__dict__.update(CompilerConfig=CompilerConfig, MLIRConfig=MLIRConfig)
    forge.__dict__.update(op=op, config=config, ForgeModule=ForgeModule, Parameter=Parameter, DataFormat=DataFormat,
                          Tensor=Tensor)
    return {"forge": forge, "forge.op": op, "forge.config": config, "torch": _torch_shim()}


@contextlib.contextmanager
def standin_modules() -> Iterator[None]:
    """Make `import forge` (and `import torch`) find the stand-in for the
    duration of the block."""
    names = ("forge", "forge.op", "forge.config", "torch")
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update(_make_modules())
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_forge_module(source: str, path: str = "<forge-python>") -> dict:
    """Execute emitted Forge Python against the stand-in; its globals."""
    namespace: dict = {"__name__": "forge_generated", "__file__": path}
    with standin_modules():
        exec(compile(source, path, "exec"), namespace)
    return namespace


def forge_instance(source: str, path: str, model=None):
    """The module's ForgeModule, instantiated with its parameters loaded from
    `model` and its constants from beside `path`: ready for `forward`."""
    with standin_modules():
        namespace = load_forge_module(source, path)
        classes = [
            v for v in namespace.values()
            if isinstance(v, type) and issubclass(v, ForgeModule) and v is not ForgeModule
        ]
        if len(classes) != 1:
            raise ForgeCallError(f"expected one ForgeModule subclass, found {len(classes)}")
        module = classes[0]("module")
        module.process_framework_parameters(model)  # pyright: ignore[reportAttributeAccessIssue]  (the emitted class's)
        if "compiler_config" in namespace:  # how the module asks forge.compile to compile it
            module.weight_format = weight_format_of(namespace["compiler_config"]())
    return module


def run_instance(module, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`forward` of a loaded module on numpy inputs, compiled as its
    `compiler_config()` asks."""
    token = WEIGHT_FORMAT.set(module.weight_format)
    try:
        outputs = module.forward(*(Tensor(x) for x in inputs))
    finally:
        WEIGHT_FORMAT.reset(token)
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    return [np.asarray(o.value()) for o in outputs]


def run_forge_module(source: str, inputs: list[np.ndarray], model=None, constants=None) -> list[np.ndarray]:
    """Instantiate the module's ForgeModule class, load its parameters from
    `model` (an ONNX ModelProto) and its computed constants (`constants`, an
    emitted `ForgePythonModule`'s, saved next to the source), and run
    `forward` on `inputs`."""
    with tempfile.TemporaryDirectory() as tmp, standin_modules():
        path = Path(tmp) / "module.py"
        path.write_text(source)
        if constants is not None and constants.constants:
            np.savez(Path(tmp) / constants.constants_file, **constants.constants)
        module = forge_instance(source, os.fspath(path), model)
        return run_instance(module, inputs)
