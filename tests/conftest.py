import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tmp_model(tmp_path):
    """Write a ModelProto to a file and return its path."""
    import onnx

    def write(model, name="model.onnx"):
        path = tmp_path / name
        onnx.save(model, path)
        return path

    return write
