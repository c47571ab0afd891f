"""The StableHLO face of a Forge function record: how one call computes in
`stablehlo` ops. A form gets the builder, the call (keywords with Forge's
defaults), the operands in the record's order (None for an absent optional
one; a variadic one's values in turn) and the result type Forge gives, and
returns the result. Forms are written by family
(`stablehlo_eltwise.py`, `stablehlo_tm.py`), each with its table from
`registry()`; `stablehlo_forms.FORMS` is the whole table."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from forge_opt.dialects.forge_functions.record import Call
from forge_opt.dialects.stablehlo_build import Hlo

Form = Callable[[Hlo, Call, Sequence[SSAValue | None], TensorType], SSAValue]

def registry() -> tuple[dict[str, Form], Callable[..., Callable[[Form], Form]]]:
    """A family's table of forms, and the decorator that fills it:
    `@form("Add", "Subtract")` registers a function for those functions."""
    table: dict[str, Form] = {}

    def form(*names: str) -> Callable[[Form], Form]:
        def register(fn: Form) -> Form:
            for name in names:
                assert name not in table, f"two StableHLO forms of forge.op.{name}"
                table[name] = fn
            return fn
        return register

    return table, form
