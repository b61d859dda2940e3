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


def to_pyarrow(expr: Expr, schema: Any = None) -> Any:
    """Build a ``pyarrow.compute.Expression`` with SQL semantics.

    With a ``schema`` (pyarrow.Schema) literals are cast to their column's type
    where that is lossless (pyarrow cannot compare e.g. decimal128(12,2) with
    an int64 literal, nor a naive literal with a tz-aware column). A naive
    timestamp or date literal against a zoned column is wall-clock time in the
    column's zone, as Lance and the scans read it. ``Opaque`` raises
    NotImplementedError.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    def field_type(name: str) -> Any:
        if schema is None:
            return None
        idx = schema.get_field_index(name)
        return schema.field(idx).type if idx >= 0 else None

    null_bool = pc.scalar(pa.scalar(None, pa.bool_()))

    def build(e: Expr) -> Any:
        if isinstance(e, And):
            return build(e.left) & build(e.right)
        if isinstance(e, Or):
            return build(e.left) | build(e.right)
        if isinstance(e, Not):
            return ~build(e.child)
        if isinstance(e, Compare):
            field = pc.field(e.ref.name)
            lit = pc.scalar(_pa_literal(e.literal.value, field_type(e.ref.name)))
            fn = {
                "=": pc.equal,
                "!=": pc.not_equal,
                "<": pc.less,
                "<=": pc.less_equal,
                ">": pc.greater,
                ">=": pc.greater_equal,
            }[e.op]
            return fn(field, lit)
        if isinstance(e, In):
            field = pc.field(e.ref.name)
            present = [v.value for v in e.values if v.value is not None]
            has_null = len(present) != len(e.values)
            if not present:
                # x IN (NULL) is NULL; x IN () is FALSE
                result = null_bool if has_null else pc.scalar(False)
            else:
                ftype = field_type(e.ref.name)
                scalars = [_pa_literal(v, ftype) for v in present]
                types = {sc.type for sc in scalars}
                if len(types) == 1 and (ftype is None or types == {ftype}):
                    value_set = pa.array(scalars)
                    found = pc.is_in(field, value_set=value_set, skip_nulls=True)
                else:
                    # is_in does not promote types (int32 vs decimal128(1,1) fails);
                    # x IN (a, b) is exactly x = a OR x = b, and equal() promotes
                    found = pc.equal(field, pc.scalar(scalars[0]))
                    for sc in scalars[1:]:
                        found = found | pc.equal(field, pc.scalar(sc))
                if has_null:
                    found = found | null_bool  # no match against a list with NULL -> NULL
                # SQL: NULL IN (...) is NULL, pyarrow's is_in says FALSE
                result = pc.if_else(field.is_valid(), found, null_bool)
            return ~result if e.negated else result
        if isinstance(e, IsNull):
            field = pc.field(e.ref.name)
            return field.is_valid() if e.negated else field.is_null()
        if isinstance(e, Like):
            result = pc.match_like(pc.field(e.ref.name), e.pattern)
            return ~result if e.negated else result
        if isinstance(e, Literal):
            return null_bool if e.value is None else pc.scalar(_pa_literal(e.value))
        if isinstance(e, Ref):
            return pc.field(e.name)
        if isinstance(e, Opaque):
            raise NotImplementedError(f"cannot evaluate an opaque predicate in pyarrow: {e.sql}")
        raise TypeError(f"not a filter expression: {e!r}")

    return build(expr)
