"""The forge-python target writes a program for several devices itself: stock
`xdsl-opt` (through the `xdsl.universe` entry point) and forge-opt's
`-o DIR/` make the same folder, and `tensor_parallel` is import, pipeline,
target."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import onnx
import pytest
from audit_models import mlp
from xdsl.xdsl_opt_main import xDSLOptMain

from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.runner import run_parallel
from forge_opt.tools.forge_opt import run as forge_opt


def _as_mlir(tmp_path: Path) -> Path:
    """The audit's MLP in the `onnx` dialect, which stock xdsl-opt reads."""
    onnx.save(mlp(), str(tmp_path / "mlp.onnx"))
    assert forge_opt([str(tmp_path / "mlp.onnx"), "-o", str(tmp_path / "mlp.mlir")]) == 0
    return tmp_path / "mlp.mlir"


def _xdsl_opt(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        xDSLOptMain(args=list(args)).run()
    return out.getvalue()


def test_stock_xdsl_opt_writes_a_program_for_several_devices(tmp_path):
    source = _as_mlir(tmp_path)
    report = _xdsl_opt(str(source), "-p", "onnx-to-forge{devices=2}", "-t",
                       f'forge-python{{folder="{tmp_path / "stock"}"}}')
    assert "1 segment on 2 devices" in report
    assert forge_opt([str(source), "-p", "onnx-to-forge{devices=2}", "-t", "forge-python", "-o",
                      f"{tmp_path / 'ours'}/"]) == 0
    stock = sorted(p.relative_to(tmp_path / "stock") for p in (tmp_path / "stock").rglob("*") if p.is_file())
    ours = sorted(p.relative_to(tmp_path / "ours") for p in (tmp_path / "ours").rglob("*") if p.is_file())
    assert stock == ours and Path("graph_infos.json") in stock
    for name in stock:
        if name.suffix == ".py":
            assert (tmp_path / "stock" / name).read_text() == (tmp_path / "ours" / name).read_text()
    x = np.random.default_rng(0).standard_normal((1, 4, 8)).astype(np.float32)
    got = [d["y"] for d in run_parallel(tmp_path / "stock", {"x": x})]
    assert np.array_equal(got[0], got[1])


def test_without_a_folder_the_target_says_how_to_give_one(tmp_path):
    source = _as_mlir(tmp_path)
    with pytest.raises(ForgeOptError, match=r"forge-python\{folder=\"DIR\"\}"):
        _xdsl_opt(str(source), "-p", "onnx-to-forge{devices=2}", "-t", "forge-python")


def test_a_folder_for_one_device_is_refused(tmp_path, capsys):
    onnx.save(mlp(), str(tmp_path / "mlp.onnx"))
    assert forge_opt([str(tmp_path / "mlp.onnx"), "-p", "onnx-to-forge", "-t", "forge-python", "-o",
                      f"{tmp_path}/"]) != 0
    assert "a program for one device is one module" in capsys.readouterr().err
