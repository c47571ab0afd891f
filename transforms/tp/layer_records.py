"""The layers' cases and reasons `tensor-parallel` chose, carried on the
module (`tensor_parallel.layers`) to the plan writer (`targets/devices/`)."""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, BoolAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i1
from xdsl.ir import Attribute

from forge_opt.plan.graph_infos import LINE_LAYOUT, REPLICATE

LAYERS_ATTR = "tensor_parallel.layers"
MESH_LAYOUT_ATTR = "tensor_parallel.mesh_layout"  # `galaxy`, annotated one mesh axis at a time (else a line's)

def record_layers(module: ModuleOp, entries: list[dict], axis: int | None = None) -> list[dict]:
    """Record the layers (`LayerChoice.entry`s) on the module. Split over
    one mesh axis (`axis`, Galaxy's layout), a layer's case over the
    columns (1, the first pass) is its `column_case` and its `case` the
    one over the rows (0, the second pass, replicated until then). The
    entries as recorded (on the rows, merged with the columns')."""
    if axis == 1:
        for e in entries:
            e["column_case"], e["case"], e["reason"] = e["case"], REPLICATE, f"columns: {e['reason']}"
    if axis == 0:
        columns = layer_entries(module)
        if [e["node"] for e in columns] != [e["node"] for e in entries]:  # (else in order: nodes may be unnamed)
            by_name = {e["node"]: e for e in columns}
            columns = [by_name.get(e["node"]) for e in entries]
        for e, first in zip(entries, columns):
            if first is not None:
                e["column_case"] = first["column_case"]
                e["reason"] = f"{first['reason']}; rows: {e['reason']}"
                e["unshared"] = e["unshared"] and first["unshared"]

    def value(v) -> Attribute:
        if isinstance(v, bool):
            return BoolAttr.from_bool(v)
        return IntegerAttr(v, 64) if isinstance(v, int) else StringAttr(str(v))

    module.attributes[LAYERS_ATTR] = ArrayAttr([DictionaryAttr({k: value(v) for k, v in e.items()}) for e in entries])
    return entries


def mesh_layout(module: ModuleOp) -> str:
    """How the module's mesh shares the weights (`MESH_LAYOUT_ATTR`)."""
    attr = module.attributes.get(MESH_LAYOUT_ATTR)
    return attr.data if isinstance(attr, StringAttr) else LINE_LAYOUT


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
