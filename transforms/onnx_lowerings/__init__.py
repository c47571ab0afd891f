"""The `onnx` -> `tir` lowerings by family, each registered by ONNX op
class in its module's `LOWERINGS`; `table.py` joins them for the
`onnx-to-tir` pass."""
