"""Forge's matmul, softmax, normalisation and embedding functions
(forge/forge/op/matmul.py, nn.py, embedding.py; forge/csrc/ops/op_*.cpp):
their records, checks, shapes, element types and goldens."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.forge_functions.record import (
    REQUIRED,
    Call,
    ForgeFunction,
    Shape,
    broadcast_error,
    dim,
    dim_error,
    dtype_of,
    promoted,
    rule,
    same_shape,
)


@rule("matmul-shapes", "the operands' inner dims agree and their batch dims broadcast (shape() assumes it; the golden "
      "torch.matmul raises otherwise)", "forge/csrc/ops/op_matmul.cpp shape(), eval()")
def _matmul_shapes(call: Call) -> str | None:
    a, b = call.shape(0), call.shape(1)
    if not a or not b:
        return f"operands of shapes {list(a)} and {list(b)} are no matrices or vectors"
    if a[-1] != b[-2 if len(b) > 1 else -1]:
        return f"shapes {list(a)} and {list(b)} do not agree on the inner dimension"
    if len(a) > 2 and len(b) > 2:
        return broadcast_error([a[:-2], b[:-2]])
    return None


@rule("matmul-bias", "a bias is added to the product by a separate Add: it broadcasts to the product's shape without "
      "widening it", "forge/forge/op/matmul.py Matmul; forge/csrc/ops/op_common.cpp compute_elementwise_binary_shape")
def _matmul_bias(call: Call) -> str | None:
    if len(call.shapes) < 3 or call.shapes[2] is None:
        return None
    a, b, bias = call.shape(0), call.shape(1), call.shape(2)
    if len(a) < 2 or len(b) < 2:
        return None
    product = (*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])
    wrong = broadcast_error([product, bias])
    if wrong is None and (len(bias) > len(product) or np.broadcast_shapes(product, bias) != product):
        wrong = f"a bias of shape {list(bias)} widens the product's {list(product)}"
    return wrong


def _matmul_shape(call: Call) -> Shape:
    """op_matmul.cpp shape(): 1-D operands as torch.matmul takes them; the
    bias is a separate Add that may not widen the product (rule matmul-bias)."""
    a, b = call.shape(0), call.shape(1)
    if len(a) == 1 and len(b) == 1:  # a dot product
        return ()
    if len(a) == 1:  # [K] x [..., K, N]
        return (*b[:-2], b[-1])
    if len(b) == 1:  # [..., M, K] x [K]
        return (*a[:-2], a[-2])
    return (*shapes.broadcast(a[:-2], b[:-2]), a[-2], b[-1])


def matmul(a, b, bias=None):
    # op_matmul.cpp's eval: float16 operands promoted to float32 (the result cast back by `golden`)
    a, b = (widened(x) if x.dtype == np.float16 else x for x in (a, b))
    out = np.matmul(a, b)
    return out if bias is None else out + bias


#: a float16 array of at least this many elements is widened in halves at once
_WIDEN_IN_HALVES = 1 << 20


def widened(x: np.ndarray) -> np.ndarray:
    """float16 as float32, exactly. numpy's cast is one thread, and a float16
    model's weights cross it at every matmul (most of a float16 LLM's run):
    a large one is cast in two halves at once."""
    flat = x.ravel(order="K") if x.flags.c_contiguous or x.flags.f_contiguous else None
    if x.size < _WIDEN_IN_HALVES or flat is None:
        return x.astype(np.float32)
    out = np.empty(flat.shape, np.float32)
    half = flat.size // 2
    with ThreadPoolExecutor(2) as pool:  # the cast releases the GIL
        list(pool.map(lambda part: np.copyto(out[part], flat[part]), (slice(0, half), slice(half, None))))
    # in x's own memory order (a weight in a transposed layout is Fortran-ordered)
    return out.reshape(x.shape, order="C" if x.flags.c_contiguous else "F")


MATMUL = ForgeFunction(
    "Matmul", (("operandA", "single"), ("operandB", "single"), ("bias", "optional")), _matmul_shape, matmul,
    promoted, rules=(_matmul_shapes, _matmul_bias),
    weight_operand=1,
)


@rule("softmax-dim", "dim (keyword-only) in range for the rank", "forge/csrc/ops/op_softmax.cpp, op_log_softmax.cpp")
def _softmax_dim(call: Call) -> str | None:
    return dim_error(dim(call))


def softmax(x, dim, stable=True):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return (e / e.sum(axis=dim, keepdims=True)).astype(x.dtype)


def log_softmax(x, dim, stable=True):
    shifted = x - x.max(axis=dim, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))).astype(x.dtype)


@rule("layernorm-shape", "normalises the last dim only; gamma and beta are [..., N] with leading 1s",
      "forge/csrc/ops/op_layernorm.cpp")
def _layernorm_shape(call: Call) -> str | None:
    if call.keywords["dim"] not in (-1, call.rank - 1):
        return f"dim {call.keywords['dim']} must be the last dimension"
    n = call.shape(0)[-1]
    for name, shape in zip(("weights", "bias"), call.shapes[1:3]):
        if not shape or shape[-1] != n or any(d != 1 for d in shape[:-1]):
            return f"{name} has shape {list(shape or ())}, expected [..., {n}] with leading 1s"
    return None


def layernorm(x, weights, bias, dim=-1, epsilon=1e-5):
    mean = x.mean(axis=dim, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=dim, keepdims=True)
    return ((x - mean) / np.sqrt(var + epsilon) * weights + bias).astype(x.dtype)


def batchnorm(x, weights, bias, running_mean, running_var, epsilon=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    scale = weights.reshape(shape) / np.sqrt(running_var.reshape(shape) + epsilon)
    return ((x - running_mean.reshape(shape)) * scale + bias.reshape(shape)).astype(x.dtype)


@rule("embedding-table", "indices first, then a 2-D table", "forge/csrc/ops/op_embedding.cpp")
def _embedding_table(call: Call) -> str | None:
    if len(call.shape(1)) != 2:
        return f"the table has shape {list(call.shape(1))}; it must be 2-D"
    if np.dtype(call.dtypes[0]).kind not in "iu":
        return f"indices have dtype {np.dtype(call.dtypes[0]).name}; they must be integers"
    return None


def _embedding(indices, embedding_table):
    return embedding_table[indices.astype(np.int64)]


_SOFTMAX_KEYWORDS = (("dim", REQUIRED), ("stable", True))

FUNCTIONS = (
    MATMUL,
    ForgeFunction("Softmax", (("operandA", "single"),), same_shape, softmax, keywords=_SOFTMAX_KEYWORDS,
                  rules=(_softmax_dim,), keyword_only=True),
    ForgeFunction("LogSoftmax", (("operandA", "single"),), same_shape, log_softmax, keywords=_SOFTMAX_KEYWORDS,
                  rules=(_softmax_dim,), keyword_only=True),
    ForgeFunction(
        "Layernorm", (("operandA", "single"), ("weights", "single"), ("bias", "single")), same_shape, layernorm,
        keywords=(("dim", -1), ("epsilon", 1e-5)), float_keywords=("epsilon",), rules=(_layernorm_shape,),
    ),
    ForgeFunction(
        "Batchnorm",
        (("operandA", "single"), ("weights", "single"), ("bias", "single"), ("running_mean", "single"),
         ("running_var", "single")),
        same_shape, batchnorm, keywords=(("epsilon", 1e-5),), float_keywords=("epsilon",),
    ),
    ForgeFunction(
        "Embedding", (("indices", "single"), ("embedding_table", "single")),
        lambda call: (*call.shape(0), call.shape(1)[1]), _embedding, dtype_of(1),
        rules=(_embedding_table,),
    ),
)
