"""The layers' cases and reasons `tensor-parallel` chose, carried on the
module (`tensor_parallel.layers`) to the plan writer (`targets/devices/`)."""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, BoolAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i1
from xdsl.ir import Attribute

LAYERS_ATTR = "tensor_parallel.layers"

def record_layers(module: ModuleOp, entries: list[dict]) -> None:
    """Record the layers (`LayerChoice.entry`s) on the module."""
    def value(v) -> Attribute:
        if isinstance(v, bool):
            return BoolAttr.from_bool(v)
        return IntegerAttr(v, 64) if isinstance(v, int) else StringAttr(str(v))

    module.attributes[LAYERS_ATTR] = ArrayAttr([DictionaryAttr({k: value(v) for k, v in e.items()}) for e in entries])


def layer_entries(module: ModuleOp) -> list[dict]:
    """The layers `annotate` recorded on the module."""
    attr = module.attributes.get(LAYERS_ATTR)
    if not isinstance(attr, ArrayAttr):
        return []
    out = []
    for d in attr.data:
        assert isinstance(d, DictionaryAttr)
        entry = {}
        for k, v in d.data.items():
            if isinstance(v, IntegerAttr) and v.type == i1:
                entry[k] = bool(v.value.data)
            elif isinstance(v, IntegerAttr):
                entry[k] = v.value.data
            elif isinstance(v, StringAttr):
                entry[k] = v.data
        out.append(entry)
    return out
