"""The oracle: what the model computes by ONNX's semantics, the same on
every CPU.

onnxruntime runs the model with its graph optimizations off: fused kernels
(QDQ into int8 convolutions, Conv+BatchNormalization, attention) compute
something close to the model and differ between AVX2 and AVX-512 machines;
the graph as written is the semantics. Its 8-bit integer products differ
between CPUs even so, and are written as ONNX's exact arithmetic first
(`exact_integers`). ONNX's reference implementation is
the oracle only where onnxruntime lacks what the model needs (an op, a form
of one, an opset or IR version), and the report says so. Inputs the model
does not accept are an input error before anything runs: onnxruntime would
refuse them, and a fallback oracle that took them anyway would bless a
program for inputs the model never sees.

Nothing is written beside the model: onnxruntime reads its external data
from the model's folder (`session.model_external_initializers_file_folder_path`),
as it would from the model's own path, whatever the working directory, and
at the cost of its own run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.exact_integers import with_exact_integer_products
from forge_opt.frontends.onnx.shapes import dim_size, is_known, symbol_names
from forge_opt.frontends.onnx.values import with_external_data


class InputError(ForgeOptError):
    """Inputs the model does not accept (a name, an element type, a rank or
    a size); never a reason to change oracles."""


@dataclass
class Expected:
    """The reference outputs, the oracle that computed them, and why it was
    not onnxruntime (when it was not)."""

    outputs: list[np.ndarray]
    oracle: str = "onnxruntime"
    why: str = ""


def graph_inputs(model: ModelProto) -> list[onnx.ValueInfoProto]:
    """The inputs a caller feeds: graph inputs that are not initializers."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def check_feeds(
    model: ModelProto, feeds: Mapping[str, np.ndarray], what: str = "the model", *, partial: bool = False
) -> None:
    """Raise `InputError` naming the first input `feeds` gets wrong: missing
    (unless `partial`), unknown to the model, or of another element type,
    rank or fixed size."""
    declared = graph_inputs(model)
    if partial:
        declared = [i for i in declared if i.name in feeds]
    names = [i.name for i in declared]
    extra = [n for n in feeds if n not in names]
    if extra:
        raise InputError(f"{what} has no input '{extra[0]}' (its inputs: {', '.join(names) or 'none'})")
    for info in declared:
        if info.name not in feeds:
            raise InputError(f"no value given for input '{info.name}' of {what}")
        value = np.asarray(feeds[info.name])
        t = info.type.tensor_type
        if not info.type.HasField("tensor_type"):
            continue  # sequences and optionals: onnxruntime checks them
        if t.elem_type:
            want = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)
            if value.dtype != want:
                raise InputError(f"input '{info.name}' of {what} is {value.dtype}, where the model takes "
                                 f"{onnx.helper.tensor_dtype_to_string(t.elem_type).removeprefix('TensorProto.')}")
        if not t.HasField("shape"):
            continue
        dims = t.shape.dim
        if value.ndim != len(dims):
            raise InputError(f"input '{info.name}' of {what} has rank {value.ndim} (shape {list(value.shape)}), "
                             f"where the model takes rank {len(dims)} ({_dims(dims)})")
        for axis, (d, size) in enumerate(zip(dims, value.shape)):
            if is_known(d) and d.dim_value != size:
                raise InputError(f"input '{info.name}' of {what} has shape {list(value.shape)}, where the model "
                                 f"takes {_dims(dims)} (axis {axis} is {size}, not {d.dim_value})")
    _check_symbols(declared, feeds, what)


def _check_symbols(declared: list[onnx.ValueInfoProto], feeds: Mapping[str, np.ndarray], what: str) -> None:
    """A dim named by arithmetic of others (Optimum's `past_sequence_length
    + sequence_length`) of the size it computes, where each of those has one
    size: an attention mask one column short is the user's, named, not an
    index error deep in a run. A symbol given two sizes is not refused:
    onnxruntime runs it (Optimum's first call of a merged seq2seq decoder
    gives `encoder_sequence_length` 8 in the mask and 0 in the empty past);
    `symbol_sizes` tells the report."""
    sizes = symbol_sizes(declared, feeds)
    single = {symbol: next(iter(seen.values())) for symbol, seen in sizes.items() if len(set(seen.values())) == 1}
    for info in declared:
        if info.name not in feeds or not info.type.tensor_type.HasField("shape"):
            continue
        for d, size in zip(info.type.tensor_type.shape.dim, np.shape(feeds[info.name])):
            parts = symbol_names(d.dim_param) if d.dim_param else []
            if parts == [d.dim_param] or not all(p in single for p in parts):
                continue
            want = dim_size(d.dim_param, single)
            if want is not None and want != size:
                raise InputError(f"input '{info.name}' of {what} is {size} along '{d.dim_param}', which the other "
                                 f"inputs make {want}")


