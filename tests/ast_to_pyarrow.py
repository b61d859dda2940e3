"""Filter AST -> ``pyarrow.compute.Expression``, for tests only.

Used to evaluate a parsed filter locally with pyarrow, as a cross-check of what
Lance and DataFusion return for the same SQL. Not an oracle for the parser: the
AST it evaluates comes from the code under test.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

from lance_partitioned.format import zones
from lance_partitioned.format.expressions import (
    And,
    Compare,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Ref,
)
from lance_partitioned.format.filters.visitor import FilterVisitor, visit


def _pa_literal(value: Any, field_type: Any = None) -> Any:
    """A pyarrow scalar for ``value``, converted to ``field_type`` when that is
    lossless (1.5 stays a decimal next to an int32 column, 2 becomes a decimal
    next to a decimal column)."""
    import pyarrow as pa

    errors = (pa.ArrowException, TypeError, ValueError, OverflowError)
    zoned = field_type is not None and pa.types.is_timestamp(field_type) and field_type.tz
    if zoned and isinstance(value, dt.date) and getattr(value, "tzinfo", None) is None:
        # wall-clock time in the column's zone (FORMAT.md §7); refused if ambiguous
        wall = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())
        value = zones.instant(zones.localize(field_type.tz, zones.to_us(wall)))
    if field_type is not None:
        with contextlib.suppress(*errors):
            direct = pa.scalar(value, type=field_type)
            back = direct.as_py()
            # equal after the round trip (datetimes of different awareness never are)
            if isinstance(back, bool) == isinstance(value, bool) and back == value:
                return direct
    scalar = pa.scalar(value)
    if field_type is not None and scalar.type != field_type:
        with contextlib.suppress(*errors):  # a safe cast: lossy ones raise
            scalar = scalar.cast(field_type)
    return scalar


_COMPARE = {
    "=": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


class _PyarrowRenderer(FilterVisitor[Any]):
    """Each node as a ``pyarrow.compute.Expression`` with SQL's three-valued semantics."""

    def __init__(self, schema: Any):
        import pyarrow as pa
        import pyarrow.compute as pc

        self.schema = schema
        self.null_bool = pc.scalar(pa.scalar(None, pa.bool_()))

    def field_type(self, name: str) -> Any:
        if self.schema is None:
            return None
        idx = self.schema.get_field_index(name)
        return self.schema.field(idx).type if idx >= 0 else None

    def visit_and(self, node: And, left: Any, right: Any) -> Any:
        return left & right

    def visit_or(self, node: Or, left: Any, right: Any) -> Any:
        return left | right

    def visit_not(self, node: Not, child: Any) -> Any:
        return ~child

    def visit_compare(self, node: Compare) -> Any:
        import pyarrow.compute as pc

        lit = pc.scalar(_pa_literal(node.literal.value, self.field_type(node.ref.name)))
        return getattr(pc, _COMPARE[node.op])(pc.field(node.ref.name), lit)

    def visit_in(self, node: In) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        field = pc.field(node.ref.name)
        present = [v.value for v in node.values if v.value is not None]
        has_null = len(present) != len(node.values)
        if not present:
            # x IN (NULL) is NULL; x IN () is FALSE
            result = self.null_bool if has_null else pc.scalar(False)
        else:
            ftype = self.field_type(node.ref.name)
            scalars = [_pa_literal(v, ftype) for v in present]
            types = {sc.type for sc in scalars}
            if len(types) == 1 and (ftype is None or types == {ftype}):
                found = pc.is_in(field, value_set=pa.array(scalars), skip_nulls=True)
            else:
                # is_in does not promote types (int32 vs decimal128(1,1) fails);
                # x IN (a, b) is exactly x = a OR x = b, and equal() promotes
                found = pc.equal(field, pc.scalar(scalars[0]))
                for sc in scalars[1:]:
                    found = found | pc.equal(field, pc.scalar(sc))
            if has_null:
                found = found | self.null_bool  # no match against a list with NULL -> NULL
            # SQL: NULL IN (...) is NULL, pyarrow's is_in says FALSE
            result = pc.if_else(field.is_valid(), found, self.null_bool)
        return ~result if node.negated else result

    def visit_is_null(self, node: IsNull) -> Any:
        import pyarrow.compute as pc

        field = pc.field(node.ref.name)
        return field.is_valid() if node.negated else field.is_null()

    def visit_like(self, node: Like) -> Any:
        import pyarrow.compute as pc

        result = pc.match_like(pc.field(node.ref.name), node.pattern)
        return ~result if node.negated else result

    def visit_literal(self, node: Literal) -> Any:
        import pyarrow.compute as pc

        return self.null_bool if node.value is None else pc.scalar(_pa_literal(node.value))

    def visit_ref(self, node: Ref) -> Any:
        import pyarrow.compute as pc

        return pc.field(node.name)

    def visit_opaque(self, node: Opaque) -> Any:
        raise NotImplementedError(f"cannot evaluate an opaque predicate in pyarrow: {node.sql}")


def to_pyarrow(expr: Expr, schema: Any = None) -> Any:
    """Build a ``pyarrow.compute.Expression`` with SQL semantics.

    With a ``schema`` (pyarrow.Schema) literals are cast to their column's type
    where that is lossless (pyarrow cannot compare e.g. decimal128(12,2) with
    an int64 literal, nor a naive literal with a tz-aware column). A naive
    timestamp or date literal against a zoned column is wall-clock time in the
    column's zone, as Lance and the scans read it. ``Opaque`` raises
    NotImplementedError.
    """
    return visit(expr, _PyarrowRenderer(schema))
