"""`-t mlir`: textual IR, with large constants elided by default.

Weights would otherwise print as hundreds of MB of hex. Like MLIR's
`--mlir-elide-elementsattrs-if-larger`, a constant with more elements than
`elide-elements-if-larger` prints as `dense_resource<__elided__>`; set it to
-1 to print every constant in full (round-trippable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp
from xdsl.ir import Attribute
from xdsl.printer import Printer
from xdsl.syntax_printer import SyntaxPrinter
from xdsl.targets.mlir import MLIRTarget


def _eliding(base: type[Printer], limit: int) -> type[Printer]:
    class ElidingPrinter(base):
        def print_attribute(self, attribute: Attribute) -> None:
            if (
                limit >= 0
                and isinstance(attribute, DenseIntOrFPElementsAttr)
                and len(attribute) > limit
            ):
                self.print_string("dense_resource<__elided__> : ")
                super().print_attribute(attribute.type)
                return
            super().print_attribute(attribute)

    return ElidingPrinter


@dataclass(frozen=True)
class ForgeMLIRTarget(MLIRTarget):
    name = "mlir"

    elide_elements_if_larger: int = 1024

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        base = SyntaxPrinter if self.syntax_highlight else Printer
        printer = _eliding(base, self.elide_elements_if_larger)(
            stream=output,
            print_generic_format=self.print_generic_format,
            print_properties_as_attributes=self.print_properties_as_attributes,
            print_debuginfo=self.print_debuginfo,
        )
        printer.print_op(module)
        printer.print_metadata(ctx.loaded_dialects)
        print("\n", file=output)
