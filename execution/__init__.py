"""Running a model, below both the checks and forge-split's runner: the
compile → emit → run flow on the Forge stand-in (`engine`) and the oracle,
the model's ONNX semantics on onnxruntime or ONNX's reference (`oracle`)."""
