"""Each device's weights of a tensor-parallel plan: blocks read in bands,
stored as external data, laid out at load, written once, shared."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from model_helpers import make_model
from onnx import TensorProto, helper, numpy_helper
from test_tensor_parallel import RNG, f32, linear_model

from forge_opt.split.api import tensor_parallel
from forge_opt.split.runner import run_parallel


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_a_block_read_in_bands_is_the_block(monkeypatch, tmp_path, axis):
    """A device's block of a weight in a mapped external-data file, read a
    few rows at a time with each band's pages dropped after, is its block."""
    from forge_opt.dialects.elements import attr_to_array
    from forge_opt.frontends.onnx import load_model
    from forge_opt.frontends.onnx.values import tensor_attr
    from forge_opt.interpreters.shard import block
    from forge_opt.targets.devices import weight_file

    w = f32(8, 12, 4)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 12, 4])],
                              [numpy_helper.from_array(w, "w")])
    onnx.save(make_model(graph.node, [], list(graph.output), list(graph.initializer)), str(tmp_path / "m.onnx"),
              save_as_external_data=True, location="m.data", size_threshold=0)
    model, base = load_model(tmp_path / "m.onnx")
    view = attr_to_array(tensor_attr(model.graph.initializer[0], base, "w"))
    monkeypatch.setattr(weight_file, "BAND_BYTES", 3 * 12 * 4 * 4)  # three rows a band
    for rank in range(4 if axis == 2 else 2):
        devices = 4 if axis == 2 else 2
        lazy = weight_file.WeightBlock(view, axis, rank, devices)
        assert len(list(lazy.bands())) == (2 if axis == 0 else 3)  # 4 rows or 8 rows
        np.testing.assert_array_equal(lazy.array(), block(w, axis, rank, devices))
        bands = weight_file.WeightFile(tmp_path)
        bands.add("w", lazy)
        bands.close()
        written = onnx.load(str(tmp_path / "weights.onnx")).graph.initializer[0]
        np.testing.assert_array_equal(numpy_helper.to_array(written), block(w, axis, rank, devices))
    # every device's block at once, each band of rows read once for all (blocks of columns)
    ranks = range(4 if axis == 2 else 2)
    files = []
    for rank in ranks:
        (tmp_path / f"dev{rank}").mkdir()
        files.append(weight_file.WeightFile(tmp_path / f"dev{rank}"))
    lazy = [weight_file.WeightBlock(view, axis, rank, len(ranks)) for rank in ranks]
    assert all(lazy[0].read_together(b) for b in lazy[1:]) == (axis != 0)
    kept = weight_file.add_together(files, ["w"] * len(ranks), lazy, [rank == 0 for rank in ranks])
    np.testing.assert_array_equal(kept[0], block(w, axis, 0, len(ranks)))
    assert all(k is None for k in kept[1:])
    for rank, f in zip(ranks, files):
        f.close()
        written = onnx.load(str(tmp_path / f"dev{rank}" / "weights.onnx")).graph.initializer[0]
        np.testing.assert_array_equal(numpy_helper.to_array(written), block(w, axis, rank, len(ranks)))
    np.testing.assert_array_equal(view, w)  # dropped pages read again from the file


