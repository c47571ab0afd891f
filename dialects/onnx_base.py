"""The shared part of the `onnx` dialect: the base class of every generated op,
with its custom syntax, and the types ONNX has that MLIR's builtin does not.

Custom syntax of an op (operands positional, in schema order):

    %y = onnx.Clip(%x, none, %max) {attrs} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>

`none` marks an absent optional operand before a present one; trailing absent
operands are left out. In the result types, `none` marks an absent optional
result that is followed by a present one. Graph attributes (If, Loop, Scan)
follow the type as `name {region}`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import NoneType
from xdsl.ir import Attribute, ParametrizedAttribute, Region, SSAValue, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from forge_opt.dialects.irdl_fast import FastOp

SINGLE, OPTIONAL, VARIADIC = "single", "optional", "variadic"

#: Hand-written checks beyond what the schema says, by ONNX op type
#: (filled in by `onnx_verifiers`).
VERIFIERS: dict[type, Callable[[OnnxOp], None]] = {}  # by op class (`onnx_verifiers.py` fills it)


@irdl_attr_definition
class StringType(ParametrizedAttribute, TypeAttribute):
    """Element type of ONNX string tensors: `tensor<2x!onnx.string>`."""

    name = "onnx.string"


class _WrapperType(ParametrizedAttribute, TypeAttribute):
    """A type around one element type, written `!onnx.<name><T>`."""

    element_type: Attribute

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (parser.parse_type(),)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.element_type)


@irdl_attr_definition
class SeqType(_WrapperType):
    """An ONNX sequence: `!onnx.seq<tensor<?xf32>>`."""

    name = "onnx.seq"


@irdl_attr_definition
class OptType(_WrapperType):
    """An ONNX optional value: `!onnx.opt<tensor<f32>>`."""

    name = "onnx.opt"


class OnnxOp(FastOp):
    """Base of every op generated from an ONNX schema.

    The class constants describe the schema, so the importer and the printer
    need no per-op code: inputs and outputs as (name, kind) in schema order,
    attributes as name -> kind, and the names of graph attributes (regions).
    """

    ONNX_OP_TYPE: ClassVar[str] = ""
    ONNX_SINCE_VERSION: ClassVar[int] = 1
    ONNX_INPUTS: ClassVar[tuple[tuple[str, str], ...]] = ()
    ONNX_OUTPUTS: ClassVar[tuple[tuple[str, str], ...]] = ()
    ONNX_ATTRIBUTES: ClassVar[dict[str, str]] = {}
    ONNX_GRAPHS: ClassVar[tuple[str, ...]] = ()

    # -- grouping flat operand/result lists by schema parameter ------------

    @classmethod
    def group_by_param(
        cls, params: tuple[tuple[str, str], ...], items: Sequence[object | None]
    ) -> list[object]:
        """Turn a positional ONNX list (None for an absent optional) into the
        per-definition list IRDL builders take."""
        grouped: list[object] = []
        for i, (_, kind) in enumerate(params):
            if kind == VARIADIC:
                grouped.append([x for x in items[i:] if x is not None])
                break
            item = items[i] if i < len(items) else None
            if kind == OPTIONAL:
                grouped.append([] if item is None else [item])
            else:
                grouped.append(item)
        return grouped

    def _positional(self, params: tuple[tuple[str, str], ...]) -> list[SSAValue | None]:
        """Operands or results, flat, with None where an optional one is absent.
        The IRDL field of each schema parameter carries the schema's name."""
        flat: list[SSAValue | None] = []
        for name, kind in params:
            value = getattr(self, name)
            if kind == VARIADIC:
                flat.extend(value)
            else:
                flat.append(value)
        while flat and flat[-1] is None:
            flat.pop()
        return flat

    def onnx_operands(self) -> list[SSAValue | None]:
        """Operands in ONNX order, None for an absent optional input."""
        return self._positional(self.ONNX_INPUTS)

    def onnx_results(self) -> list[SSAValue | None]:
        """Results in ONNX order, None for an absent optional output."""
        return self._positional(self.ONNX_OUTPUTS)

    # -- custom syntax ----------------------------------------------------

    _SEGMENT_PROPS: ClassVar[tuple[str, ...]] = (
        "operandSegmentSizes",
        "resultSegmentSizes",
    )

    def print(self, printer: Printer) -> None:
        printer.print_string("(")
        operands = self.onnx_operands()
        printer.print_list(
            operands,
            lambda v: printer.print_string("none")
            if v is None
            else printer.print_operand(v),
        )
        printer.print_string(")")
        attrs = {
            k: v
            for k, v in self.properties.items()
            if k not in self._SEGMENT_PROPS and not self._is_default(k, v)
        }
        attrs.update(self.attributes)
        if attrs:
            printer.print_string(" ")
            printer.print_attr_dict(attrs)
        printer.print_string(" : ")
        results = self.onnx_results()
        printer.print_function_type(
            [v.type for v in operands if v is not None],
            [NoneType() if v is None else v.type for v in results],
        )
        for name, region in zip(self.ONNX_GRAPHS, self.regions):
            printer.print_string(f" {name} ")
            printer.print_region(region, print_entry_block_args=True)

    def verify_(self) -> None:
        check = VERIFIERS.get(type(self))
        if check is not None:
            try:
                check(self)
            except VerifyException as e:
                from forge_opt.diagnostics import node_name

                name = node_name(self)
                raise VerifyException(f"node '{name}' ({self.name}): {e}" if name else str(e)) from None

    def _is_default(self, name: str, value: Attribute) -> bool:
        prop = self.get_irdl_definition().properties.get(name)
        return prop is not None and prop.default_value == value

    @classmethod
    def parse(cls, parser: Parser) -> OnnxOp:
        pos = parser.pos
        unresolved = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN,
            lambda: None
            if parser.parse_optional_keyword("none")
            else parser.parse_unresolved_operand(),
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        fn_type = parser.parse_function_type()
        present = [u for u in unresolved if u is not None]
        values = iter(parser.resolve_operands(present, fn_type.inputs.data, pos))
        operands = [None if u is None else next(values) for u in unresolved]
        result_types = [None if isinstance(t, NoneType) else t for t in fn_type.outputs]
        regions: list[Region] = []
        for name in cls.ONNX_GRAPHS:
            parser.parse_keyword(name)
            regions.append(parser.parse_region())
        props = {k: v for k, v in attrs.items() if k in cls.ONNX_ATTRIBUTES}
        discardable = {k: v for k, v in attrs.items() if k not in cls.ONNX_ATTRIBUTES}
        return cls.build(
            operands=cls.group_by_param(cls.ONNX_INPUTS, operands),
            result_types=cls.group_by_param(cls.ONNX_OUTPUTS, result_types),
            properties=props,
            attributes=discardable,
            regions=regions,
        )
