"""Generate dialects/forge_calls.py: one typed builder per `forge.op`
function of dialects/forge_api.py, so a lowering's keyword typo or a
missing operand fails the type check instead of a run.

    python -m forge_opt.tools.gen_forge_calls            # rewrite the module
    python -m forge_opt.tools.gen_forge_calls --check    # exit 1 if it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from forge_opt.dialects.forge_api import FUNCTIONS, REQUIRED, ForgeFunction
from forge_opt.tools.generated_file import generator_main

OUTPUT = Path(__file__).resolve().parent.parent / "dialects" / "forge_calls.py"

# What a keyword takes, as Forge's wrappers accept it (../shared/reference/forge_api.md).
_KEYWORD_TYPES = {
    "approximate": "str", "alpha": "float", "min": "float", "max": "float", "dtype": "Attribute",
    "unsqueeze": "str", "unsqueeze_dim": "int",
    "stride": "int | Sequence[int]", "dilation": "int | Sequence[int]", "output_padding": "int | Sequence[int]",
    "padding": "str | int | Sequence[int]", "kernel_size": "int | Sequence[int]", "groups": "int",
    "channel_last": "bool", "ceil_mode": "bool", "return_indices": "bool", "max_pool_add_sub_surround": "bool",
    "max_pool_add_sub_surround_value": "float", "count_include_pad": "bool", "divisor_override": "int",
    "dim": "int", "dim0": "int", "dim1": "int", "start": "int", "stop": "int", "axis": "int", "keep_dim": "bool",
    "stable": "bool", "epsilon": "float", "shape": "Sequence[int]", "repeats": "Sequence[int]",
    "pad": "Sequence[int]", "mode": "str", "value": "float",
}
# one dim's new size, not a shape; one step, not one per spatial dim
_FUNCTION_KEYWORD_TYPES = {("Broadcast", "shape"): "int", ("Index", "stride"): "int"}


def _keyword_type(fn: ForgeFunction, name: str) -> str:
    return _FUNCTION_KEYWORD_TYPES.get((fn.name, name)) or _KEYWORD_TYPES[name]


def _builder(fn: ForgeFunction) -> str:
    params, operands = [], []
    for name, kind in fn.operands:
        if kind == "variadic":
            params.append(f"*{name}: SSAValue")
            operands.append(f"*{name}")
        elif kind == "optional":
            params.append(f"{name}: SSAValue | None = None")
            operands.append(name)
        else:
            params.append(f"{name}: SSAValue")
            operands.append(name)
    if fn.keywords and not any(kind == "variadic" for _, kind in fn.operands):
        params.append("*")
    for name, default in fn.keywords:
        annotation = _keyword_type(fn, name)
        params.append(f"{name}: {annotation}" if default is REQUIRED else f"{name}: {annotation} | None = None")
    keywords = "".join(f", {name}={name}" for name, _ in fn.keywords)
    return (
        f"def {fn.name}({', '.join(params)}) -> ForgeOp:\n"
        f'    """`forge.op.{fn.name}`."""\n'
        f'    return build("{fn.name}", [{", ".join(operands)}]{keywords})\n'
    )


def generate() -> str:
    header = '''"""Typed builders of the `forge` ops: one function per `forge.op` function,
with Forge's parameter names. Keywords left None take Forge's default; a
call Forge rejects raises `forge_rules.ForgeRuleError` (`forge.build`).

GENERATED from dialects/forge_api.py by `python -m forge_opt.tools.gen_forge_calls`; do not edit.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Attribute, SSAValue

from forge_opt.dialects.forge import ForgeOp, build
'''
    body = "\n\n".join(_builder(fn) for fn in FUNCTIONS)
    names = "".join(f'    "{fn.name}": {fn.name},\n' for fn in FUNCTIONS)
    footer = (
        "\n\n#: the builders by Forge's function name, for lowerings that look one up\n"
        f"BY_NAME: dict[str, Callable[..., ForgeOp]] = {{\n{names}}}\n"
    )
    return header + "\n\n" + body + footer


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, OUTPUT, generate, "forge_opt.tools.gen_forge_calls", argv)


if __name__ == "__main__":
    sys.exit(main())
