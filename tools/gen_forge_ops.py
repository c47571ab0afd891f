"""Generate dialects/forge_ops.py from the records of
dialects/forge_functions/: one named op class per `forge.op` function (its
operands and keyword properties by Forge's names), and one typed builder,
so a pass can test `isinstance(op, MatmulOp)` and a lowering's keyword
typo or missing operand fails the type check instead of a run.

    python -m forge_opt.tools.gen_forge_ops            # rewrite the module
    python -m forge_opt.tools.gen_forge_ops --check    # exit 1 if it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from forge_opt.dialects.forge_functions import FUNCTIONS, REQUIRED, ForgeFunction
from forge_opt.tools.generated_file import generator_main

OUTPUT = Path(__file__).resolve().parent.parent / "dialects" / "forge_ops.py"

_OPERAND_DEFS = {"single": "operand_def", "optional": "opt_operand_def", "variadic": "var_operand_def"}

#: the property a keyword's Python type becomes (`forge_op.to_attr`'s forms). A
#: float keyword also holds an int: Forge's wrappers take one, and the
#: verifier then names the rule an int breaks (attr-variant), as Forge does.
_CONSTRAINTS = {
    "str": "StringAttr", "int": "IntegerAttr[I64]", "bool": "BoolAttr", "float": "FloatAttr | IntegerAttr[I64]",
    "Sequence[int]": "DenseArrayBase", "Attribute": "TypeAttribute",
}


def _constraint(python_type: str) -> str:
    return " | ".join(_CONSTRAINTS[part] for part in python_type.split(" | "))


def _class(fn: ForgeFunction) -> str:
    lines = [
        "@op_definition",
        f"class {fn.name}Op(ForgeOp):",
        f'    """`forge.op.{fn.name}`."""',
        "",
        f'    name = "{fn.op_name}"',
        f'    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["{fn.name}"]',
    ]
    lines += [f"    {field} = {_OPERAND_DEFS[kind]}(TensorType)" for field, kind in zip(fn.fields, fn.kinds)]
    lines += [
        f"    {name} = {'prop_def' if default is REQUIRED else 'opt_prop_def'}({_constraint(fn.keyword_type(name))})"
        for name, default in fn.keywords
    ]
    return "\n".join(lines) + "\n"


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
    if fn.keywords and "variadic" not in fn.kinds:
        params.append("*")
    for name, default in fn.keywords:
        annotation = fn.keyword_type(name)
        params.append(f"{name}: {annotation}" if default is REQUIRED else f"{name}: {annotation} | None = None")
    keywords = "".join(f", {name}={name}" for name, _ in fn.keywords)
    return (
        f"def {fn.name}({', '.join(params)}) -> {fn.name}Op:\n"
        f'    """`forge.op.{fn.name}`."""\n'
        f"    return build({fn.name}Op, [{', '.join(operands)}]{keywords})\n"
    )


HEADER = '''"""The `forge` dialect's ops: one class per `forge.op` function, named
after it (`MatmulOp` is `forge.matmul`, `forge.op.Matmul`), and one typed
builder with Forge's parameter names (`Matmul(a, b)`). Keywords left None
take Forge's default; a call Forge rejects raises `ForgeRuleError`
(`forge_op.build`).

GENERATED from dialects/forge_functions/ by `python -m forge_opt.tools.gen_forge_ops`; do not edit.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Attribute, SSAValue, TypeAttribute
from xdsl.irdl import operand_def, opt_operand_def, opt_prop_def, prop_def, var_operand_def

from forge_opt.dialects.forge_functions import BY_NAME as FUNCTIONS
from forge_opt.dialects.forge_functions import ForgeFunction
from forge_opt.dialects.forge_op import ForgeOp, build
from forge_opt.dialects.irdl_fast import op_definition
'''


def generate() -> str:
    body = "\n\n".join(_class(fn) + "\n\n" + _builder(fn) for fn in FUNCTIONS)
    classes = "".join(f"    {fn.name}Op,\n" for fn in FUNCTIONS)
    builders = "".join(f'    "{fn.name}": {fn.name},\n' for fn in FUNCTIONS)
    footer = (
        "\n\n#: every op class, in the records' order\n"
        f"OPS: tuple[type[ForgeOp], ...] = (\n{classes})\n"
        "\n#: the builders by Forge's function name, for lowerings that look one up\n"
        f"BUILDERS: dict[str, Callable[..., ForgeOp]] = {{\n{builders}}}\n"
    )
    return HEADER + "\n\n" + body + footer


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, OUTPUT, generate, "forge_opt.tools.gen_forge_ops", argv)


if __name__ == "__main__":
    sys.exit(main())
