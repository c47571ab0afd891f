# pyright: reportPrivateUsage=false
"""Every place forge-opt reaches into xDSL's internals, and nowhere else.

xDSL's public API does each of these things, at a cost that dominates
compiling a graph of many small nodes (it re-checks what our builders have
just made valid). The functions here do the same through private state.
Each private name is marked `# private:` where it is used, and each has a
test in `tests/test_xdsl_internals.py` that fails when xDSL changes what we
rely on; `test_no_private_access_elsewhere` keeps them out of other modules.

Private state used, by which functions, and the test guarding it:

- `Operation._operands`, `_operand_uses`: `init_operation`, `operands_of`, `plain_operands`,
  `types_hold`; guarded by `test_init_operation_matches_xdsl`
- `SSAValue._type`: `types_hold`; guarded by `test_private_type_is_the_type`
- `Operation._successors`: `plain_operands`, `types_hold`; guarded by `test_successors_are_private_tuple`
- `Block._first_op`, `Operation._next_op/_prev_op`: `ops_of`, `insert_before`;
  guarded by `test_insert_before_matches_xdsl`
- `Use._next_use/_operation/_index`, `first_use`: `move_uses`; guarded by `test_move_uses_matches_xdsl`
- `SSAValue._name`: `set_name`, `take_name`, `name_results`, `move_uses`;
  guarded by `test_set_name_matches_the_setter`
- `NameLoc`/`StringAttr` fields, unverified: `name_loc`; guarded by `test_name_loc_matches_xdsl`
- `BeforeVariadicSingleAccessor`, `VarIRConstruct`: `index_single_accessors`;
  guarded by `test_accessors_read_the_operand`
- `SSAValues` being a tuple: `item`; guarded by `test_ssavalues_is_a_tuple`
- `InterpreterFunctions._impls`: `interpreted_ops`; guarded by `test_interpreted_ops_lists_impls`
- `Dialect._operations` being a list: `extend_dialect`; guarded by `test_extend_dialect_adds_ops`
- IRDL's definitions and constraint classes (`OpDef`'s operand, result, property and attribute
  definitions; `RangeOf`, `RangeLengthConstraint`, `BaseAttr`, `EqAttrConstraint`,
  `ParamAttrConstraint`, `AnyOf`, `AllOf`, `AnyAttr`): `attr_check`, `range_check`, `definition_kind`,
  `definition_defaults`, which `dialects/irdl_fast.py` builds its fast paths from; guarded by
  `test_checks_agree_with_irdl_constraints`
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects.builtin import NameLoc, StringAttr, TensorType, UnknownLoc
from xdsl.interpreter import InterpreterFunctions
from xdsl.ir import Attribute, Block, Dialect, Operation, OpResult, ParametrizedAttribute, SSAValue, SSAValues, Use
from xdsl.irdl import AllOf, AnyAttr, AnyOf, BaseAttr, EqAttrConstraint, OptionalDef, ParamAttrConstraint, VariadicDef
from xdsl.irdl.constraints import EqIntConstraint, RangeLengthConstraint, RangeOf
from xdsl.irdl.operations import BeforeVariadicSingleAccessor, VarIRConstruct  # private: internal module

# SSAValues overrides __getitem__ in Python (for slices); tuple's own is a C call.
item = tuple.__getitem__  # private: SSAValues is a tuple


# -- reading IRDL definitions ------------------------------------------------------------

Check = Callable[[Attribute], bool]
SINGLE, OPTIONAL, VARIADIC = 0, 1, 2


class UnsupportedDefinition(Exception):
    """A definition the fast paths do not cover; the class keeps xDSL's."""