@pytest.mark.parametrize("refused", [False, True])
def test_a_block_of_rows_is_copied_by_the_kernel(monkeypatch, tmp_path, refused):
    """A device's block of rows of a mapped weight (and a whole weight) goes
    from the weight file to the device's by `os.copy_file_range`, never read
    into this process; where the file system refuses, it is written."""
    import errno
    import os

    from forge_opt.dialects.elements import attr_to_array
    from forge_opt.frontends.onnx import load_model
    from forge_opt.frontends.onnx.values import mapped_span, tensor_attr
    from forge_opt.targets.devices import weight_file

    w = f32(8, 6)
    onnx.save(make_model([helper.make_node("Identity", ["w"], ["y"])], [],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 6])],
                         [numpy_helper.from_array(w, "w")]),
              str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    model, base = load_model(tmp_path / "m.onnx")
    view = attr_to_array(tensor_attr(model.graph.initializer[0], base, "w"))
    assert mapped_span(view) is not None and mapped_span(view.copy()) is None
    copies, kernel = [], os.copy_file_range

    def copy_file_range(*args):
        copies.append(args[2])
        if refused:
            raise OSError(errno.EXDEV, "cross-device")
        return kernel(*args)

    monkeypatch.setattr(os, "copy_file_range", copy_file_range)
    (tmp_path / "dev").mkdir()
    f = weight_file.WeightFile(tmp_path / "dev")
    f.add("rows", weight_file.WeightBlock(view, 0, 1, 2))
    f.add("whole", view)
    f.close()
    index = onnx.load(str(tmp_path / "dev" / "weights.onnx"))
    written = {t.name: numpy_helper.to_array(t) for t in index.graph.initializer}
    np.testing.assert_array_equal(written["rows"], w[4:])
    np.testing.assert_array_equal(written["whole"], w)
    assert copies == [4 * 6 * 4, 8 * 6 * 4]


def test_a_kernel_copy_that_fails_fails_the_write(monkeypatch, tmp_path):
    """The kernel's copies run on a thread of their own: one that fails (not
    a refusal, which is written instead) is raised when the file is closed,
    not lost with a hole in the device's weights."""
    import os

    from forge_opt.dialects.elements import attr_to_array
    from forge_opt.frontends.onnx import load_model
    from forge_opt.frontends.onnx.values import tensor_attr
    from forge_opt.targets.devices import weight_file

    onnx.save(make_model([helper.make_node("Identity", ["w"], ["y"])], [],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 6])],
                         [numpy_helper.from_array(f32(8, 6), "w")]),
              str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    model, base = load_model(tmp_path / "m.onnx")
    view = attr_to_array(tensor_attr(model.graph.initializer[0], base, "w"))

    def copy_file_range(*args):
        raise MemoryError("the kernel's copy failed")

    monkeypatch.setattr(os, "copy_file_range", copy_file_range)
    (tmp_path / "dev").mkdir()
    f = weight_file.WeightFile(tmp_path / "dev")
    f.add("whole", view)
    with pytest.raises(MemoryError, match="the kernel's copy failed"):
        f.close()
    assert not (tmp_path / "dev" / "weights.onnx").exists()


def test_each_devices_weights_are_external_data_of_its_blocks(tmp_path):
    folder = tmp_path / "tp"
    tensor_parallel(linear_model(2), folder, 2)
    for rank in range(2):
        index = onnx.load(str(folder / f"dev{rank}" / "weights.onnx"), load_external_data=False)
        assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in index.graph.initializer)
        weights = onnx.load(str(folder / f"dev{rank}" / "weights.onnx"))
        sizes = {t.name: numpy_helper.to_array(t).shape for t in weights.graph.initializer}
        assert sizes["w0.shard"] == (16, 8) and sizes["w1.shard"] == (8, 16)
        total = sum(numpy_helper.to_array(t).nbytes for t in weights.graph.initializer)
        assert (folder / f"dev{rank}" / "weights.bin").stat().st_size == total


