"""``pyarrow.compute.Expression`` -> filter AST.

:func:`from_pyarrow` decodes the expression from Arrow's own lossless
serialization (``str(expr)`` loses types: binary prints as a string, decimals as
floats, zones are dropped) and translates it. :func:`scalar_to_py` turns a
pyarrow scalar into the Python value a filter literal holds.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from lance_partitioned.format.arrow_c import CArrowSchema, read_metadata
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.filters import terms
from lance_partitioned.format.filters.depth import translation_room
from lance_partitioned.format.filters.render import escape_like
from lance_partitioned.format.filters.terms import Term


def scalar_to_py(scalar: Any) -> Any:
    """A pyarrow scalar as a Python value render_literal understands."""
    import pyarrow as pa
    import pyarrow.types as pat

    t = scalar.type
    if not scalar.is_valid:
        return None
    if pat.is_dictionary(t):
        return scalar_to_py(scalar.value)
    if pat.is_timestamp(t) and t.unit == "ns":
        if scalar.value % 1000:
            raise ValueError(f"nanosecond timestamp literal {scalar} cannot be represented")
        scalar = scalar.cast(pa.timestamp("us", t.tz))
    if pat.is_time(t) and t.unit == "ns":
        if scalar.value % 1000:
            raise ValueError(f"nanosecond time literal {scalar} cannot be represented")
        scalar = scalar.cast(pa.time64("us"))
    if pat.is_duration(t) or pat.is_interval(t) or pat.is_nested(t):
        raise ValueError(f"unsupported literal type {t}: {scalar}")
    if pat.is_float16(t):
        return float(scalar.as_py())
    try:
        return scalar.as_py()
    except OverflowError:  # a date or time beyond Python's years 1 to 9999
        raise ValueError(
            f"a {t} literal ({scalar.value} since the epoch) is beyond the range of dates a "
            "filter can hold (years 1 to 9999)"
        ) from None


def arrow_type_to_sql(t: Any) -> str:
    import pyarrow.types as pat

    simple = [
        (pat.is_int8, "TINYINT"),
        (pat.is_int16, "SMALLINT"),
        (pat.is_int32, "INT"),
        (pat.is_int64, "BIGINT"),
        (pat.is_uint8, "TINYINT UNSIGNED"),
        (pat.is_uint16, "SMALLINT UNSIGNED"),
        (pat.is_uint32, "INT UNSIGNED"),
        (pat.is_uint64, "BIGINT UNSIGNED"),
        (pat.is_float32, "FLOAT"),
        (pat.is_float64, "DOUBLE"),
        (pat.is_boolean, "BOOLEAN"),
        (pat.is_date, "DATE"),
        (pat.is_timestamp, "TIMESTAMP"),
        (pat.is_time, "TIME"),
    ]
    for pred, name in simple:
        if pred(t):
            return name
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return "STRING"
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t):
        return "BINARY"
    if pat.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    raise ValueError(f"no SQL spelling for a cast to {t}")


def _ordered_metadata(schema: Any) -> list[tuple[str, str]]:
    """Schema metadata as an ordered list with duplicates (``Schema.metadata``
    is a dict, which loses both), read through the Arrow C data interface."""
    c_schema = CArrowSchema()
    schema._export_to_c(ctypes.addressof(c_schema))
    try:
        return [(k.decode(), v.decode()) for k, v in read_metadata(c_schema.metadata)]
    finally:
        if c_schema.release:
            c_schema.release(ctypes.addressof(c_schema))


@dataclass
class _DecodedPyarrowNode:
    """One node of a ``pc.Expression`` as decoded from its serialization."""

    kind: str  # literal | field | call
    value: Any = None  # pa.Scalar for literal, name for field, function name for call
    args: list[_DecodedPyarrowNode] | None = None
    options: Any = None  # StructScalar


def _pa_tree(expr: Any) -> _DecodedPyarrowNode:
    """Decode a pc.Expression from Arrow's own lossless serialization (the
    ``__reduce__`` payload: an IPC file whose schema metadata lists the nodes in
    prefix order and whose columns hold the literals and function options)."""
    import pyarrow as pa

    _fn, (buf,) = expr.__reduce__()
    reader = pa.ipc.open_file(buf)
    columns = reader.get_batch(0).columns if reader.num_record_batches else []
    items = _ordered_metadata(reader.schema)
    pos = 0

    def next_node() -> _DecodedPyarrowNode:
        nonlocal pos
        key, val = items[pos]
        pos += 1
        if key == "literal":
            return _DecodedPyarrowNode("literal", columns[int(val)][0])
        if key == "field_ref":
            return _DecodedPyarrowNode("field", val)
        if key == "nested_field_ref":
            raise ValueError(
                "nested field references (pc.field('s', 'a')) are not translated; "
                "give the filter as SQL text (s.a = 1)"
            )
        if key == "call":
            args: list[_DecodedPyarrowNode] = []
            options = None
            while items[pos][0] != "end":
                if items[pos][0] == "options":
                    options = columns[int(items[pos][1])][0]
                    pos += 1
                else:
                    args.append(next_node())
            pos += 1  # end
            return _DecodedPyarrowNode("call", val, args, options)
        raise ValueError(f"unexpected entry {key!r} in a serialized pyarrow expression")

    return next_node()


_PA_COMPARE = {
    "equal": "=",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
_PA_ARITH = {
    "add": "+",
    "add_checked": "+",
    "subtract": "-",
    "subtract_checked": "-",
    "multiply": "*",
    "multiply_checked": "*",
    "divide": "/",
    "divide_checked": "/",
}
_PA_FUNCTIONS = {
    "utf8_lower": "lower",
    "ascii_lower": "lower",
    "utf8_upper": "upper",
    "ascii_upper": "upper",
    "utf8_length": "character_length",
    "abs": "abs",
    "abs_checked": "abs",
    "is_nan": "isnan",
}
_PA_LOGICAL = {
    "and_kleene": ("AND", True),
    "or_kleene": ("OR", True),
    "and_not_kleene": ("AND NOT", True),
    "and": ("AND", False),
    "and_": ("AND", False),
    "or": ("OR", False),
    "or_": ("OR", False),
    "and_not": ("AND NOT", False),
}
_BOOL_CALLS = {"invert", "is_null", "is_valid", "is_in"} | set(_PA_COMPARE) | set(_PA_LOGICAL)
_LIKE_CALLS = {"match_like", "starts_with", "ends_with", "match_substring"}


def _value(n: _DecodedPyarrowNode) -> Term:
    """A pyarrow node used as a value."""
    if n.kind == "field":
        return terms.column(n.value)
    if n.kind == "literal":
        return terms.literal(scalar_to_py(n.value))
    name = n.value
    args = n.args or []
    if name in _PA_ARITH and len(args) == 2:
        left, right = _value(args[0]), _value(args[1])
        return terms.paren(terms.other(f"{left.sql} {_PA_ARITH[name]} {right.sql}", left, right))
    if name in ("negate", "negate_checked") and len(args) == 1:
        return terms.negative(_value(args[0]))
    if name in _PA_FUNCTIONS:
        parts = [_value(a) for a in args]
        sql = f"{_PA_FUNCTIONS[name]}({', '.join(a.sql for a in parts)})"
        return terms.other(sql, *parts)
    if name == "cast" and len(args) == 1 and n.options is not None:
        to_type = n.options.type.field("to_type").type
        return terms.cast(_value(args[0]), arrow_type_to_sql(to_type))
    if name in _BOOL_CALLS or name in _LIKE_CALLS:
        return terms.paren(_predicate(n, positive=False))
    raise ValueError(f"cannot translate pyarrow function {name!r} to SQL")


def _predicate(n: _DecodedPyarrowNode, positive: bool) -> Term:
    """A pyarrow node used as a predicate. In a ``positive`` context (under no
    NOT) NULL and FALSE filter alike, so pyarrow's never-null is_in may become
    a plain SQL IN; under a NOT the exact three-valued translation is used."""
    if n.kind != "call":
        return _value(n)
    name = n.value
    args = n.args or []
    opts = n.options.as_py() if n.options is not None else {}
    if name in _PA_COMPARE:
        return terms.compare(_PA_COMPARE[name], _value(args[0]), _value(args[1]))
    if name in _PA_LOGICAL:
        op, kleene = _PA_LOGICAL[name]
        if not kleene and op == "OR":
            # or(NULL, TRUE) is NULL, which drops a row SQL's OR keeps: no filtering
            # context makes them agree
            raise ValueError(
                f"pyarrow's non-Kleene {name!r} (NULL when either side is NULL) has no SQL "
                "equivalent; use | (or_kleene)"
            )
        if not kleene and not positive:
            # and(NULL, FALSE) is NULL where SQL says FALSE: only equivalent
            # while NULL and FALSE both mean "filtered out"
            raise ValueError(
                f"pyarrow's non-Kleene {name!r} under a negation has no SQL equivalent; use & / |"
            )
        left = _predicate(args[0], positive)
        if op == "AND NOT":
            right = terms.negation(_predicate(args[1], not positive), parenthesize=True)
            op = "AND"
        else:
            right = _predicate(args[1], positive)
        return terms.paren(terms.logical(op, left, right))
    if name == "invert":
        return terms.negation(_predicate(args[0], not positive), parenthesize=True)
    if name == "is_null":
        target = _value(args[0])
        if opts.get("nan_is_null"):
            isnan = terms.other(f"isnan({target.sql})", target)
            return terms.paren(terms.logical("OR", terms.is_null(target, False), isnan))
        return terms.is_null(target, False)
    if name == "is_valid":
        return terms.is_null(_value(args[0]), True)
    if name == "is_in":
        return _is_in(_value(args[0]), n.options, positive)
    if name in _LIKE_CALLS:
        pattern = opts["pattern"]
        if name == "starts_with":
            pattern = escape_like(pattern) + "%"
        elif name == "ends_with":
            pattern = "%" + escape_like(pattern)
        elif name == "match_substring":
            pattern = "%" + escape_like(pattern) + "%"
        op = "ILIKE" if opts.get("ignore_case") else "LIKE"
        return terms.like(_value(args[0]), op, terms.literal(pattern), False)
    return _value(n)


def _is_in(x: Term, options: Any, positive: bool) -> Term:
    """pyarrow's is_in, whose null handling is an option, in SQL three-valued logic."""
    values = [scalar_to_py(s) for s in options["value_set"].values]
    present = [terms.literal(v) for v in values if v is not None]
    has_null = len(present) != len(values)
    fields = {f.name for f in options.type}
    if "null_matching_behavior" in fields:
        behavior = ["MATCH", "SKIP", "EMIT_NULL", "INCONCLUSIVE"][
            options["null_matching_behavior"].as_py()
        ]
    else:
        behavior = "SKIP" if options["skip_nulls"].as_py() else "MATCH"
    false, null = terms.literal(False), terms.literal(None)
    found = terms.in_list(x, present, False) if present else false
    # NULL where x is NULL, FALSE otherwise
    null_if_null = terms.paren(terms.logical("AND", terms.is_null(x, False), null))
    if behavior == "INCONCLUSIVE":  # SQL semantics
        if has_null:
            return terms.in_list(x, [*present, null], False)
        return found if present else null_if_null
    if behavior == "MATCH" and has_null:
        # never NULL: a null x matches iff the set holds a null
        return terms.paren(terms.logical("OR", terms.is_null(x, False), found))
    if behavior in ("MATCH", "SKIP"):  # never NULL, a null x never matches
        if positive:
            return found
        return terms.paren(terms.logical("AND", terms.is_null(x, True), found))
    # EMIT_NULL: null x -> NULL, nulls in the set ignored
    if present:
        return found
    return false if positive else null_if_null


def from_pyarrow(expr: Any) -> Expr:
    """Translate a ``pyarrow.compute.Expression`` into the filter AST.

    Handles field references, scalars (int, float, decimal, string, binary,
    bool, date, timestamp, time, null), comparisons, and/or (Kleene),
    invert, is_null, is_valid, is_in (all null-matching behaviours, exactly),
    match_like / starts_with / ends_with / match_substring, and — as Opaque —
    arithmetic, cast and a few string functions. Anything else raises
    ValueError naming the function.

    Rather than parsing ``str(expr)`` (which loses types: binary prints as a
    string, decimals as floats, zones are dropped), this reads Arrow's own
    serialization of the expression and translates it node by node, to the
    same AST ``parse_filter`` gives for the equivalent SQL.
    """
    import pyarrow.compute as pc

    if not isinstance(expr, pc.Expression):
        raise TypeError(f"expected a pyarrow.compute.Expression, got {type(expr).__name__}")
    with translation_room("pyarrow"):
        return terms.as_bool(_predicate(_pa_tree(expr), positive=True))