def attr_check(constr) -> Check | None:
    """A predicate equivalent to `constr` (None: anything passes)."""
    if isinstance(constr, AnyAttr):
        return None
    if isinstance(constr, BaseAttr):
        base = constr.attr
        if base is TensorType:  # most operands: skip the ABC machinery of isinstance
            return lambda a: type(a) is TensorType or isinstance(a, base)
        return lambda a: isinstance(a, base)
    if isinstance(constr, EqAttrConstraint):
        value = constr.attr
        return lambda a: a == value
    if isinstance(constr, ParamAttrConstraint):
        base: type[ParametrizedAttribute] = constr.base_attr
        checks = [(i, attr_check(c)) for i, c in enumerate(constr.param_constrs)]
        params = [(i, c) for i, c in checks if c is not None]
        return lambda a: isinstance(a, base) and all(c(a.parameters[i]) for i, c in params)
    if isinstance(constr, AnyOf):  # a keyword of several forms (an int or a list)
        alternatives = [attr_check(c) for c in constr.attr_constrs]
        if any(c is None for c in alternatives):
            return None
        return lambda a: any(c(a) for c in alternatives)  # type: ignore[misc]
    if isinstance(constr, AllOf):  # an annotated parameter (`BoolAttr`'s i1)
        parts = [c for c in (attr_check(c) for c in constr.attr_constrs) if c is not None]
        return lambda a: all(c(a) for c in parts)
    raise UnsupportedDefinition(constr)


def range_check(constr) -> Check | None:
    """The per-element predicate of an operand or result definition."""
    if isinstance(constr, RangeLengthConstraint):
        if not (isinstance(constr.length, EqIntConstraint) and constr.length.value == 1):
            raise UnsupportedDefinition(constr)
        constr = constr.constraint
    if isinstance(constr, RangeOf):
        return attr_check(constr.constr)
    raise UnsupportedDefinition(constr)


def definition_defaults(defs) -> tuple[tuple[str, Attribute], ...]:
    return tuple(
        (name, d.default_value)
        for name, d in defs.items()
        if not isinstance(d, OptionalDef) and d.default_value is not None
    )


def definition_kind(d) -> int:
    return OPTIONAL if isinstance(d, OptionalDef) else VARIADIC if isinstance(d, VariadicDef) else SINGLE


# -- building ops ---------------------------------------------------------------------

_UNKNOWN = UnknownLoc()


def init_operation(
    op: Operation,
    operands: Sequence,  # of SSAValue, as the caller has checked
    result_types: Sequence,  # of Attribute, likewise
    properties: dict[str, Attribute],
    attributes: dict[str, Attribute],
    property_defaults: Sequence[tuple[str, Attribute]] = (),
    attribute_defaults: Sequence[tuple[str, Attribute]] = (),
) -> None:
    """`Operation.__init__` and `IRDLOperation.__post_init__` for an op
    without successors or regions, which keep their class defaults (empty):
    operands, uses and results wired directly, with no operand view and no
    walk of the definition; the defaults fill what the builder left out.
    One operand and one result, the common case, skip the loops."""
    if len(operands) == 1:
        uses = (Use(op, 0),)
    else:
        uses = tuple([Use(op, i) for i in range(len(operands))])
    for value, use in zip(operands, uses):
        value.add_use(use)
    op._operands = operands if type(operands) is SSAValues else SSAValues(operands)  # private: _operands
    op._operand_uses = uses  # private: _operand_uses
    if len(result_types) == 1:
        op.results = SSAValues((OpResult(result_types[0], op, 0),))
    else:
        op.results = SSAValues([OpResult(t, op, i) for i, t in enumerate(result_types)])
    for name, default in property_defaults:
        properties.setdefault(name, default)
    for name, default in attribute_defaults:
        attributes.setdefault(name, default)
    op.properties = properties
    op.attributes = attributes
    op.location = _UNKNOWN


def operands_of(op: Operation) -> SSAValues:
    """`op.operands` without the view object."""
    return op._operands  # private: _operands


def plain_operands(op: Operation) -> SSAValues | None:
    """`op`'s operands without the view object; None when it has successors."""
    return None if op._successors else op._operands  # private: _successors, _operands


def types_hold(op: Operation, operand_checks, result_checks) -> bool:
    """No successors, and one operand and one result per check (None:
    anything), each value's type passing its check."""
    if op._successors:  # private: _successors
        return False
    operands, results = op._operands, op.results  # private: _operands
    if len(operands) != len(operand_checks) or len(results) != len(result_checks):
        return False
    for value, check in zip(operands, operand_checks):
        if check is not None and not check(value._type):  # private: _type
            return False
    for value, check in zip(results, result_checks):
        if check is not None and not check(value._type):  # private: _type
            return False
    return True


class OperandAccessor(BeforeVariadicSingleAccessor):
    def __get__(self, op, objtype=None):
        return self if op is None else item(op._operands, self.idx)  # private: _operands


