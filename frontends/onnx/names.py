"""The one rule that turns an ONNX value's name into the name its SSA value
carries in the IR: the importer names values by it, and `--bisect` finds
them by it.

A name valid as an xDSL name hint is kept, less a trailing `_<digits>`
(xDSL's setter drops that suffix: the printer adds its own to keep names
apart). Other characters become `_`, and leading non-letters go, so
PyTorch's `/model/layer/MatMul_output_0` is `model_layer_MatMul_output`.
Two ONNX names can give one SSA name (`b` and `b_1`); `ambiguous` lists
them, and bisect compares neither. `layer_index` reads the layer an
exporter's name puts a node or value in.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

# A name already valid as a hint (the common case), split as xDSL's setter splits it.
_PLAIN_NAME = re.compile(r"([A-Za-z][A-Za-z0-9_]*?)(?:_[0-9]+)?")
_NOT_HINT = re.compile(r"[^A-Za-z0-9_]")
_LEADING = re.compile(r"^[^A-Za-z]+")
#: a layer's index in an exporter's name: Optimum's `/model/layers.3/...`, GPT-2's `/transformer/h.3/...`
_LAYER = re.compile(r"(?:^|/)(?:layers|layer|h|blocks|block|encoder\.layer)\.(\d+)(?:/|$)")


def layer_index(name: str) -> int | None:
    """The index of the layer `name` (a node's, or a value it makes) is in, if it says."""
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def ssa_name(name: str) -> str | None:
    """The SSA name of ONNX value `name`, or None where none can be made."""
    plain = _PLAIN_NAME.fullmatch(name)
    if plain is not None:
        return plain[1]
    hint = _LEADING.sub("", _NOT_HINT.sub("_", name))
    if not hint:
        return None
    plain = _PLAIN_NAME.fullmatch(hint)
    return plain[1] if plain is not None else None


def ambiguous(names: Iterable[str]) -> set[str]:
    """The SSA names that more than one of the ONNX `names` would carry."""
    counts = Counter(ssa_name(n) for n in names)
    return {n for n, k in counts.items() if n is not None and k > 1}