def symbol_sizes(declared: list[onnx.ValueInfoProto], feeds: Mapping[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """Each named symbolic dim of the inputs (an identifier: `?`, `-1` or an
    empty name is an unknown size of its own, as onnxruntime reads it), with
    the size each input given gives it."""
    sizes: dict[str, dict[str, int]] = {}
    for info in declared:
        if info.name not in feeds or not info.type.tensor_type.HasField("shape"):
            continue
        for d, size in zip(info.type.tensor_type.shape.dim, np.shape(feeds[info.name])):
            if d.dim_param.isidentifier():
                sizes.setdefault(d.dim_param, {}).setdefault(info.name, int(size))
    return sizes


def two_sizes_note(model: ModelProto, feeds: Mapping[str, np.ndarray]) -> list[str]:
    """The report's lines for each symbol the inputs give more than one size
    (each input is compiled at its own shape)."""
    notes = []
    for symbol, seen in symbol_sizes(graph_inputs(model), feeds).items():
        if len(set(seen.values())) > 1:
            given = ", ".join(f"{size} ({name})" for name, size in seen.items())
            notes.append(f"inputs: the symbol '{symbol}' takes more than one size, {given}; each input is compiled "
                         "at the shape given")
    return notes


def _dims(dims) -> str:
    return "[" + ", ".join(str(d.dim_value) if is_known(d) else (d.dim_param or "?") for d in dims) + "]"


def expected_outputs(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]) -> Expected:
    """The model's outputs on onnxruntime (optimizations off) or, where
    onnxruntime lacks what the model needs, on ONNX's reference
    implementation. Checks `feeds` first (`InputError`)."""
    check_feeds(model, feeds)
    try:
        return Expected(onnxruntime_outputs(model, base, feeds))
    except _Unsupported as lacking:
        why = f"onnxruntime cannot run the model: {lacking}"
    from onnx.reference import ReferenceEvaluator

    try:
        with np.errstate(all="ignore"):  # the model's own overflows and NaN, as onnxruntime gives them silently
            outputs = ReferenceEvaluator(with_external_data(model, base)).run(None, feeds)
    except Exception as e:  # the reference raises whatever its op implementations raise
        raise ForgeOptError(f"{why}; onnx.reference cannot run it either: {type(e).__name__}: {e}") from None
    return Expected([np.asarray(o) for o in outputs], "onnx.reference", why)


class _Unsupported(Exception):
    """onnxruntime lacks something the model needs: the one reason to ask
    ONNX's reference implementation instead."""


#: what onnxruntime says when it lacks an op, a form of one, a type or a version: besides its NOT_IMPLEMENTED
#: status, the messages of an opset, IR version, domain or element type it does not know
_LACKS = ("No Op registered", "opset", "IR version", "is under development", "Could not find an implementation",
          "domain_version", "not a registered function/op", "can't be converted to MLDataType", "not supported",
          "No corresponding Numpy type")


def _lacks(error: Exception, model: ModelProto, loading: bool) -> bool:
    """Whether onnxruntime's `error` says it lacks something the model needs,
    not that the model or its inputs are wrong. A model onnxruntime cannot
    load is judged by ONNX's own checker: one ONNX accepts (types, shapes,
    opsets) asks more than onnxruntime implements (a float8 Cast, an
    LSTM's `layout=1`); one ONNX rejects is the model's error."""
    message = str(error)
    if type(error).__name__ == "NotImplemented" or "NOT_IMPLEMENTED" in message:
        return True
    if any(s in message for s in _LACKS):
        return True
    return loading and not _invalid(model)


def _invalid(model: ModelProto) -> str:
    """ONNX's complaint about the model's element types (its type inference,
    which checks each op's type constraints), or "" when it has none. Not
    strict: ONNX's shape inference refuses forms its ops allow (Einsum's
    broadcast ellipsis)."""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=False)
    except Exception as e:  # shape inference's errors have no common base
        return str(e)
    return ""


def onnxruntime_outputs(
    model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], *, optimized: bool = False, threads: int = 0
) -> list[np.ndarray]:
    """The model's outputs on onnxruntime's CPU provider, its graph as written
    and its integer products exact (`with_exact_integer_products`).
    `optimized`: with onnxruntime's default rewrites, without its 8-bit fusions;
    `threads`: its intra-op threads, 0 its default; both for measuring the
    checker.
    Raises `_Unsupported` where onnxruntime lacks what the model needs,
    `ForgeOptError` for anything else it refuses."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ForgeOptError("forge-check compares with onnxruntime: pip install 'forge-opt[test]'") from None

    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: its errors reach the user in our report
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    else:  # its rewrites, but no QDQ group fused into an 8-bit kernel, whose sums differ by CPU (`exact_integers`)
        options.add_session_config_entry("session.disable_quant_qdq", "1")
    options.intra_op_num_threads = threads
    if base is not None:  # the model is given as bytes: its external data paths are relative to its folder
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", str(base))
    loading = True
    try:
        exact = with_exact_integer_products(model).SerializeToString()
        session = ort.InferenceSession(exact, options, providers=["CPUExecutionProvider"])
        loading = False
        # copied: an array onnxruntime returns keeps its session's whole memory arena alive
        return [np.array(value) for value in session.run(None, feeds)]
    except Exception as e:  # onnxruntime's own errors carry no common base class
        if _lacks(e, model, loading):
            raise _Unsupported(str(e)) from None
        raise ForgeOptError(f"onnxruntime refuses the model or its inputs: {e}") from None
