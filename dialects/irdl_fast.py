"""Cheaper building and verifying of the ops of our dialects.

xDSL's IRDL builder and verifier interpret an op's definition on every
call: on this machine about 25 µs to build and 45 µs to verify a
one-operand op, which is most of the compile time of a graph of many small
nodes. `FastOp` and `op_definition` read the definition once per class and
then check each op with plain `isinstance` and length tests.

The fast paths only ever accept: an op they are unsure of (an unusual
argument shape, a constraint kind they do not know, anything that fails)
goes to xDSL's own builder or verifier, so errors read exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import cast

from xdsl.dialects.builtin import DenseArrayBase, TensorType, i32
from xdsl.ir import Attribute, BlockArgument, ErasedSSAValue, Operation, OpResult, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    IRDLOperation,
    OpDef,
    OptionalDef,
    ParsePropInAttrDict,
    VerificationContext,
    irdl_op_definition,
)
from xdsl.traits import OpTrait
from xdsl.utils.exceptions import VerifyException

from forge_opt.xdsl_internals import (
    OPTIONAL,
    SINGLE,
    VARIADIC,
    UnsupportedDefinition,
    attr_check,
    definition_defaults,
    definition_kind,
    index_single_accessors,
    init_operation,
    plain_operands,
    range_check,
    types_hold,
)


class _Layout:
    """What building and verifying an op of one class need, read once."""

    def __init__(self, op_def: OpDef):
        if op_def.regions or op_def.successors:
            raise UnsupportedDefinition("regions or successors")
        self.operand_kinds = tuple(definition_kind(d) for _, d in op_def.operands)
        self.result_kinds = tuple(definition_kind(d) for _, d in op_def.results)
        self.operand_checks = tuple(range_check(d.constr) for _, d in op_def.operands)
        self.result_checks = tuple(range_check(d.constr) for _, d in op_def.results)
        self.operand_segments = self.result_segments = None
        self.segments_as_property = True
        for option in op_def.options:
            if isinstance(option, AttrSizedOperandSegments):
                self.operand_segments = option.attribute_name
                self.segments_as_property = option.as_property
            elif isinstance(option, AttrSizedResultSegments):
                self.result_segments = option.attribute_name
                self.segments_as_property = option.as_property
            elif not isinstance(option, ParsePropInAttrDict):
                raise UnsupportedDefinition(option)
        # one operand per operand definition, one result per result definition
        self.fixed = (
            all(k == SINGLE for k in self.operand_kinds + self.result_kinds)
            and self.operand_segments is None
            and self.result_segments is None
        )
        for kinds, segments in ((self.operand_kinds, self.operand_segments), (self.result_kinds, self.result_segments)):
            if segments is None and sum(k != SINGLE for k in kinds) > 1:
                raise UnsupportedDefinition("several variadics without segment sizes")
        self.property_defs = op_def.properties
        self.properties = {
            name: (isinstance(d, OptionalDef), attr_check(d.constr)) for name, d in op_def.properties.items()
        }
        self.attributes = {
            name: (isinstance(d, OptionalDef), attr_check(d.constr)) for name, d in op_def.attributes.items()
        }
        self.traits = tuple(t for t in op_def.traits if type(t).verify is not OpTrait.verify)
        # what IRDLOperation.__post_init__ fills in when the builder omits it
        self.property_defaults = definition_defaults(op_def.properties)
        self.attribute_defaults = definition_defaults(op_def.attributes)

    # -- building ------------------------------------------------------------

    @staticmethod
    def flatten(kinds: tuple[int, ...], args: Sequence, item: type) -> tuple[Sequence, tuple[int, ...]] | None:
        """IRDL's grouped arguments as a flat list and the size of each
        group; None when `args` is not in a plain form."""
        if len(args) != len(kinds):
            return None
        if OPTIONAL not in kinds and VARIADIC not in kinds:
            return (args, (1,) * len(args)) if all(isinstance(a, item) for a in args) else None
        flat: list = []
        sizes: list[int] = []
        for kind, arg in zip(kinds, args):
            if isinstance(arg, item):
                flat.append(arg)
                sizes.append(1)
            elif kind == SINGLE:
                return None
            elif arg is None:
                sizes.append(0)
            elif isinstance(arg, list | tuple) and all(isinstance(a, item) for a in arg):
                if kind == OPTIONAL and len(arg) > 1:
                    return None
                flat.extend(arg)
                sizes.append(len(arg))
            else:
                return None
        return flat, tuple(sizes)

    # -- verifying -----------------------------------------------------------

    def _group_sizes(self, op: Operation, kinds, segments, count: int) -> Sequence[int] | None:
        if segments is not None:
            holder = op.properties if self.segments_as_property else op.attributes
            attr = holder.get(segments)
            if not isinstance(attr, DenseArrayBase) or attr.elt_type != i32:
                return None
            sizes = attr.get_values()
            if len(sizes) != len(kinds) or sum(sizes) != count:
                return None
            for kind, size in zip(kinds, sizes):
                if size < 0 or (kind == SINGLE and size != 1) or (kind == OPTIONAL and size > 1):
                    return None
            return sizes
        rest = count - (len(kinds) - 1)
        if rest < 0 or (OPTIONAL in kinds and rest > 1):
            return None
        return tuple(rest if k != SINGLE else 1 for k in kinds)

    @staticmethod
    def _types_hold(values: Sequence[SSAValue], sizes, checks) -> bool:
        i = 0
        for size, check in zip(sizes, checks):
            if check is not None:
                for v in values[i : i + size]:
                    if not check(v.type):
                        return False
            i += size
        return True

    @staticmethod
    def _attrs_hold(held: dict[str, Attribute], defs, closed: bool) -> bool:
        if not defs:
            return not (closed and held)
        for name, (optional, check) in defs.items():
            attr = held.get(name)
            if attr is None:
                if not optional:
                    return False
            elif check is not None and not check(attr):
                return False
        return not closed or all(name in defs for name in held)

    def _values_hold(self, op: Operation, values: Sequence[SSAValue], kinds, segments, checks) -> bool:
        if segments is None and OPTIONAL not in kinds and VARIADIC not in kinds:
            return len(values) == len(kinds) and all(c is None or c(v.type) for v, c in zip(values, checks))
        sizes = self._group_sizes(op, kinds, segments, len(values))
        return sizes is not None and self._types_hold(values, sizes, checks)

    def holds(self, op: Operation) -> bool:
        """True when xDSL's verifier of the definition would accept `op`."""
        if op.regions:
            return False
        if self.fixed:
            values_hold = types_hold(op, self.operand_checks, self.result_checks)
        else:
            operands = plain_operands(op)
            if operands is None:
                return False
            values_hold = self._values_hold(
                op, operands, self.operand_kinds, self.operand_segments, self.operand_checks
            ) and self._values_hold(op, op.results, self.result_kinds, self.result_segments, self.result_checks)
        return (
            values_hold
            and self._attrs_hold(op.properties, self.properties, closed=True)
            and self._attrs_hold(op.attributes, self.attributes, closed=False)
        )


    def property_error(self, op: Operation) -> str | None:
        """xDSL's message for the first property of the wrong kind, with the
        property's name, which xDSL's own message leaves out."""
        for name, d in self.property_defs.items():
            attr = op.properties.get(name)
            if attr is not None:
                try:
                    d.constr.verify(attr, VerificationContext())
                except VerifyException as e:
                    return f"property '{name}' of {op.name}: {e}"
        return None


