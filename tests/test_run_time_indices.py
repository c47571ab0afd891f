"""GatherElements and GatherND of indices computed at run time (a tree
ensemble compiled to tensors by hummingbird-ml walks its trees this way),
and Clip of bounds computed at run time, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import make_model, value_info
from onnx import TensorProto, helper

from forge_opt.check import MATCH, check_model


def _check(node, data_shape, indices, out_shape):
    model = make_model([node], [value_info("x", data_shape), value_info("i", list(indices.shape), TensorProto.INT64)],
                       [value_info("y", out_shape)])
    x = np.random.default_rng(0).standard_normal(data_shape).astype(np.float32)
    report = check_model(model, {"x": x, "i": indices})
    assert report.status == MATCH, report.error or report.format()
    assert "AdvIndex" in report.forge_python or "Embedding" in report.forge_python


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_of_run_time_indices(axis):
    shape = [3, 4, 5]
    rng = np.random.default_rng(1)
    ishape = list(shape)
    ishape[axis] = 2
    n = shape[axis]
    indices = rng.integers(-n, n, ishape).astype(np.int64)  # negatives count back
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)
    _check(node, shape, indices, ishape)


@pytest.mark.parametrize(
    "batch_dims, ishape, out",
    [
        (0, [2, 2], [2, 5]),  # pairs address rows of [3, 4, 5]: slices of 5
        (0, [2, 3], [2]),  # triples address elements
        (1, [3, 2, 1], [3, 2, 5]),  # per batch, an index into the 4 rows
        (1, [3, 2], [3]),  # per batch, a pair addresses an element
    ],
)
def test_gather_nd_of_run_time_indices(batch_dims, ishape, out):
    shape = [3, 4, 5]
    rng = np.random.default_rng(2)
    depth = ishape[-1]
    sizes = shape[batch_dims : batch_dims + depth]
    indices = np.stack([rng.integers(-s, s, ishape[:-1]) for s in sizes], axis=-1).astype(np.int64)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    _check(node, shape, indices, out)