def test_a_weight_laid_out_at_load_is_stored_laid_out(tmp_path):
    """A Gemm's transB=1 on a weight only one segment reads: each device's
    weights file holds it transposed, and its module loads it as it is."""
    from forge_opt.execution.oracle import onnxruntime_outputs
    from forge_opt.split.runner import assemble

    model = make_model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(f32(8, 16), "w"), numpy_helper.from_array(f32(8), "b")],
    )
    plan = tensor_parallel(model, tmp_path / "tp", 2, min_size=10**6)  # replicated: one segment
    for rank in range(2):
        index = onnx.load(str(tmp_path / "tp" / f"dev{rank}" / "weights.onnx"), load_external_data=False)
        assert {t.name: list(t.dims) for t in index.graph.initializer}["w"] == [16, 8]
        assert ".transpose(" not in (tmp_path / "tp" / f"dev{rank}" / "segment_0.py").read_text()
    x = {"x": RNG.standard_normal((4, 16)).astype(np.float32)}
    got, differ = assemble(plan, run_parallel(tmp_path / "tp", x))
    assert not differ
    np.testing.assert_allclose(got["y"], onnxruntime_outputs(model, None, x)[0], rtol=1e-5, atol=1e-5)


def test_a_parameter_is_laid_out_in_place(tmp_path):
    """`WeightFile.lay_out` rewrites one parameter in its new order and shape,
    the parameters around it untouched."""
    from forge_opt.targets.devices.weight_file import WeightFile

    a, w, b = f32(3), f32(2, 5), f32(4)
    f = WeightFile(tmp_path)
    for name, array in (("a", a), ("w", w), ("b", b)):
        f.add(name, array)
    f.lay_out("w", [("transpose", (1, 0)), ("reshape", (5, 1, 2))])
    f.close()
    loaded = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "weights.onnx")).graph.initializer}
    np.testing.assert_array_equal(loaded["w"], w.T.reshape(5, 1, 2))
    np.testing.assert_array_equal(loaded["a"], a)
    np.testing.assert_array_equal(loaded["b"], b)


def test_an_equal_small_block_of_a_weight_is_written_once(tmp_path):
    """Two small blocks of one weight with the same content are one
    parameter; with other content, or of another weight, two."""
    from forge_opt.targets.devices.weight_file import WeightFile

    f = WeightFile(tmp_path)
    w, other = f32(4, 2), f32(4, 2)
    assert f.add("w.shard", w) == "w.shard"
    assert f.add("v.shard", w.copy()) == "v.shard"  # another weight: its own, though equal
    assert f.add("w.shard1", other) == "w.shard1"  # the same weight, other values
    assert f.add("w.shard2", w.copy()) == "w.shard"  # read back and found equal
    assert f.add("w.shard3", other.copy()) == "w.shard1"
    assert f.add("w.shard4", w.reshape(2, 4)) == "w.shard4"  # same bytes, another shape
    f.close()
    loaded = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "weights.onnx")).graph.initializer}
    assert sorted(loaded) == ["v.shard", "w.shard", "w.shard1", "w.shard4"]
    np.testing.assert_array_equal(loaded["w.shard1"], other)


def test_devices_running_the_same_module_share_its_file(tmp_path):
    """A device that runs device 0's very module links its files, the
    same bytes; the last device, lowered on its own to compare, has its own."""
    tensor_parallel(linear_model(2), tmp_path / "tp", 4)
    first = tmp_path / "tp" / "dev0" / "segment_0.py"
    for rank in range(1, 4):
        mine = tmp_path / "tp" / f"dev{rank}" / "segment_0.py"
        assert mine.read_text() == first.read_text()
        assert mine.samefile(first) == (rank < 3)


def test_a_kept_block_becomes_an_attribute_over_its_own_bytes():
    """The writer's segment modules hold each kept block without a copy;
    the array turns read-only under it. A strided array is copied."""
    from forge_opt.dialects.elements import array_view_attr, attr_to_array

    block = f32(6, 4)
    attr = array_view_attr(block)
    view = attr_to_array(attr)
    assert np.shares_memory(view, block) and not block.flags.writeable
    np.testing.assert_array_equal(view, block)
    assert attr == array_view_attr(block.copy())  # compared by value, as a copy's attribute is
    strided = f32(6, 4)[:, ::2]
    copied = attr_to_array(array_view_attr(strided))
    assert not np.shares_memory(copied, strided) and strided.flags.writeable
    np.testing.assert_array_equal(copied, strided)