class ResultAccessor(BeforeVariadicSingleAccessor):
    def __get__(self, op, objtype=None):
        return self if op is None else item(op.results, self.idx)


def index_single_accessors(cls) -> None:
    """Named operands and results before any variadic one read their tuple
    directly, not through xDSL's generic accessor (a view object per read)."""
    for name, accessor in list(vars(cls).items()):
        if type(accessor) is BeforeVariadicSingleAccessor:
            if accessor.construct == VarIRConstruct.OPERAND:
                setattr(cls, name, OperandAccessor(accessor.construct, accessor.idx))
            elif accessor.construct == VarIRConstruct.RESULT:
                setattr(cls, name, ResultAccessor(accessor.construct, accessor.idx))


# -- rewriting ------------------------------------------------------------------------


def ops_of(block: Block) -> list[Operation]:
    """`list(block.ops)`, read off the linked list without an iterator object."""
    ops = []
    op = block._first_op  # private: _first_op
    while op is not None:
        ops.append(op)
        op = op._next_op  # private: _next_op
    return ops


def insert_before(block: Block, new_ops: Sequence[Operation], op: Operation) -> None:
    """`block.insert_ops_before(new_ops, op)`, linking new ops without
    regions directly (they cannot contain the block, which is all that
    xDSL's ancestry walk checks)."""
    for new in new_ops:
        if new.parent is not None or new.regions:
            block.insert_op_before(new, op)
            continue
        new.parent = block
        prev = op._prev_op  # private: _prev_op
        new._prev_op = prev  # private: _prev_op
        new._next_op = op  # private: _next_op
        op._prev_op = new  # private: _prev_op
        if prev is None:
            block._first_op = new  # private: _first_op
        else:
            prev._next_op = new  # private: _next_op


def move_uses(old: SSAValue, new: SSAValue) -> None:
    """`old.replace_all_uses_with(new)`: each use object moves to `new` and
    its user's operand tuple is rebuilt once, with no operand views."""
    if new is old:
        return
    use = old.first_use
    while use is not None:
        following = use._next_use  # private: _next_use
        user = use._operation  # private: _operation
        operands = list(user._operands)  # private: _operands
        operands[use._index] = new  # private: _index
        user._operands = SSAValues(operands)  # private: _operands
        new.add_use(use)
        use = following
    old.first_use = None
    if new._name is None:  # private: _name (carried over, as xDSL does)
        new._name = old._name  # private: _name


def set_name(value: SSAValue, name: str) -> None:
    """`value.name_hint = name` for a name already valid as a hint (the
    setter's checks, skipped, are most of its cost)."""
    value._name = name  # private: _name


def take_name(new: SSAValue, old: SSAValue) -> None:
    """`new` gets `old`'s name, where `old` has one (valid already: no setter checks)."""
    if old._name is not None:  # private: _name
        new._name = old._name  # private: _name


def name_results(ops: Sequence[Operation], value: SSAValue) -> None:
    """The results of `ops` without a name take `value`'s."""
    name = value._name  # private: _name
    for op in ops:
        for result in op.results:
            if result._name is None:  # private: _name
                result._name = name  # private: _name


def name_loc(name: str) -> NameLoc:
    """`NameLoc(StringAttr(name), UnknownLoc())`, without re-verifying its
    parameters, which are right by construction: every imported op gets
    one, and verifying them is most of what building one costs."""
    desc = object.__new__(StringAttr)
    object.__setattr__(desc, "data", name)  # private: frozen dataclass field
    loc = object.__new__(NameLoc)
    object.__setattr__(loc, "desc", desc)  # private: frozen dataclass field
    object.__setattr__(loc, "location", _UNKNOWN)  # private: frozen dataclass field
    return loc


# -- interpreting ---------------------------------------------------------------------


def interpreted_ops(functions: type[InterpreterFunctions]) -> set[type[Operation]]:
    """The op classes an `InterpreterFunctions` class implements."""
    return {op for op, _ in functions._impls()}  # private: _impls


def extend_dialect(dialect: Dialect, ops: Sequence[type[Operation]]) -> Dialect:
    """`dialect` with `ops` added (once), in place: every context that loads
    it, stock xdsl-opt's too, then knows them. xDSL has no public way to add
    ops to a dialect another package defines."""
    known = dialect._operations  # private: Dialect._operations is a list
    known.extend(op for op in ops if op not in known)
    return dialect
