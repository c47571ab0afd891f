"""A stand-in for Forge's Python API, backed by the numpy kernels, to run
emitted Forge modules without Forge.

Function names, parameter names, order and defaults are Forge's
(../shared/reference/forge_api.md); calls Forge would reject raise here too.
Nothing named `forge` is installed: `standin_modules()` puts the stand-in in
`sys.modules` only while an emitted module is loaded and run.
"""

from __future__ import annotations

import contextlib
import enum
import sys
import types
from collections.abc import Iterator

import numpy as np

from forge_opt.interpreters import forge_kernels as k


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


class Tensor:
    """A value flowing through `forward`: a numpy array with a shape."""

    def __init__(self, value: np.ndarray):
        self._value = np.asarray(value)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    def value(self) -> np.ndarray:
        return self._value

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self._value.dtype})"


class Parameter(Tensor):
    def __init__(self, *shape: int, requires_grad: bool = True, dev_data_format: DataFormat | None = None):
        super().__init__(np.zeros(shape, dtype=np.float32))
        self.requires_grad = requires_grad
        self.dev_data_format = dev_data_format


def _check_name(fn: str, name: object) -> None:
    if not isinstance(name, str):
        raise ForgeCallError(f"{fn}: the first argument (name) must be a str, got {type(name).__name__}")


def _tensor(fn: str, what: str, value: object) -> np.ndarray:
    if isinstance(value, Tensor):
        return value.value()
    raise ForgeCallError(f"{fn}: {what} must be a Tensor, got {type(value).__name__}")


def _int(fn: str, what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ForgeCallError(f"{fn}: {what} must be an int, got {value!r}")
    return int(value)


# -- forge.op -----------------------------------------------------------------


def Index(name: str, operandA: Tensor, dim: int, start: int, stop: int | None = None, stride: int = 1) -> Tensor:
    _check_name("Index", name)
    x = _tensor("Index", "operandA", operandA)
    dim = _int("Index", "dim", dim)
    start = _int("Index", "start", start)
    stride = _int("Index", "stride", stride)
    if not -x.ndim <= dim < x.ndim:
        raise ForgeCallError(f"Index: dim {dim} is out of range for rank {x.ndim}")
    dim %= x.ndim
    size = x.shape[dim]
    if stop is None:
        stop = start + 1
    stop = _int("Index", "stop", stop)
    if stop < 0:
        stop += size
    if not start < size:
        raise ForgeCallError(f"Index: start {start} must be < {size}")
    if not stop <= size:
        raise ForgeCallError(f"Index: stop {stop} must be <= {size}")
    if stride < 0 and size != 1:
        raise ForgeCallError("Index: a negative stride is only allowed on a dimension of size 1")
    if stride == 0:
        raise ForgeCallError("Index: stride must not be 0")
    return Tensor(k.index(x, dim, start, stop, stride))


OP_FUNCTIONS = {"Index": Index}


# -- ForgeModule ----------------------------------------------------------------


class ForgeModule:
    def __init__(self, name: str):
        if not isinstance(name, str):
            raise ForgeCallError("ForgeModule: name must be a str")
        self.name = name
        self._parameters: dict[str, Parameter] = {}
        self._constants: dict[str, Tensor] = {}

    def add_parameter(self, name: str, parameter: Parameter) -> None:
        if name in self._parameters:
            raise ForgeCallError(f"add_parameter: '{name}' is already a parameter")
        self._parameters[name] = parameter

    def add_constant(self, name: str, shape=None, dtype=None) -> None:
        if name in self._constants:
            raise ForgeCallError(f"add_constant: '{name}' is already a constant")
        self._constants[name] = Tensor(np.zeros(shape or (), dtype=np.float32))

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
        param._value = array

    def set_constant(self, name: str, data) -> None:
        self.get_constant(name)
        self._constants[name] = Tensor(np.asarray(data))

    def forward(self, *args):
        raise NotImplementedError

    def __call__(self, *args):
        return self.forward(*args)


def _make_modules() -> dict[str, types.ModuleType]:
    forge = types.ModuleType("forge")
    forge.__doc__ = "forge-opt's stand-in for Forge's Python API"
    op = types.ModuleType("forge.op")
    for name, fn in OP_FUNCTIONS.items():
        setattr(op, name, fn)
    forge.op = op
    forge.ForgeModule = ForgeModule
    forge.Parameter = Parameter
    forge.DataFormat = DataFormat
    forge.Tensor = Tensor
    return {"forge": forge, "forge.op": op}


@contextlib.contextmanager
def standin_modules() -> Iterator[None]:
    """Make `import forge` find the stand-in for the duration of the block."""
    saved = {name: sys.modules.get(name) for name in ("forge", "forge.op")}
    sys.modules.update(_make_modules())
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def load_forge_module(source: str, filename: str = "<forge-python>") -> dict:
    """Execute emitted Forge Python against the stand-in; its globals."""
    namespace: dict = {"__name__": "forge_generated"}
    with standin_modules():
        exec(compile(source, filename, "exec"), namespace)
    return namespace


def run_forge_module(source: str, inputs: list[np.ndarray], model=None) -> list[np.ndarray]:
    """Instantiate the module's ForgeModule class, load its parameters from
    `model` (an ONNX ModelProto), and run `forward` on `inputs`."""
    with standin_modules():
        namespace = load_forge_module(source)
        classes = [
            v for v in namespace.values()
            if isinstance(v, type) and issubclass(v, ForgeModule) and v is not ForgeModule
        ]
        if len(classes) != 1:
            raise ForgeCallError(f"expected one ForgeModule subclass, found {len(classes)}")
        module = classes[0]("module")
        module.process_framework_parameters(model)
        outputs = module.forward(*(Tensor(x) for x in inputs))
    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    return [o.value() for o in outputs]
