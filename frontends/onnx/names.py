"""The one rule that turns an ONNX value's name into the name its SSA value
carries in the IR: the importer names values by it, and `--bisect` finds
them by it.

A name valid as an xDSL name hint is kept, less a trailing `_<digits>`
(xDSL's setter drops that suffix: the printer adds its own to keep names
apart). Other characters become `_`, and leading non-letters go, so
PyTorch's `/model/layer/MatMul_output_0` is `model_layer_MatMul_output`.
Two ONNX names can give one SSA name (`b` and `b_1`); `ambiguous` lists
them, and bisect compares neither. `layer_key` reads the layer an
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
#: a numbered block, one part of an exporter's name: Optimum's `layers.3`, GPT-2's `h.3`, torchvision's
#: ResNet `layer2.1` (stage 2, block 1) and `features.3.0`, timm's `stages.1` then `blocks.0`
_BLOCK = re.compile(r"(layers|layer|h|blocks|block|stages|features|encoder\.layer|layer(\d+))((?:\.\d+)+)")


def layer_key(name: str) -> tuple[int, ...] | None:
    """The layer `name` (a node's, or a value it makes) is in, if it says:
    the numbers of its blocks from the outermost, which order the layers
    as the model runs them (`/layers.3/` is (3,); `/layer2/layer2.1/` and
    `/stages/stages.2/blocks/blocks.1/` are (2, 1); a part that repeats the
    one before it with one more number, `/features.3/features.3.0/`, is
    (3, 0))."""
    key: list[int] = []
    last: tuple[str, tuple[int, ...]] | None = None
    for part in name.split("/"):
        found = _BLOCK.fullmatch(part)
        if found is None:
            continue
        numbers = tuple(map(int, ([found[2]] if found[2] else []) + found[3][1:].split(".")))
        if last is not None and last[0] == found[1] and numbers[:len(last[1])] == last[1]:
            del key[len(key) - len(last[1]):]  # the same block named again, deeper
        key += numbers
        last = (found[1], numbers)
    return tuple(key) if key else None


def layer_label(key: tuple[int, ...]) -> str:
    """A layer's key as its names spell it: `3`, `2.1`."""
    return ".".join(map(str, key))


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