_LAYOUTS: dict[type, _Layout | None] = {}  # by class: not inherited, each class has its own


def layout_of(cls: type[Operation]) -> _Layout | None:
    try:
        return _LAYOUTS[cls]
    except KeyError:
        pass
    try:
        layout = _Layout(cls.get_irdl_definition()) if issubclass(cls, IRDLOperation) else None
    except UnsupportedDefinition:
        layout = None
    _LAYOUTS[cls] = layout
    return layout




def _plain(operands, result_types) -> bool:
    """Each operand a value and each result type an attribute (the type
    tests first: SSAValue and Attribute are ABCs, slow to test)."""
    for v in operands:
        if type(v) is not OpResult and type(v) is not BlockArgument and not isinstance(v, SSAValue):
            return False
    for t in result_types:
        if type(t) is not TensorType and not isinstance(t, Attribute):
            return False
    return True


def _without_none(attrs: Mapping[str, Attribute | None] | None) -> dict[str, Attribute]:
    if not attrs:
        return {}
    if None in attrs.values():
        return {k: v for k, v in attrs.items() if v is not None}
    return cast(dict[str, Attribute], dict(attrs))


@lru_cache(maxsize=256)
def _segment_sizes(sizes: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i32, sizes)


class FastOp(IRDLOperation):
    """An IRDL op whose builder skips xDSL's interpretation of the definition
    when the arguments are plain (each operand a value, each variadic group
    a list or None; no regions or successors)."""

    def __init__(
        self,
        *,
        operands=None,
        result_types=None,
        properties=None,
        attributes=None,
        successors=None,
        regions=None,
    ):
        layout = layout_of(type(self)) if not regions and not successors else None
        if layout is not None and layout.fixed:
            operands = operands or ()
            result_types = result_types or ()
            if (
                len(operands) == len(layout.operand_kinds)
                and len(result_types) == len(layout.result_kinds)
                and _plain(operands, result_types)
            ):
                props, attrs = _without_none(properties), _without_none(attributes)
                init_operation(
                    self, operands, result_types, props, attrs, layout.property_defaults, layout.attribute_defaults
                )
                return
        elif layout is not None:
            built_operands = layout.flatten(layout.operand_kinds, operands or (), SSAValue)
            built_results = layout.flatten(layout.result_kinds, result_types or (), Attribute)
            if built_operands is not None and built_results is not None:
                props = _without_none(properties)
                attrs = _without_none(attributes)
                holder = props if layout.segments_as_property else attrs
                if layout.operand_segments is not None:
                    holder[layout.operand_segments] = _segment_sizes(built_operands[1])
                if layout.result_segments is not None:
                    holder[layout.result_segments] = _segment_sizes(built_results[1])
                init_operation(
                    self, built_operands[0], built_results[0], props, attrs,
                    layout.property_defaults, layout.attribute_defaults,
                )
                return
        IRDLOperation.__init__(
            self,
            operands=operands,
            result_types=result_types,
            properties=properties,
            attributes=attributes,
            successors=successors,
            regions=regions,
        )

    def verify(self, verify_nested_ops: bool = True) -> None:
        # `Operation.verify` reduced to what applies to an op without
        # successors or regions that does not end its block (no terminator rules)
        block = self.parent
        operands = plain_operands(self)
        if operands is None or self.regions or (block is not None and block.last_op is self):
            return super().verify(verify_nested_ops)
        for operand in operands:
            if type(operand) is not OpResult and isinstance(operand, ErasedSSAValue):
                raise ValueError("Erased SSA value is used by the operation")
        try:
            self.verify_()
        except VerifyException as err:
            self.emit_error(f"Operation does not verify: {err}", err)

    @classmethod
    def get_trait(cls, trait):
        # Looked up once per class and trait type: verifiers ask each op
        # (func.func's IsolatedFromAbove asks every op in the function).
        if not isinstance(trait, type):
            return super().get_trait(trait)
        found = cls.__dict__.get("_traits_by_type")
        if found is None:
            found = cls._traits_by_type = {}
        if trait not in found:
            found[trait] = super().get_trait(trait)
        return found[trait]

    @classmethod
    def build(cls, **arguments):
        """`IRDLOperation.build` (which calls `IRDLOperation.__init__` itself),
        through the fast builder."""
        op = cls.__new__(cls)
        FastOp.__init__(op, **arguments)
        return op


def op_definition(cls):
    """`irdl_op_definition`, with a verifier that checks the definition by
    plain tests first and falls back to xDSL's on anything it doubts."""
    custom = getattr(cls, "verify_", None)
    cls = irdl_op_definition(cls)
    _locate_parse_errors(cls)
    index_single_accessors(cls)
    layout = layout_of(cls)
    if layout is None:
        return cls
    generic = cls.verify_

    def verify_(op) -> None:
        if not layout.holds(op):
            message = layout.property_error(op)
            if message is not None:
                raise VerifyException(message)
            generic(op)  # raises xDSL's message (and runs `custom` if it passes)
            return
        for trait in layout.traits:
            trait.verify(op)
        if custom is not None:
            custom(op)

    cls.verify_ = verify_
    return cls


def _locate_parse_errors(cls) -> None:
    # The declarative format's parser checks required properties and raises
    # a bare VerifyException, which reaches the user with no line or op.
    parse = cls.parse

    def located(parser):
        start = parser.pos
        try:
            return parse(parser)
        except VerifyException as e:
            parser.raise_error(f"{cls.name}: {e}", start, parser.pos)

    cls.parse = classmethod(lambda _, parser: located(parser))
